"""The experiments catalog: every entry loads and quotes its paper, trials resolve and filter, budget
scales, `NAME@SCALE`, runs that outlive a catalog edit, and the grids `make paper` runs."""

import json
import re
from pathlib import Path

import pytest
from experiment_fixtures import ROOT, TINY, make_recipe_grids, tiny_catalog

from spectral_analysis.cli import main
from spectral_analysis.experiments import (
    SCALES,
    load_catalog,
    load_experiment,
    run_trial,
)
from spectral_analysis.experiments.catalog import printed_row
from spectral_analysis.experiments.grid import CONFIG_FIELDS
from spectral_analysis.experiments.trial import TrialSpec
from spectral_analysis.paper.kept import MIN_SEEDS


def _normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_every_catalog_entry_loads_with_both_scales_and_the_same_grid():
    catalog = load_catalog()
    assert {
        "fig1-addition",
        "fig2-copy",
        "table2-mnist",
        "fig3-mnist",
        "fig5-depth",
        "table3-ptb",
        "table4-ucr",
        "svdrnn-fig2-leak",
        "kru-copy",
        "kru-adding",
        "dizzy-copy",
    } <= set(catalog)
    for experiment in catalog.values():
        keys = {s: [t.key.rsplit("_s", 1)[0] for t in experiment.trials(s, seeds=1)]
                for s in SCALES if s in experiment.scales}
        assert all(k == keys["paper"] for k in keys.values()), experiment.name
        # a validation grid, like the papers' own, may keep one seed: no verdict is drawn from it
        assert experiment.seeds("smoke") == 1 and experiment.seeds("paper") >= (1 if experiment.selects
                                                                                else MIN_SEEDS)
        assert all(set(t.config) <= set(CONFIG_FIELDS) for t in experiment.trials("paper"))


def test_every_paper_scale_quotes_the_paper_verbatim(papers_text):
    for experiment in load_catalog().values():
        fragments = [_normalized(f) for f in experiment.scales["paper"]["stated"].split("[...]")]
        missing = [f for f in fragments if f and f not in papers_text]
        assert not missing, (experiment.name, missing)


def test_icml_irnn_starts_orthogonal_as_section_7_says_and_another_start_is_a_named_reading_beside_it():
    """The ``irnn`` of an ICML grid starts as Section 7 states; another start is a variant of its own name,
    with a kept calibration of the recipe the grid trains and notes that quote the sentence it departs from
    (fig3-mnist's ``irnn-identity``: Le et al.'s identity with nn.RNN's bias pair, clipped)."""
    from spectral_analysis.experiments.calibration import recipe_status

    departures = []
    for experiment in load_catalog().values():
        if experiment.source.startswith(("ICML", "toolkit")):
            for trial in experiment.trials("paper", seeds=1):
                options = trial.config["model_options"] if trial.config["model"] == "irnn" else {}
                if options and options["init"] != "orthogonal":
                    assert trial.variant == f"irnn-{options['init']}", trial.key
                    kept = (ROOT / "results" / experiment.name / "calibration" / "paper" /
                            f"{trial.variant}.json")
                    assert recipe_status(json.loads(kept.read_text()), experiment, "paper") == "the grid's"
                    stated = "Section 7 states 'The transition matrix in IRNN is initialized to be orthogonal"
                    assert stated in " ".join(experiment.notes), experiment.name
                    departures.append(experiment.name)
    assert set(departures) == {"fig3-mnist"}


def test_a_catalog_file_is_resolved_once_per_text_and_an_edit_is_read_afresh(tmp_path):
    import dataclasses

    path = tiny_catalog(tmp_path) / "tiny.toml"
    first = load_experiment(path)
    assert load_experiment(path) is first and load_catalog(path.parent)["tiny"] is first
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.name = "renamed"  # shared between callers, so nobody may change it
    path.write_text(TINY.replace("lr = 1e-2", "lr = 5e-2"))  # the same length: only the text tells
    edited = load_experiment(path)
    assert edited is not first and {t.config["lr"] for t in edited.trials("smoke")} == {5e-2}
    assert {t.config["lr"] for t in first.trials("smoke")} == {1e-2}


