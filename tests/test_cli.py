"""CLI conventions: --json is one JSON document on stdout; errors are one stderr line, no traceback."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from spectral_analysis.cli import main
from spectral_analysis.linalg import svd_compose


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spectral_analysis.cli", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_demo_json_is_one_document_with_measured_numbers():
    proc = run("svd-demo", "--size", "12", "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["full_decomposition"]["rebuild_error_fast"] < 1e-10
    verdicts = [item["member"] for item in payload["partial_counts"]]
    assert verdicts == [True, False]
    low, high = payload["sigma_constraint"]["singular_values_range"]
    assert 0.9 - 1e-12 <= low <= high <= 1.1 + 1e-12


@pytest.mark.slow
def test_decompose_member_from_npy_writes_vectors(tmp_path):
    gen = torch.Generator().manual_seed(0)
    W = svd_compose([torch.randn(i, dtype=torch.float64, generator=gen) for i in range(5, 7)],
                    [torch.randn(i, dtype=torch.float64, generator=gen) for i in range(6, 7)],
                    torch.tensor([3.0, 2.0, 1.5, 1.0, 0.7, 0.5], dtype=torch.float64), (6, 6))
    np.save(tmp_path / "w.npy", W.numpy())
    out = tmp_path / "vec.npz"
    proc = run("decompose", str(tmp_path / "w.npy"), "--m1", "2", "--m2", "1", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["member"] is True and payload["k1"] == 5 and payload["k2"] == 6
    saved = np.load(out)
    assert sorted(saved.files) == ["sigma", "u_5", "u_6", "v_6"]


@pytest.mark.slow
def test_decompose_non_member_from_csv_text_output(tmp_path):
    path = tmp_path / "w.csv"
    np.savetxt(path, np.random.default_rng(0).standard_normal((10, 10)), delimiter=",")
    proc = run("decompose", str(path), "--m1", "1", "--m2", "1")
    assert proc.returncode == 0
    assert "NOT in the image" in proc.stdout and "rank" in proc.stdout


@pytest.mark.parametrize("args,needle", [
    (["decompose", "/nonexistent/w.npy"], "matrix file not found"),
    (["svd-demo", "--size", "1"], "--size must lie in [2, 512]"),
])
@pytest.mark.slow
def test_errors_are_one_line_without_traceback(args, needle):
    proc = run(*args)
    assert proc.returncode != 0
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


def test_bad_counts_and_foreign_files_are_clear_errors(tmp_path, capsys):
    path = tmp_path / "w.npy"
    np.save(path, np.eye(3))
    assert main(["decompose", str(path), "--m1", "7"]) == 1
    assert "m1=7" in capsys.readouterr().err
    pickled = tmp_path / "obj.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert main(["decompose", str(pickled)]) == 1
    assert "cannot read a matrix" in capsys.readouterr().err
    vector = tmp_path / "v.npy"
    np.save(vector, np.ones(4))
    assert main(["decompose", str(vector)]) == 1
    assert "expected a 2-D numeric matrix" in capsys.readouterr().err


@pytest.mark.slow
def test_debug_shows_the_traceback(tmp_path):
    proc = run("--debug", "decompose", str(tmp_path / "missing.npy"))
    assert proc.returncode != 0 and "Traceback" in proc.stderr


@pytest.mark.slow
def test_params_json_gives_the_section_4_count():
    proc = run("params", "--model", "spectral", "--inputs", "1", "--hidden", "128", "--outputs", "10",
               "--m1", "16", "--m2", "16", "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    n, ni, ny, m1, m2 = 128, 1, 10, 16, 16
    assert payload["total"] == (ny + ni + m1 + m2 + 2) * n - (m1**2 + m2**2 - m1 - m2) // 2
    assert payload["transition"] == sum(range(113, 129)) * 2 + 128
    assert {k: payload[k] for k in ("input", "output", "bias")} == {"input": 128, "output": 1280, "bias": 128}


def test_params_text_and_flag_errors(capsys):
    assert main(["params", "--model", "ornn", "--inputs", "2", "--hidden", "8", "--outputs", "1",
                 "--m", "3"]) == 0
    out = capsys.readouterr().out
    assert "transition" in out and f"{8 + 7 + 6:>12,d}" in out
    assert main(["params", "--model", "kru", "--inputs", "2", "--hidden", "8", "--outputs", "1", "--complex",
                 "--activation", "modrelu"]) == 0
    lines = dict(line.split() for line in capsys.readouterr().out.splitlines()[1:])
    assert lines["start_state"] == "16" and int(lines["total"]) == sum(int(v) for k, v in lines.items()
                                                                      if k != "total")
    assert main(["params", "--model", "spectral", "--inputs", "2", "--hidden", "8", "--outputs", "1",
                 "--m", "3"]) == 1
    assert "does not take option(s) ['m']" in capsys.readouterr().err
    assert main(["params", "--model", "spectral", "--inputs", "2", "--hidden", "8", "--outputs", "1",
                 "--m1", "9"]) == 1
    assert "m1=9" in capsys.readouterr().err
    assert main(["params", "--model", "spectral", "--inputs", "2", "--hidden", "8", "--outputs", "1",
                 "--unit-reflectors", "--input-std", "0.1", "--json"]) == 0
    options = json.loads(capsys.readouterr().out)["options"]
    assert options["unit_reflectors"] is True and options["input_std"] == 0.1
    assert main(["params", "--model", "lstm", "--inputs", "2", "--hidden", "8", "--outputs", "1",
                 "--m1", "4"]) == 1
    assert "does not take option(s) ['m1']" in capsys.readouterr().err


def test_thread_policy_takes_the_free_cores_and_threads_overrides(capsys):
    from spectral_analysis.threads import free_cores, set_threads

    assert free_cores(cores=2, load=2.6) == 1  # a busy 2-core machine: one thread, never two
    assert free_cores(cores=2, load=0.1) == 2 and free_cores(cores=16, load=4.0) == 12
    assert free_cores(cores=4, load=40.0) == 1
    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
        with pytest.raises(SystemExit):  # ranged by the parser
            main(["--threads", "0", "params", "--model", "rnn", "--inputs", "1", "--hidden", "8",
                  "--outputs", "1"])
        assert "--threads: must be an integer in [1, 1024]" in capsys.readouterr().err
    finally:
        torch.set_num_threads(before)


def test_commands_and_cpu_training_flush_denormal_floats_while_they_run(tmp_path, monkeypatch):
    """Numbers below float32's smallest normal (the slow microcode path of states decaying over long
    sequences, threads.denormals_flushed) read as zero while a command or a CPU trainer's run goes on, and
    are back after it: the process's own setting (hypothesis refuses to run without denormals)."""
    from spectral_analysis.threads import denormals_flushed
    from spectral_analysis.train import TrainConfig, Trainer

    def tiny() -> float:
        return (torch.tensor([1e-39]) * 1.0).item()

    with denormals_flushed() as flushing:
        if not flushing:
            pytest.skip("this CPU cannot flush denormals (torch.set_flush_denormal: x86 with SSE3 only)")
        assert tiny() == 0
        with denormals_flushed():
            pass
        assert tiny() == 0  # an inner block gives back the outer one's setting
    assert tiny() > 0
    seen = []
    monkeypatch.setattr(Trainer, "_run", lambda self, *args: seen.append(tiny()) or {})
    Trainer(TrainConfig(task="addition", model="rnn", hidden=4, steps=2, batch_size=8, device="cpu",
                        out=str(tmp_path / "run"), progress=False,
                        task_options={"length": 3, "train_size": 16, "valid_size": 8, "test_size": 8})).run()
    monkeypatch.setattr("spectral_analysis.cli.models.cmd_params", lambda args: seen.append(tiny()) or 0)
    assert main(["--quiet", "params", "--model", "rnn", "--inputs", "1", "--hidden", "8", "--outputs",
                 "1"]) == 0
    assert seen == [0, 0] and tiny() > 0  # in the trainer's run, in the command, and not after either
    code = ("from spectral_analysis.threads import denormals_flushed; import numpy as np\n"
            "with denormals_flushed(): np.finfo(np.float64).smallest_subnormal")  # numpy's limits, unwarned
    assert subprocess.run([sys.executable, "-W", "error", "-c", code], timeout=120).returncode == 0


