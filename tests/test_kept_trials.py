"""Running a trial and keeping it: summary, curves, checkpoint and zoo entry, the ledger, the plateau
rule, failed and stopped trials, time budgets and CPU estimates (no Ray here: tests/test_sweeps.py)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from experiment_fixtures import TINY, run_tiny, tiny_catalog

from spectral_analysis.cli import main
from spectral_analysis.experiments import (
    load_catalog,
    load_experiment,
    read_grid,
    run_trial,
)
from spectral_analysis.experiments.estimate import estimate_experiment, read_estimate
from spectral_analysis.experiments.ledger import ledger_rows, write_ledger
from spectral_analysis.experiments.results import write_summary
from spectral_analysis.experiments.row_status import outcome_text, plateaued
from spectral_analysis.experiments.trial import TrialSpec
from spectral_analysis.io import resolve_checkpoint, zoo_entries
from spectral_analysis.train import Trainer, load_checkpoint


def test_run_trial_keeps_summary_curves_checkpoint_and_zoo_entry(tmp_path):
    catalog = tiny_catalog(tmp_path)
    _, rows = run_tiny(tmp_path, catalog)
    assert [r["status"] for r in rows] == ["done"] * 4
    row = rows[0]
    assert row["steps"] == 8 and row["metric"] == "mse" and row["torch_version"] == torch.__version__
    assert (
        row["test_metrics"]["mse"] > 0
        and row["best_step"] in (4, 8)
        and row["checkpoint"] == "model.safetensors"
    )
    kept = tmp_path / "results" / "tiny" / "smoke" / row["trial"]
    curves = (kept / "curves.csv").read_text().splitlines()
    assert curves[0].startswith("phase,step") and sum(line.startswith("test,") for line in curves) == 1
    # the kept checkpoint is the trained model without optimizer state, loadable by name
    path = resolve_checkpoint(f"zoo:tiny/{row['trial']}", tmp_path / "results")
    assert path == kept / "model.safetensors"
    checkpoint = load_checkpoint(path)
    assert not any(k.startswith("optimizer/") for k in checkpoint.tensors)
    trained = load_checkpoint(tmp_path / "runs" / row["trial"] / "last.safetensors")
    for name, value in trained.model.state_dict().items():
        assert torch.equal(value, checkpoint.model.state_dict()[name])
    assert [e["name"] for e in zoo_entries(tmp_path / "results")][0] == f"zoo:tiny/smoke/{rows[0]['trial']}"


def test_the_ledger_counts_done_planned_and_failed_trials(tmp_path):
    text = TINY.replace(
        '[[variants]]\nlabel = "spectral"',
        '[[variants]]\nlabel = "diverges"\nmodel = "rnn"\nlr = 1e30\n[[variants]]\nlabel = "spectral"',
    )
    catalog = tiny_catalog(tmp_path, text)
    _, rows = run_tiny(tmp_path, catalog)
    (_, entry) = ledger_rows(tmp_path / "results", load_catalog(catalog))  # paper (not begun), smoke
    assert (entry["experiment"], entry["scale"], entry["done"], entry["planned"], entry["failed"]) == (
        "tiny",
        "smoke",
        4,
        6,
        2,
    )
    seconds = [r["seconds"] for r in rows if r["status"] == "done"]
    assert entry["total_seconds"] == pytest.approx(sum(seconds)) and entry["devices"] == ["cpu"]
    flat = {r["trial"]: r for r in write_summary(tmp_path / "results", "tiny", "smoke")}
    assert entry["plateaued"] == sum(bool(r["plateau"]) for r in flat.values())
    assert all(r["plateau"] is None for r in flat.values() if r["status"] == "failed")
    ledger = write_ledger(tmp_path / "results", load_catalog(catalog)).read_text()
    assert f"| tiny | smoke | 4 / 6 | {entry['plateaued']} / 4 | 2 | 0 |" in ledger
    # a cap given afterwards: the done trials that ended without a plateau are to be trained on
    smoke = "hidden = 4\nsteps = 8"
    capped = tiny_catalog(tmp_path, text.replace(smoke, smoke + "\nmax_steps = 80"))
    (_, entry) = ledger_rows(tmp_path / "results", load_catalog(capped))
    assert entry["to_train_on"] == sum(r["plateau"] is False for r in flat.values()) > 0


def test_the_ledger_lists_every_paper_scale_with_the_cpu_hours_its_estimate_leaves(tmp_path):
    catalog = load_catalog(tiny_catalog(tmp_path))
    results = tmp_path / "results"
    (paper,) = ledger_rows(results, catalog)  # nothing run: the paper scale is listed all the same
    assert (paper["scale"], paper["done"], paper["planned"]) == ("paper", 0, 12)
    assert paper["cpu_hours_left"] is None  # no estimate
    configurations = {"rnn_length5": {"estimated_seconds": 360.0},
                      "rnn_length7": {"estimated_seconds": 720.0, "estimated_seconds_at_cap": 1440.0},
                      "spectral_length5": {"estimated_seconds": 3600.0},
                      "spectral_length7": {"estimated_seconds": 7200.0}}
    estimate = results / "tiny" / "paper" / "estimate_cpu.json"
    estimate.parent.mkdir(parents=True)
    estimate.write_text(json.dumps({"configurations": configurations}))
    (paper,) = ledger_rows(results, catalog)
    assert paper["cpu_hours_left"] == pytest.approx((3 * 3.3, 3 * 3.5))  # 3 seeds of (0.1 + 0.2 + 1 + 2) h
    run_tiny(tmp_path, tiny_catalog(tmp_path), scale="paper", seeds=1)  # seed 0 of each kept
    paper = next(r for r in ledger_rows(results, catalog) if r["scale"] == "paper")
    assert paper["done"] + paper["failed"] == 4
    assert paper["cpu_hours_left"] == pytest.approx((2 * 3.3, 2 * 3.5))
    assert "| tiny | paper | " in write_ledger(results, catalog).read_text()
    assert "| 6.6 - 7.0 |" in (results / "LEDGER.md").read_text()
    del configurations["spectral_length7"]  # an estimate that lacks a configuration gives no sum
    estimate.write_text(json.dumps({"configurations": configurations}))
    assert next(r for r in ledger_rows(results, catalog) if r["scale"] == "paper")["cpu_hours_left"] is None


@pytest.mark.parametrize(
    "steps, best_step, status, expected",
    [(1000, 800, "done", True), (1000, 801, "done", False), (1000, 100, "done", True),
     (1000, 1000, "done", False), (1000, None, "done", None), (1000, 100, "failed", None)],
)
def test_a_trial_has_plateaued_when_its_last_fifth_did_not_improve(steps, best_step, status, expected):
    assert plateaued({"steps": steps, "best_step": best_step, "status": status}) is expected


def test_a_trials_outcome_says_how_it_stopped_how_long_it_took_and_its_test_score():
    row = {"status": "done", "steps": 1000, "best_step": 700, "seconds": 12.4, "metric": "mse",
           "test_metrics": {"mse": 0.000123}, "config": {"max_steps": 1000}}
    assert outcome_text(row) == "done: 1000 steps (plateaued), 12 s, test mse 0.000123"
    capped = "done: 1000 steps (no plateau by its cap), 12 s, test mse 0.000123"
    assert outcome_text({**row, "best_step": 990}) == capped
    assert outcome_text({**row, "best_step": 990, "config": {}}) == capped.replace(" by its cap", "")
    assert outcome_text({"status": "failed", "error": "TrainingDivergedError: the loss is inf"}) == (
        "failed: TrainingDivergedError: the loss is inf")
    assert outcome_text({"status": "unfinished", "step": 1500}) == "unfinished at step 1500"


def test_zoo_names_resolve_and_missing_ones_say_what_exists(tmp_path):
    catalog = tiny_catalog(tmp_path)
    run_tiny(tmp_path, catalog)
    results = tmp_path / "results"
    assert resolve_checkpoint("zoo:tiny/smoke/rnn_length5_s0", results).parent.name == "rnn_length5_s0"
    assert resolve_checkpoint("some/file.safetensors", results) == Path("some/file.safetensors")
    with pytest.raises(ValueError, match=r"not found; entries of 'tiny': \['zoo:tiny/smoke/rnn_length5_s0'"):
        resolve_checkpoint("zoo:tiny/rnn_length9_s0", results)
    with pytest.raises(ValueError, match="no entries of experiment 'other'"):
        resolve_checkpoint("zoo:other/x", results)
    with pytest.raises(ValueError, match="bad zoo name"):
        resolve_checkpoint("zoo:just-one-part", results)
    # kept at paper scale without its model (diverged): an error, not the smoke model in its place
    paper = results / "tiny" / "paper" / "rnn_length5_s0"
    paper.mkdir(parents=True)
    failed = {"status": "failed", "error": "TrainingDivergedError: inf"}
    (paper / "result.json").write_text(json.dumps(failed))
    with pytest.raises(ValueError, match=r"'zoo:tiny/rnn_length5_s0': the paper-scale trial is kept without "
                                         r"its model \(failed: TrainingDivergedError: inf\); name another "
                                         r"scale to take its model there: zoo:tiny/smoke/rnn_length5_s0$"):
        resolve_checkpoint("zoo:tiny/rnn_length5_s0", results)
    assert resolve_checkpoint("zoo:tiny/smoke/rnn_length5_s0", results).parent.parent.name == "smoke"
    (paper / "result.json").write_text(json.dumps({"status": "done", "checkpoint_note": "kept in the run "
                                                   "directory only (the zoo keeps seed 1)"}))
    (results / "tiny" / "smoke" / "rnn_length5_s0" / "model.safetensors").unlink()
    with pytest.raises(ValueError, match=r"\(kept in the run directory only \(the zoo keeps seed 1\)\); "
                                         "no other scale keeps this trial's model"):
        resolve_checkpoint("zoo:tiny/rnn_length5_s0", results)


def test_analyzers_take_zoo_names_on_the_command_line(tmp_path, monkeypatch, capsys):
    catalog = tiny_catalog(tmp_path)
    run_tiny(tmp_path, catalog)
    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path / "results"))
    assert main(["bound", "zoo:tiny/spectral_length5_s0", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["T"] == 5 and np.isfinite(report["log10_G"])
    assert main(["inspect", "zoo:tiny/rnn_length7_s0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["name"] == "rnn"
    # the command line keeps a zoo name as given (not its file), so what files a result by its subject
    # (bounds-table --state: DIR/EXPERIMENT/SCALE/TRIAL/PRIOR) and the records name the zoo entry
    from spectral_analysis.analysis.bounds_table import certificate_folder
    from spectral_analysis.cli.common import checkpoint_arg

    name = checkpoint_arg("zoo:tiny/smoke/rnn_length7_s0")
    assert certificate_folder("state", name, "init").parts == ("state", "tiny", "smoke", "rnn_length7_s0",
                                                               "init")
    with pytest.raises(SystemExit):
        main(["bound", "zoo:tiny/nothing_s0"])
    assert "zoo entry 'zoo:tiny/nothing_s0' not found" in capsys.readouterr().err
    assert main(["zoo", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["entries"]) == 4


def test_a_failing_trial_is_kept_as_failed_with_its_error_line(tmp_path):
    text = TINY.replace(
        '[[variants]]\nlabel = "spectral"',
        '[[variants]]\nlabel = "diverges"\nmodel = "rnn"\nlr = 1e30\n[[variants]]\nlabel = "spectral"',
    )
    _, rows = run_tiny(tmp_path, tiny_catalog(tmp_path, text))
    failed = [r for r in rows if r["status"] == "failed"]
    assert {r["variant"] for r in failed} == {"diverges"}
    assert all(r["error"].startswith("TrainingDivergedError: the training loss is") for r in failed)
    assert [r["status"] for r in rows if r["variant"] != "diverges"] == ["done"] * 4


def test_a_learning_figure_names_the_diverged_seeds_its_curves_leave_out(tmp_path, monkeypatch):
    from spectral_analysis.experiments import read_grid
    from spectral_analysis.plotting.paper_figures import plot_learning_curves
    from spectral_analysis.plotting.results_figures import diverged_notes, learning_panels

    text = TINY.replace(
        '[[variants]]\nlabel = "spectral"',
        '[[variants]]\nlabel = "diverges"\nmodel = "rnn"\nlr = 1e30\n[[variants]]\nlabel = "spectral"',
    )
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tiny_catalog(tmp_path, text)))
    _, rows = run_tiny(tmp_path, tiny_catalog(tmp_path, text), seeds=2)
    steps = {r["axes"]["length"]: [] for r in rows}
    for r in rows:
        if r["status"] == "failed":
            steps[r["axes"]["length"]].append(str(r["last_recorded_step"]))
    notes = diverged_notes(read_grid(tmp_path / "results", "tiny", "smoke"), "length")
    assert notes == {n: f"diverges: 2 seeds diverged (step {', '.join(s)})" for n, s in steps.items()}
    curve = {"steps": np.arange(3.0), "metric": np.ones(3), "grad_steps": np.arange(3.0), "grad": np.ones(3)}
    figure = plot_learning_curves({5: {"rnn": curve}, 7: {"rnn": curve}}, "MSE", None, "t", length_name="T",
                                  column_notes={7: notes[7]})
    assert [a.get_title() for a in figure.axes[:2]] == ["T = 5", f"T = 7\n{notes[7]}"]
    # a length where every seed of every model diverged keeps its panel, empty but for that note
    grid = read_grid(tmp_path / "results", "tiny", "smoke")
    grid.groups = [g for g in grid.groups if g.axes["length"] != 7]
    assert grid.values("length") == [5] and grid.values("length", with_diverged=True) == [5, 7]
    panels = learning_panels(grid, "length", "mse")
    assert list(panels) == [5, 7] and panels[7] == {} and set(panels[5]) == {"rnn", "spectral"}
    figure = plot_learning_curves(panels, "MSE", None, "t", length_name="T",
                                  column_notes=diverged_notes(grid, "length"))
    assert figure.axes[1].get_title() == f"T = 7\n{notes[7]}" and not figure.axes[1].get_lines()
    whole = learning_panels(grid, "", "mse")  # a grid drawn without an axis: one panel, every model's seeds
    assert list(whole) == [""] and set(whole[""]) == {"rnn", "spectral"}
    assert np.array_equal(whole[""]["rnn"]["metric"], panels[5]["rnn"]["metric"])  # the one length left


def test_a_paper_grid_under_way_names_in_each_panel_the_seeds_not_kept_yet(tmp_path, monkeypatch):
    from spectral_analysis.experiments import read_grid
    from spectral_analysis.plotting.results_figures import panel_notes

    text = TINY.replace(
        '[[variants]]\nlabel = "spectral"',
        '[[variants]]\nlabel = "diverges"\nmodel = "rnn"\nlr = 1e30\n[[variants]]\nlabel = "spectral"',
    )
    catalog = tiny_catalog(tmp_path, text)
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(catalog))
    _, rows = run_tiny(tmp_path, catalog, scale="paper", seeds=1)  # the paper scale runs 3 seeds
    step = {r["axes"]["length"]: r["last_recorded_step"] for r in rows if r["status"] == "failed"}
    notes = panel_notes(read_grid(tmp_path / "results", "tiny", "paper"), "length")
    assert notes == {n: f"diverges: 1 seed diverged (step {step[n]})\n"
                        "not kept yet: rnn 2 seeds, diverges 2 seeds, spectral 2 seeds" for n in (5, 7)}
    run_tiny(tmp_path, catalog, scale="paper", seeds=3)
    grid = read_grid(tmp_path / "results", "tiny", "paper")
    assert not any("not kept" in note for note in panel_notes(grid, "length").values())
    grid.failed = [r for r in grid.failed if r["trial"] != "diverges_length5_s0"]
    notes = panel_notes(grid, "length")  # one seed of one model missing: its panel alone says so
    assert notes[5].endswith("\nnot kept yet: diverges 1 seed") and "not kept" not in notes[7]


def test_a_diverged_trial_keeps_its_record_up_to_the_divergence_and_curves_read_it_only_there(tmp_path):
    from spectral_analysis.experiments.results import keep_trial, read_curves
    from spectral_analysis.train.evaluation import RunLog

    experiment, rows = run_tiny(tmp_path, tiny_catalog(tmp_path), seeds=2)
    trial = next(t for t in experiment.trials("smoke", seeds=2) if t.key == "rnn_length5_s1")
    run_dir = tmp_path / "runs" / trial.key
    RunLog(run_dir / "metrics.jsonl").truncate_after(4)  # as if the loss went inf at step 5
    row = keep_trial(trial, run_dir, tmp_path / "results", status="failed",
                     error="TrainingDivergedError: the training loss is inf at step 5", device="cpu",
                     git_revision="test", wall_seconds=1.0)
    kept = tmp_path / "results" / "tiny" / "smoke" / trial.key
    assert row["status"] == "failed" and row["last_recorded_step"] == 4
    assert read_curves(kept)["train"]["step"].max() == 4 and "steps" not in row

    group = read_grid(tmp_path / "results", "tiny", scale="smoke").group("rnn", length=5)
    assert group.seeds == 1 and [r["trial"] for r in group.failed_rows] == [trial.key]
    alone_steps, alone = group.curve("train", "loss")
    steps, both = group.curve("train", "loss", with_failed=True)
    assert alone.seeds == 1 and both.seeds == 2 and list(steps) == list(alone_steps)
    done_loss, failed_loss = (read_curves(d)["train"]["loss"] for d in (group.dirs[0], group.failed_dirs[0]))
    early, late = steps <= 4, steps > 4
    assert np.allclose(both.mean[early], (done_loss[early] + failed_loss) / 2)
    assert np.allclose(both.mean[late], done_loss[late])  # past its divergence the failed seed is not held
    assert np.allclose(both.high[late], both.low[late])


def test_a_stopped_sweeps_unstarted_and_interrupted_trials_count_unfinished_not_failed():
    """Ctrl+C during a sweep: Tune returns the trials that never started without a configuration, the
    running ones with neither a result nor an error."""
    from types import SimpleNamespace

    from spectral_analysis.experiments.ray_grid import tune_statuses

    spec = {"trial": {"experiment": "tiny", "key": "rnn_length5_s0"}}
    results = [SimpleNamespace(config={"spec": spec}, metrics={"trial_status": "done"}, error=None),
               SimpleNamespace(config=None, metrics=None, error="stopped"),
               SimpleNamespace(config={"spec": {"trial": {"experiment": "tiny", "key": "x_s1"}}},
                               metrics={}, error="RayTaskError"),
               SimpleNamespace(config={"spec": {"trial": {"experiment": "tiny", "key": "y_s0"}}},
                               metrics={}, error=None)]
    assert tune_statuses(results) == {"tiny/rnn_length5_s0": "done", "tiny/x_s1": "error: RayTaskError"}


def test_a_worker_killed_for_memory_ends_the_sweep_cleanly_with_the_rest_unfinished(tmp_path, monkeypatch):
    """Tune's actor manager raises RuntimeError on Ray's OutOfMemoryError and ends the whole grid: the
    trial that ended keeps its status, the others are unfinished (resumable), and no traceback escapes."""
    from dataclasses import asdict
    from types import SimpleNamespace

    from ray import tune
    from ray.exceptions import OutOfMemoryError

    from spectral_analysis.experiments import ray_grid, runner

    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    specs = [asdict(runner.TrialSpec(asdict(t), str(tmp_path / t.key), str(tmp_path), "cpu", "test"))
             for t in experiment.trials("smoke", seeds=1)]

    class KilledForMemory:  # ends the first trial, then the node runs low on memory
        def __init__(self, *args, run_config, **kwargs) -> None:
            self.callbacks = run_config.callbacks

        def fit(self):
            trial = SimpleNamespace(config={"spec": specs[0]}, last_result={"trial_status": "done"})
            self.callbacks[0].on_trial_complete(0, [], trial)
            raise RuntimeError("Caught unexpected exception") from OutOfMemoryError("1 worker(s) were killed")

    monkeypatch.setattr(tune, "Tuner", KilledForMemory)
    lines, ended = [], []
    statuses = ray_grid.run_grid(specs, runner.run_trial, 0.0, tmp_path, "tiny", lines.append, ended.append)
    assert statuses == {ray_grid.spec_id(specs[0]): "done"} and ended == ["tiny"]
    assert "memory monitor killed a worker" in lines[-1]
    assert f"{len(specs) - 1} trial(s) unfinished" in lines[-1]

    class OtherError(KilledForMemory):
        def fit(self):
            raise RuntimeError("something else") from ValueError("not memory")

    monkeypatch.setattr(tune, "Tuner", OtherError)
    with pytest.raises(RuntimeError, match="something else"):
        ray_grid.run_grid(specs, runner.run_trial, 0.0, tmp_path, "tiny", lines.append, ended.append)


def test_time_budget_stops_with_a_checkpoint_and_a_rerun_finishes_identically(tmp_path):
    catalog = tiny_catalog(
        tmp_path,
        TINY.replace(
            "steps = 8\ntask_options = { train_size = 32", "steps = 40\ntask_options = { train_size = 32"
        ),
    )
    _, stopped = run_tiny(tmp_path / "a", catalog, deadline=0.0)
    assert {r["status"] for r in stopped} == {"unfinished"}
    experiment = load_experiment(catalog / "tiny.toml")
    trial = experiment.trials("smoke")[0]
    run_dir = tmp_path / "b" / "runs" / trial.key
    trainer = Trainer(trial.train_config(run_dir), resume=False)
    trainer.run(stop=lambda step: step >= 10)
    assert not trainer.finished and trainer.step == 10 and (run_dir / "last.safetensors").is_file()
    resumed = run_trial(
        TrialSpec(trial.__dict__.copy(), str(run_dir), str(tmp_path / "b" / "results"), "cpu", "t")
    )
    _, straight = run_tiny(tmp_path / "c", catalog)
    assert (
        resumed["status"] == "done" and resumed["test_metrics"]["mse"] == straight[0]["test_metrics"]["mse"]
    )


def test_estimate_times_paper_configurations(tmp_path):
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    estimate = estimate_experiment(experiment, tmp_path / "results", steps=2)
    assert estimate["trials"] == 12 and set(estimate["configurations"]) == {
        "rnn_length5",
        "rnn_length7",
        "spectral_length5",
        "spectral_length7",
    }
    config = estimate["configurations"]["rnn_length5"]
    assert config["seconds_per_step"] > 0 and config["total_steps"] == 8
    assert config["config"] == experiment.trials("paper", seeds=1)[0].config  # what it timed
    assert config["estimated_seconds"] >= 8 * config["seconds_per_step"]
    assert estimate["device"] == "cpu" and estimate["total_seconds"] == pytest.approx(
        3 * sum(c["estimated_seconds"] for c in estimate["configurations"].values())
    )
    assert read_estimate(tmp_path / "results", "tiny") == estimate
    diverging = load_experiment(tiny_catalog(tmp_path, TINY.replace("lr = 1e-2", "lr = 1e30")) / "tiny.toml")
    probe = estimate_experiment(diverging, tmp_path / "results", steps=2)["configurations"]["rnn_length5"]
    assert probe["seconds_per_step"] is None and "training diverged" in probe["diverged"]


def test_estimate_of_a_grid_trained_until_plateau_bounds_it_at_its_cap(tmp_path):
    text = TINY.replace("hidden = 6\nsteps = 8", "hidden = 6\nsteps = 8\nmax_steps = 40")
    capped = load_experiment(tiny_catalog(tmp_path, text) / "tiny.toml")
    estimate = estimate_experiment(capped, tmp_path, steps=2)
    for config in estimate["configurations"].values():
        assert config["total_steps"] == 8 and config["max_steps"] == 40
        extra = config["estimated_seconds_at_cap"] - config["estimated_seconds"]
        assert extra >= 32 * config["seconds_per_step"]
    assert estimate["total_seconds_at_cap"] == pytest.approx(
        3 * sum(c["estimated_seconds_at_cap"] for c in estimate["configurations"].values()))
    assert "total_seconds_at_cap" not in estimate_experiment(
        load_experiment(tiny_catalog(tmp_path) / "tiny.toml"), tmp_path, steps=2)


def test_experiments_command_estimates_and_lists_the_catalog(tmp_path, capsys):
    catalog = tiny_catalog(tmp_path)
    args = ["experiments", "--catalog", str(catalog), "--results", str(tmp_path / "results")]
    assert main([*args, "--estimate", "tiny", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["experiments"]
    assert row["name"] == "tiny" and row["trials"] == {"paper": 12, "smoke": 4} and row["paper_done"] == 0
    assert row["paper_cpu_seconds"] > 0 and row["paper_gpu_seconds"] is None and row["smoke_seconds"] is None
    assert row["diverged_in_probe"] == {"cpu": []} and row["not_estimated"] == {"cpu": []}
    (tmp_path / "grown").mkdir()
    grown = tiny_catalog(tmp_path / "grown", TINY.replace('[[variants]]\nlabel = "spectral"',
                                                          '[[variants]]\nlabel = "lstm"\nmodel = "lstm"\n'
                                                          '[[variants]]\nlabel = "spectral"'))
    assert main([*args, "--catalog", str(grown), "--json"]) == 0  # a variant added since the estimate
    (row,) = json.loads(capsys.readouterr().out)["experiments"]
    assert row["not_estimated"] == {"cpu": ["lstm_length5", "lstm_length7"]}
    (tmp_path / "changed").mkdir()  # a variant configured otherwise since: timed, but not as it stands
    changed = tiny_catalog(tmp_path / "changed", TINY.replace("m1 = 2, m2 = 3", "m1 = 3, m2 = 3"))
    assert main([*args, "--catalog", str(changed), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["experiments"]
    assert row["not_estimated"] == {"cpu": ["spectral_length5", "spectral_length7"]}
    assert main([*args, "--catalog", str(grown)]) == 0
    assert next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("tiny ")).split()[5].endswith("+")
    assert main([*args, "--ledger"]) == 0
    assert "| tiny | paper | 0 / 12 |" in (tmp_path / "results" / "LEDGER.md").read_text()
    assert capsys.readouterr().out.strip().endswith("LEDGER.md")
    diverging = tiny_catalog(tmp_path, TINY.replace("lr = 1e-2", "lr = 1e30"))
    assert main([*args, "--estimate", "tiny", "--catalog", str(diverging)]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert next(line for line in listing if line.startswith("tiny ")).split()[5].endswith("*")
    assert main([*args, "--catalog", str(diverging), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["experiments"]
    assert row["diverged_in_probe"]["cpu"]  # lr 1e30 diverges in every configuration's probe
    (tmp_path / "results" / "tiny" / "paper" / "estimate_cuda.json").write_text("{}")
    assert main(args) == 1
    assert "estimate_cuda.json has no configurations" in capsys.readouterr().err
    assert main([*args, "--estimate", "nope"]) == 1
    assert "unknown experiment 'nope'" in capsys.readouterr().err
    run = ["run", "tiny", "--catalog", str(catalog), "--results", str(tmp_path / "results"),
           "--out", str(tmp_path / "runs")]
    assert main([*run, "--only", "lengthis5"]) == 1
    assert "--only takes KEY=VALUE" in capsys.readouterr().err
    assert main([*run, "--only", "lenght=5"]) == 1  # a misspelt key
    assert ("matches {'lenght': '5'}; its trials are selected by variant = rnn, spectral; seed = 0; "
            "length = 5" in capsys.readouterr().err)


def test_kept_singular_values_thin_their_steps_to_fit_the_byte_cap(tmp_path):
    """A 100-layer net records 102 x 128 values a step: fewer steps are kept, evenly spaced, first and
    last included; a one-matrix model keeps SINGULAR_VALUE_ROWS of them."""
    from spectral_analysis.experiments import read_singular_values
    from spectral_analysis.experiments.results import (
        MAX_KEPT_SINGULAR_VALUE_BYTES,
        SINGULAR_VALUE_ROWS,
        SINGULAR_VALUES_NAME,
        _write_singular_values,
    )

    wide = MAX_KEPT_SINGULAR_VALUE_BYTES // (4 * 102 * 128)
    assert 2 < wide < SINGULAR_VALUE_ROWS
    for matrices, expected in ((102, wide), (1, SINGULAR_VALUE_ROWS)):
        lines = [{"phase": "train", "step": 20 * i, "singular_values": [[float(i)] * 128] * matrices}
                 for i in range(200)]
        out = tmp_path / str(matrices)
        out.mkdir()
        _write_singular_values(lines, out / SINGULAR_VALUES_NAME)
        steps, values = read_singular_values(out)
        assert len(steps) == expected and steps[0] == 0 and steps[-1] == 20 * 199
        assert len(values) == matrices and np.array_equal(values[0][:, 0], steps / 20)
        assert (out / SINGULAR_VALUES_NAME).stat().st_size <= MAX_KEPT_SINGULAR_VALUE_BYTES + 2**14


def _keep(trial, tmp_path, status):
    from spectral_analysis.experiments.results import keep_trial

    error = "TrainingDivergedError: the gradient norm is inf at step 8" if status == "failed" else None
    return keep_trial(trial, tmp_path / "runs" / trial.key, tmp_path / "results", status=status, error=error,
                      device="cpu", git_revision="test", wall_seconds=1.0)


def test_the_zoo_keeps_the_lowest_seed_that_did_not_fail_whichever_ended_first(tmp_path):
    """Seed 0 diverged: the zoo keeps seed 1's model, whether seed 0 failed before seed 1 was kept (kept
    then) or after it (the sweep's end promotes seed 1 from its run directory)."""
    import shutil

    from spectral_analysis.experiments.results import promote_zoo_seeds

    experiment, _ = run_tiny(tmp_path, tiny_catalog(tmp_path), seeds=2)
    trials = {t.key: t for t in experiment.trials("smoke", seeds=2)}
    s0, s1 = trials["rnn_length5_s0"], trials["rnn_length5_s1"]
    kept = tmp_path / "results" / "tiny" / "smoke"
    assert (kept / s0.key / "model.safetensors").is_file()
    assert not (kept / s1.key / "model.safetensors").exists()
    note = json.loads((kept / s1.key / "result.json").read_text())["checkpoint_note"]
    assert note.endswith("keeps seed 0)")

    def forget() -> None:
        for trial in (s0, s1):
            shutil.rmtree(kept / trial.key)

    forget()  # seed 0 fails first: seed 1 is the zoo's seed when it is kept
    _keep(s0, tmp_path, "failed")
    row = _keep(s1, tmp_path, "done")
    assert row["checkpoint"] == "model.safetensors"
    assert (kept / s1.key / "singular_values.safetensors").is_file()

    forget()  # seed 1 is kept first, without its model; seed 0 fails after
    assert _keep(s1, tmp_path, "done")["checkpoint"] is None
    _keep(s0, tmp_path, "failed")
    assert not (kept / s1.key / "model.safetensors").exists()
    runs = tmp_path / "sweep_runs"  # the runner's layout: <out>/<experiment>/<scale>/<trial>
    (runs / "tiny").mkdir(parents=True)
    shutil.copytree(tmp_path / "runs", runs / "tiny" / "smoke")
    row_path = kept / s1.key / "result.json"
    original = row_path.read_text()
    row_path.write_text(json.dumps({**json.loads(original), "steps": 999}))  # the run dir holds another run
    assert promote_zoo_seeds(tmp_path / "results", "tiny", "smoke", runs) == []
    row_path.write_text(original)
    assert promote_zoo_seeds(tmp_path / "results", "tiny", "smoke", runs) == [s1.key]
    promoted = json.loads((kept / s1.key / "result.json").read_text())
    assert promoted["checkpoint"] == "model.safetensors" and "checkpoint_note" not in promoted
    assert (kept / s1.key / "singular_values.safetensors").is_file()
    trained = load_checkpoint(tmp_path / "runs" / s1.key / "last.safetensors").model.state_dict()
    zoo = load_checkpoint(kept / s1.key / "model.safetensors").model.state_dict()
    assert all(torch.equal(trained[name], zoo[name]) for name in trained)
    assert promote_zoo_seeds(tmp_path / "results", "tiny", "smoke", runs) == []  # done once
    group = read_grid(tmp_path / "results", "tiny", scale="smoke").group("rnn", length=5)
    assert group.checkpoint_seed() == 1 and group.checkpoint() == kept / s1.key / "model.safetensors"
    # without run directories nothing is promoted; the other configurations keep seed 0's model
    assert promote_zoo_seeds(tmp_path / "results", "tiny", "smoke", tmp_path / "elsewhere") == []
    grid = read_grid(tmp_path / "results", "tiny", scale="smoke")
    assert grid.group("rnn", length=7).checkpoint_seed() == 0


def test_the_estimate_counts_the_test_passes_of_a_grid_that_scores_the_test_set_at_each_validation(tmp_path):
    """The tiny grid: 8 steps, a validation every 4 (2), one batch each for validation and test."""
    scored = TINY.replace("eval_every = 4", "eval_every = 4\ntest_with_valid = true")
    for text, passes in ((TINY, 2 + 1), (scored, 2 * 2 + 1)):
        experiment = load_experiment(tiny_catalog(tmp_path, text) / "tiny.toml")
        estimate = estimate_experiment(experiment, tmp_path / "results", steps=2)
        config = estimate["configurations"]["rnn_length5"]
        evaluation = config["estimated_seconds"] - config["total_steps"] * config["seconds_per_step"]
        assert evaluation == pytest.approx(passes * config["seconds_per_eval_batch"])


def test_a_scale_that_keeps_every_seeds_model_keeps_seed_1s_too(tmp_path):
    """``keep_models = "every seed"``: the certificates read each seed's network, so seed 1's final model is
    kept beside seed 0's (its singular values stay the zoo seed's alone); any other value is refused."""
    from spectral_analysis.experiments import load_experiment

    text = TINY.replace('stated = "quoted"', 'stated = "quoted"\nkeep_models = "every seed"')
    catalog = tiny_catalog(tmp_path, text)
    run_tiny(tmp_path, catalog, scale="paper", seeds=2)
    kept = tmp_path / "results" / "tiny" / "paper"
    for seed in (0, 1):
        row = json.loads((kept / f"rnn_length5_s{seed}" / "result.json").read_text())
        assert row["checkpoint"] == "model.safetensors" and "checkpoint_note" not in row
        trained = load_checkpoint(tmp_path / "runs" / f"rnn_length5_s{seed}" / "last.safetensors").model
        zoo = load_checkpoint(kept / f"rnn_length5_s{seed}" / "model.safetensors").model
        assert all(torch.equal(a, b) for a, b in zip(trained.state_dict().values(), zoo.state_dict().values(),
                                                      strict=True))
    assert not (kept / "rnn_length5_s1" / "singular_values.safetensors").exists()
    assert not any(t.keep_model for t in load_experiment(catalog / "tiny.toml").trials("smoke"))
    (catalog / "tiny.toml").write_text(text.replace('"every seed"', '"all"'))
    with pytest.raises(ValueError, match="keeps every seed's model; got {'paper': 'all'}"):
        load_experiment(catalog / "tiny.toml")