def test_trial_resolution_order_keys_and_filters(tmp_path):
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    paper = experiment.trials("paper")
    assert (
        len(paper) == 2 * 2 * 3
        and paper[0].key == "rnn_length5_s0"
        and paper[-1].key == "spectral_length7_s2"
    )
    spectral = [t for t in paper if t.variant == "spectral"][0]
    # base, variant, scale, the variant's scale overrides, then the axis value (merged into task_options)
    assert spectral.config["model_options"] == {"m1": 2, "m2": 3} and spectral.config["hidden"] == 6
    assert spectral.config["task_options"] == {
        "train_size": 64,
        "valid_size": 16,
        "test_size": 16,
        "length": 5,
    }
    smoke = experiment.trials("smoke", only={"variant": "spectral", "length": "7"})
    assert [t.key for t in smoke] == ["spectral_length7_s0"] and "model_options" not in smoke[0].config
    either = experiment.trials("smoke", only={"length": "5,7", "variant": "spectral"})
    assert [t.key for t in either] == ["spectral_length5_s0", "spectral_length7_s0"]
    from spectral_analysis.cli.common import CommandError
    from spectral_analysis.cli.sweeps import selection

    merged = selection(["variant=rnn", "length=7", "variant=spectral"])
    assert merged == {"variant": "rnn,spectral", "length": "7"}
    with pytest.raises(CommandError, match="KEY=VALUE"):
        selection(["variant="])
    assert len(experiment.trials("paper", seeds=1)) == 4
    with pytest.raises(ValueError, match="seeds must be an integer in \\[1, 1000\\]"):
        experiment.trials("paper", seeds=0)
    with pytest.raises(ValueError, match="has no scale 'huge'"):
        experiment.trials("huge")


def test_a_variant_of_another_reading_names_its_printed_row_and_trains_the_same_config(tmp_path, monkeypatch):
    """A variant's ``row`` and ``reading`` say which printed row it trains and how: the tables read them,
    and they are words, not training fields, so they leave the variant's trials as they were."""
    worded = TINY.replace('label = "spectral"',
                          'label = "spectral"\nrow = "rnn"\nreading = "unit reflectors"')
    (tmp_path / "plain").mkdir()
    (tmp_path / "worded").mkdir()
    plain = load_experiment(tiny_catalog(tmp_path / "plain") / "tiny.toml")
    experiment = load_experiment(tiny_catalog(tmp_path / "worded", worded) / "tiny.toml")
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tmp_path / "worded" / "catalog"))
    assert printed_row("tiny", "spectral") == ("rnn", "unit reflectors")
    assert printed_row("tiny", "rnn") == ("rnn", None)
    assert printed_row("tiny", "removed-since") == ("removed-since", None)
    assert printed_row("not-in-the-catalog", "spectral") == ("spectral", None)
    assert [t.config for t in experiment.trials("paper")] == [t.config for t in plain.trials("paper")]


def test_axis_values_that_differ_keep_trial_names_that_differ(tmp_path):
    text = TINY.replace('"task_options.length" = [5, 7]', "lr = [1e-30, 1e30]")
    lrs = load_experiment(tiny_catalog(tmp_path, text) / "tiny.toml").trials("smoke")
    assert [t.key for t in lrs if t.variant == "rnn"] == ["rnn_lr1e-30_s0", "rnn_lr1e+30_s0"]
    clash = TINY.replace('"task_options.length" = [5, 7]',
                         '"model_options.activation" = ["leaky relu", "leaky-relu"]')
    with pytest.raises(ValueError, match=r"give the same trial name \['rnn_activationleaky-relu_s0'"):
        load_experiment(tiny_catalog(tmp_path, clash) / "tiny.toml").trials("smoke")