def test_the_parser_loads_without_torch_and_answers_version():
    """--help, --version and argument errors need only the parser: building it must not import torch,
    numpy, matplotlib, scipy or sympy (the command imports what it runs)."""
    code = ("import sys; from spectral_analysis.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('torch', 'numpy', 'matplotlib', 'scipy', 'sympy', 'seaborn') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    version = subprocess.run([sys.executable, "-m", "spectral_analysis.cli", "--version"],
                             capture_output=True, text=True, check=True).stdout
    from spectral_analysis import __version__
    assert version.strip() == f"spectral-analysis {__version__}"


@pytest.mark.slow
def test_a_closed_pipe_ends_quietly():
    """``spectral-analysis zoo --json | head -c 100``: the reader leaves early; no traceback, no error."""
    process = subprocess.Popen([sys.executable, "-m", "spectral_analysis.cli", "zoo", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.read(100)
    process.stdout.close()
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0 and b"Broken pipe" not in err and b"Traceback" not in err, err


def test_train_reruns_a_run_from_its_own_config(tmp_path, capsys):
    """``train --config RUN/config.json --out NEW`` repeats the run: the same seed gives the same metrics."""
    first = tmp_path / "first"
    args = ["train", "--model", "spectral", "--m1", "2", "--m2", "2", "--task", "addition", "--length", "6",
            "--train-size", "64", "--valid-size", "16", "--test-size", "16", "--hidden", "4", "--steps", "8",
            "--batch-size", "8", "--no-progress", "--out", str(first), "--json"]
    assert main(args) == 0
    original = json.loads(capsys.readouterr().out)
    assert main(["train", "--config", str(first / "config.json"), "--out", str(tmp_path / "again"),
                 "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["test"]["mse"] == pytest.approx(original["test"]["mse"], rel=1e-6)
    assert main(["train", "--config", str(first / "config.json"), "--model", "rnn"]) == 1
    assert "drop --model and --task" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text('{"train": {"model": "rnn"}}')
    assert main(["train", "--config", str(tmp_path / "bad.json"), "--out", str(tmp_path / "x")]) == 1
    assert "is not a run's config.json" in capsys.readouterr().err
    assert main(["train", "--model", "rnn", "--out", str(tmp_path / "y")]) == 1
    assert "needs --model, --task and --out" in capsys.readouterr().err


def test_every_real_valued_option_refuses_nan_inf_and_overflow_at_the_edge(capsys):
    import argparse

    from spectral_analysis.cli import build_parser, main
    from spectral_analysis.cli.common import real

    def actions(parser: argparse.ArgumentParser):
        for action in parser._actions:
            yield action
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from actions(sub)

    typed = [a for a in actions(build_parser()) if a.type in (float, real)]
    assert len(typed) >= 25 and all(a.type is real for a in typed), [a.dest for a in typed if a.type is float]
    for args, option in ((["train", "--model", "rnn", "--task", "addition", "--lr", "nan"], "--lr"),
                         (["certify", "x.pt", "--delta", "inf"], "--delta"),
                         (["train", "--model", "spectral", "--task", "addition", "--r", "1e999"], "--r"),
                         (["bound", "x.pt", "--margin=-inf"], "--margin")):
        with pytest.raises(SystemExit) as exit_:
            main(args)
        assert exit_.value.code == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"argument {option}: must be a finite number" in last and "Traceback" not in last


def test_every_model_option_has_a_flag(capsys):
    """Each option of every registered model can be set from the command line, dropout included."""
    from spectral_analysis.cli.models import MODEL_FLAGS
    from spectral_analysis.vocabulary import MODEL_OPTIONS

    assert set(MODEL_FLAGS) == {option for options in MODEL_OPTIONS.values() for option in options}
    assert main(["params", "--model", "lstm", "--inputs", "3", "--hidden", "4", "--outputs", "2",
                 "--dropout", "0.2", "--dropout-kind", "locked", "--json"]) == 0
    options = json.loads(capsys.readouterr().out)["options"]
    assert options["dropout"] == 0.2 and options["dropout_kind"] == "locked"
