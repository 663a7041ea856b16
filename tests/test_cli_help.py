"""Every command's help ends with examples, and each example parses with the options the command has;
every command takes ``--format``, and a record prints as a one-row CSV."""

import csv
import io
import json
import shlex

import pytest

from spectral_analysis.cli import build_parser, main
from spectral_analysis.cli.examples import EXAMPLES


def _commands() -> dict:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    return sub.choices


def test_every_command_has_examples_that_parse():
    commands = _commands()
    assert set(EXAMPLES) == set(commands)
    parser = build_parser()
    for command, lines in EXAMPLES.items():
        assert "examples:" in commands[command].format_help()
        for line in lines:
            words = shlex.split(line)
            assert words[:2] == ["spectral-analysis", command], line
            args = parser.parse_args(words[1:])  # an unknown option or a bad value exits here
            assert args.command == command


@pytest.mark.parametrize("command", sorted(EXAMPLES))
def test_every_command_takes_format(command):
    assert "--format {text,json,csv,md}" in _commands()[command].format_help()


def test_a_record_prints_as_one_csv_row(capsys):
    assert main(["svd-demo", "--size", "4", "--format", "csv"]) == 0
    (row,) = csv.DictReader(io.StringIO(capsys.readouterr().out))
    assert row["full_decomposition.n"] == "4"  # nested fields as parent.child
    assert json.loads(row["partial_counts"])[0]["m1"] == 1  # a list cell as JSON


def test_the_library_logs_and_the_command_shows_its_warnings(tmp_path, capsys):
    """A resume of a run killed before its first checkpoint: the trainer logs why it starts over, and
    the command line shows the library's log on stderr."""
    from spectral_analysis.train import TrainConfig, Trainer

    (tmp_path / "run").mkdir()
    config = TrainConfig(task="addition", model="rnn", hidden=4, steps=2, out=str(tmp_path / "run"),
                         task_options={"length": 3, "train_size": 8, "valid_size": 4, "test_size": 4},
                         batch_size=4, progress=False)
    Trainer(config, resume=True)
    assert "spectral-analysis" not in capsys.readouterr().err  # a library user: no handler of ours
    assert main(["--quiet", "train", "--resume", "--model", "rnn", "--task", "addition", "--length", "3",
                 "--hidden", "4", "--steps", "2", "--batch-size", "4", "--out", str(tmp_path / "run"),
                 "--json"]) == 0
    assert "spectral-analysis: WARNING:" in capsys.readouterr().err