@pytest.mark.parametrize(
    "edit, message",
    [
        (("lr = 1e-2", "lr = 1e-2\nlearning_rate = 3"), "unknown training field"),
        (('stated = "quoted"', ""), "needs 'stated'"),
        (('label = "spectral"', 'label = "rnn"'), "labels repeat"),
        (("[scales.smoke]", "[scales.tiny]"), r"scale\(s\) \['smoke'\] missing"),
        (
            ("steps = 8\ntask_options = { train_size = 64", "steps = 0\ntask_options = { train_size = 64"),
            "steps must be a positive integer",
        ),
        (('"task_options.length" = [5, 7]', '"task_options.length" = []'), "non-empty list"),
        (('label = "spectral"', 'label = "spectral"\nrow = "rnn"'), "'row' .*'reading' .* come together"),
        (('label = "spectral"', 'label = "spectral"\nrow = "spectral"\nreading = "x"'), "not its own label"),
        (('label = "spectral"', 'label = "spectral"\nrow = "rnn"\nreading = " "'), "non-empty text"),
    ],
)
def test_bad_catalog_files_are_refused_naming_file_and_problem(tmp_path, edit, message):
    directory = tiny_catalog(tmp_path, TINY.replace(*edit))
    with pytest.raises(ValueError, match=message) as error:
        load_experiment(directory / "tiny.toml")
    assert "tiny.toml" in str(error.value)


def test_only_given_twice_keeps_both_values_as_one_only_with_two_values_does():
    """`--only variant=a --only variant=b` once kept only b's trials, silently (a GPU call lost its
    rnn trials that way): the flags add up, as `--only variant=a variant=b` does."""
    from spectral_analysis.cli import build_parser
    from spectral_analysis.cli.sweeps import selection

    parse = build_parser().parse_args
    twice = parse(["run", "tiny", "--only", "variant=rnn", "--only", "variant=spectral", "seed=0"])
    once = parse(["run", "tiny", "--only", "variant=rnn", "variant=spectral", "seed=0"])
    assert selection(twice.only) == selection(once.only) == {"variant": "rnn,spectral", "seed": "0"}


BUDGET = """[scales.budget]
seeds = 2
budget = "2 of the paper's 8 steps"
steps = 2

[scales.smoke]"""


def test_a_budget_scale_keeps_the_paper_sizes_and_sets_its_own_training_length(tmp_path):
    text = TINY.replace("steps = 8\ntask_options = { train_size = 64", "steps = 8\nmax_steps = 16\n"
                        "task_options = { train_size = 64").replace("[scales.smoke]", BUDGET)
    experiment = load_experiment(tiny_catalog(tmp_path, text) / "tiny.toml")
    paper = {t.key: t.config for t in experiment.trials("paper", seeds=2)}
    budget = experiment.trials("budget")
    assert len(budget) == 2 * 2 * 2 and experiment.budget == "2 of the paper's 8 steps"
    for trial in budget:
        expected = {k: v for k, v in paper[trial.key].items() if k != "max_steps"} | {"steps": 2}
        assert trial.config == expected, trial.key  # hidden 6, m1/m2 of [variants.paper], the paper's data
    assert "budget" not in load_experiment(tiny_catalog(tmp_path) / "tiny.toml").scales


@pytest.mark.parametrize(
    "edit, message",
    [
        (('budget = "2 of the paper\'s 8 steps"\n', ""), r"\[scales.budget\] needs 'budget'"),
        (("steps = 2\n\n[scales.smoke]", "\n[scales.smoke]"), "its own 'steps' or 'epochs'"),
        (("[scales.budget]", "[scales.huge]"), r"unknown scale\(s\) \['huge'\]"),
    ],
)
def test_a_budget_scale_must_state_its_budget_and_length(tmp_path, edit, message):
    text = TINY.replace("[scales.smoke]", BUDGET).replace(*edit)
    with pytest.raises(ValueError, match=message):
        load_experiment(tiny_catalog(tmp_path, text) / "tiny.toml")


def test_run_all_at_the_budget_scale_sweeps_only_the_experiments_that_have_one(tmp_path, capsys):
    from spectral_analysis.cli.common import CommandError
    from spectral_analysis.cli.sweeps import named_sweeps

    catalog = load_catalog()
    having = [name for name, scale in named_sweeps(catalog, ["all"], "budget") if scale == "budget"]
    assert set(having) == {"table2-mnist", "table2-grid", "table2-lstm-grid", "fig3-mnist",
                           "fig3-authors-code", "table3-ptb", "kru-mnist", "kru-ptb"}
    assert named_sweeps(catalog, ["all"], "paper") == [(name, "paper") for name in catalog]
    with pytest.raises(CommandError, match=r"\['fig1-addition'\] have no 'budget' scale; those that do"):
        named_sweeps(catalog, ["table2-mnist", "fig1-addition"], "budget")
    assert main(["run", "fig1-addition", "--scale", "budget"]) == 1
    assert "have no 'budget' scale" in capsys.readouterr().err


def test_name_at_scale_runs_that_experiment_at_its_own_scale_beside_the_others(capsys):
    """``table2-mnist@budget kru-copy --scale paper``: one grid, each experiment at its scale."""
    from spectral_analysis.cli.common import CommandError
    from spectral_analysis.cli.sweeps import named_sweeps

    catalog = load_catalog()
    assert named_sweeps(catalog, ["table2-mnist@budget", "kru-copy"], "paper") == [
        ("table2-mnist", "budget"), ("kru-copy", "paper")]
    with pytest.raises(CommandError, match=r"\['kru-copy'\] have no 'budget' scale"):
        named_sweeps(catalog, ["kru-copy@budget"], "paper")
    with pytest.raises(CommandError, match=r"'table2-mnist@huge': unknown scale 'huge'"):
        named_sweeps(catalog, ["table2-mnist@huge"], "paper")
    assert main(["park", "table2-mnist@budget", "table2-mnist", "--scale", "paper"]) == 1
    assert "['table2-mnist'] named more than once" in capsys.readouterr().err


def test_a_run_directory_of_an_older_catalog_entry_is_started_over_not_resumed(tmp_path, caplog):
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    trial = experiment.trials("smoke", seeds=1)[0]

    def run(hidden: int) -> dict:
        config = {**trial.config, "hidden": hidden}
        spec = TrialSpec({**trial.__dict__, "config": config}, str(tmp_path / "runs" / trial.key),
                         str(tmp_path / "results"), "cpu", "test")
        return run_trial(spec)

    assert run(4)["status"] == "done"
    with caplog.at_level("WARNING", logger="spectral_analysis"):
        row = run(5)  # the catalog's entry changed: its old run cannot be resumed
    assert row["status"] == "done" and row["hidden"] == 5, row.get("error")
    assert f"{trial.key} starts over" in caplog.text and "hidden was 4 in this run, now 5" in caplog.text
    stored = json.loads((tmp_path / "runs" / trial.key / "config.json").read_text())
    assert stored["train"]["hidden"] == 5


def test_a_run_directory_moved_to_another_folder_is_resumed_not_started_over(tmp_path):
    """The sweep once read a moved run as an older catalog entry's (its config.json records the folder
    it was trained in) and deleted it with its checkpoints."""
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    trial = experiment.trials("smoke", seeds=1)[0]

    def run(runs: Path, steps: int) -> dict:
        spec = TrialSpec({**trial.__dict__, "config": {**trial.config, "steps": steps}},
                         str(runs / trial.key), str(tmp_path / "results"), "cpu", "test")
        return run_trial(spec)

    assert run(tmp_path / "runs", 4)["status"] == "done"
    (tmp_path / "runs").rename(tmp_path / "moved")
    first = (tmp_path / "moved" / trial.key / "checkpoints" / "step-000004.safetensors").stat().st_mtime_ns
    longer = run(tmp_path / "moved", 8)
    assert longer["status"] == "done" and longer["steps"] == 8, longer.get("error")
    again = (tmp_path / "moved" / trial.key / "checkpoints" / "step-000004.safetensors").stat().st_mtime_ns
    assert again == first  # the first run's checkpoint is the one the run went on from: not trained again


def test_one_grid_runs_the_experiments_in_order_each_longest_first_by_its_kept_estimate(tmp_path,
                                                                                     monkeypatch):
    from contextlib import nullcontext

    from spectral_analysis.experiments import runner

    catalog = tiny_catalog(tmp_path)
    (catalog / "second.toml").write_text(TINY.replace('name = "tiny"', 'name = "second"'))
    first, second = load_experiment(catalog / "tiny.toml"), load_experiment(catalog / "second.toml")
    grids: list[list[str]] = []
    results = tmp_path / "results"

    def fake_ray(specs, trainable, gpus_per_trial, storage, name, report, finished, *tune, **cpus):  # noqa: ANN001
        grids.append([f"{s['trial']['experiment']}/{s['trial']['key']}" for s in specs])
        for spec in specs[:1]:  # the first trial ends: its experiment's summary is rewritten at once
            trainable({"spec": spec})
            finished(spec["trial"]["experiment"])
            assert (results / spec["trial"]["experiment"] / spec["trial"]["scale"] / "summary.json").is_file()
        return {f"{s['trial']['experiment']}/{s['trial']['key']}": "done" for s in specs[:1]}

    monkeypatch.setattr(runner, "ray_session", lambda *args: nullcontext())
    monkeypatch.setattr(runner, "run_grid", fake_ray)

    def sweep(*experiments) -> list:
        for directory in (tmp_path / "runs", results):
            for kept in directory.glob("*/paper/*/result.json"):
                kept.unlink()  # every trial to run again
        return runner.run_sweeps(list(experiments), "paper", seeds=1, out=tmp_path / "runs", results=results,
                                 report=lambda _: None)

    catalog_order = ["rnn_length5_s0", "rnn_length7_s0", "spectral_length5_s0", "spectral_length7_s0"]
    first_outcome, second_outcome = sweep(first, second)
    assert grids[-1] == [f"tiny/{k}" for k in catalog_order] + [f"second/{k}" for k in catalog_order]
    assert first_outcome.ran == catalog_order and first_outcome.unfinished == catalog_order[1:]
    assert second_outcome.unfinished == catalog_order  # same keys, told apart by their experiment
    estimate = results / "tiny" / "paper" / "estimate_cpu.json"
    estimate.write_text(json.dumps({"configurations": {
        "rnn_length5": {"estimated_seconds": 1.0}, "rnn_length7": {"estimated_seconds": 2.0},
        "spectral_length7": {"estimated_seconds": 3.0, "estimated_seconds_at_cap": 9.0}}}))
    sweep(first)
    assert grids[-1] == [f"tiny/{k}" for k in ("spectral_length7_s0", "rnn_length7_s0", "rnn_length5_s0",
                                                "spectral_length5_s0")]
    estimate.unlink()
    first_outcome, second_outcome = sweep((first, "smoke"), second)  # tiny at its own scale, one grid
    assert grids[-1] == [f"tiny/{k}" for k in catalog_order] + [f"second/{k}" for k in catalog_order]
    assert (first_outcome.scale, second_outcome.scale) == ("smoke", "paper")
    assert (results / "tiny" / "smoke" / "summary.json").is_file()  # the trial that ended, kept at its scale
    assert (results / "tiny" / "smoke" / "rnn_length5_s0" / "result.json").is_file()
    assert not (results / "tiny" / "paper" / "rnn_length5_s0" / "result.json").exists()
    with pytest.raises(ValueError, match=r"\['tiny'\] named more than once"):
        sweep((first, "smoke"), first)


def _sweep_that_edits_the_catalog(tmp_path, monkeypatch, edit):  # noqa: ANN001, ANN202
    """A one-trial paper sweep of the tiny catalog (Ray faked) that calls ``edit(catalog_dir)`` while its
    trial runs; returns the catalog directory, the tiny experiment, the results and the outcome."""
    from contextlib import nullcontext

    from spectral_analysis.experiments import runner

    catalog = tiny_catalog(tmp_path)
    tiny = load_experiment(catalog / "tiny.toml")
    results = tmp_path / "results"

    def fake_ray(specs, trainable, gpus_per_trial, storage, name, report, finished, *tune, **cpus):  # noqa: ANN001
        edit(catalog)
        trainable({"spec": specs[0]})
        finished(specs[0]["trial"]["experiment"])
        return {f"{specs[0]['trial']['experiment']}/{specs[0]['trial']['key']}": "done"}

    monkeypatch.setattr(runner, "ray_session", lambda *args: nullcontext())
    monkeypatch.setattr(runner, "run_grid", fake_ray)
    (outcome,) = runner.run_sweeps([tiny], "paper", seeds=1, out=tmp_path / "runs", results=results,
                                   report=lambda _: None)
    return catalog, tiny, results, outcome


def test_the_ledger_reads_a_catalog_edited_while_the_sweep_runs(tmp_path, monkeypatch):
    """A sweep of hours outlives catalog edits: its ledger counts the trials as the catalog reads when it
    writes them, not as it read when the sweep began (a kept grid whose entry gained a field was once
    listed as stale trials to train on until the next sweep)."""
    def add_and_change(catalog: Path) -> None:
        (catalog / "added.toml").write_text(TINY.replace('name = "tiny"', 'name = "added"'))
        (catalog / "tiny.toml").write_text(TINY.replace("seeds = 3", "seeds = 4", 1))

    _, _, results, outcome = _sweep_that_edits_the_catalog(tmp_path, monkeypatch, add_and_change)
    ledger = (results / "LEDGER.md").read_text()
    assert outcome.ran and "| added | paper | 0 / 12 |" in ledger and "| tiny | paper | 1 / 16 |" in ledger


def test_a_catalog_edited_while_a_sweep_runs_does_not_stop_it(tmp_path, monkeypatch):
    """A catalog file rewritten with a field the running code does not know (as a checkout updated under a
    running sweep) once made the ledger's reload raise inside Tune's callback and end the whole sweep: the
    ledger then falls back on the catalog the sweep started with."""
    from spectral_analysis.experiments import runner

    def add_unknown_field(catalog: Path) -> None:
        (catalog / "newer.toml").write_text(TINY.replace('name = "tiny"', 'name = "newer"')
                                            .replace("lr = 1e-2", "lr = 1e-2\nnot_a_field = 1"))

    _, tiny, results, outcome = _sweep_that_edits_the_catalog(tmp_path, monkeypatch, add_unknown_field)
    assert outcome.ran and "| tiny | paper | 1 / 12 |" in (results / "LEDGER.md").read_text()
    with pytest.raises(ValueError, match="newer.toml"):  # the next sweep reads the catalog as it is now
        runner.run_sweeps([tiny], "paper", seeds=1, out=tmp_path / "runs", results=results,
                          report=lambda _: None)


def test_make_paper_runs_every_catalog_grid_at_a_scale_it_has():
    """Each `run` line of the Makefile's paper target names catalog experiments at a scale they have, and
    its --only keeps trials; together the lines cover the whole catalog (a typo would fail hours in)."""
    grids = make_recipe_grids("paper", "run")
    catalog, covered = load_catalog(), set()
    assert len(grids) >= 3
    for pairs, only in grids:
        for name, scale in pairs:
            assert catalog[name].trials(scale, only=only), (name, scale, only)
            covered.add(name)
    assert covered == set(catalog)


def test_a_stand_in_dataset_is_named_in_words(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text('stand_in = "a corpus that ships, not the paper\'s"\n' + TINY)
    assert load_experiment(path).stand_in == "a corpus that ships, not the paper's"
    path.write_text('stand_in = " "\n' + TINY)
    with pytest.raises(ValueError, match="'stand_in' says in words which dataset stands in"):
        load_experiment(path)
