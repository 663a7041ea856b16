"""The experiments catalog, kept results, the zoo and the readers (figures, tables, checks); no Ray here
(tests/test_sweeps.py runs the Ray Tune runner)."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from spectral_analysis.cli import main
from spectral_analysis.experiments import (
    SCALES,
    load_catalog,
    load_experiment,
    read_grid,
    read_grids,
    run_trial,
)
from spectral_analysis.experiments.catalog import CONFIG_FIELDS
from spectral_analysis.experiments.estimate import estimate_experiment, read_estimate
from spectral_analysis.experiments.ledger import ledger_rows, write_ledger
from spectral_analysis.experiments.results import outcome_text, plateaued, write_summary
from spectral_analysis.experiments.runner import TrialSpec
from spectral_analysis.io import resolve_checkpoint, zoo_entries
from spectral_analysis.paper import (
    depth,
    dizzy_copy,
    experiments,
    mnist_ranking,
    svdrnn_leak,
    synthetic_tasks,
)
from spectral_analysis.paper.kept import MIN_SEEDS, beats, every, gate
from spectral_analysis.plotting.results_figures import LEARNING_FIGURES, READERS, draw_figures
from spectral_analysis.train import Trainer, load_checkpoint

ROOT = Path(__file__).resolve().parent.parent
PAPERS = ROOT.parent / "shared" / "papers"
TINY = """
name = "tiny"
source = "test"
description = "a tiny grid"
[base]
task = "addition"
lr = 1e-2
batch_size = 8
record_every = 2
eval_every = 4
checkpoint_every = 4
[[variants]]
label = "rnn"
model = "rnn"
[[variants]]
label = "spectral"
model = "spectral"
[variants.paper]
model_options = { m1 = 2, m2 = 3 }
[axes]
"task_options.length" = [5, 7]
[scales.paper]
seeds = 3
stated = "quoted"
hidden = 6
steps = 8
task_options = { train_size = 64, valid_size = 16, test_size = 16 }
[scales.smoke]
hidden = 4
steps = 8
task_options = { train_size = 32, valid_size = 16, test_size = 16 }
"""


def tiny_catalog(tmp_path: Path, text: str = TINY) -> Path:
    directory = tmp_path / "catalog"
    directory.mkdir(exist_ok=True)
    (directory / "tiny.toml").write_text(text)
    return directory


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
        assert experiment.seeds("smoke") == 1 and experiment.seeds("paper") >= MIN_SEEDS
        assert all(set(t.config) <= set(CONFIG_FIELDS) for t in experiment.trials("paper"))


def test_every_paper_scale_quotes_the_paper_verbatim():
    papers = _normalized(" ".join(p.read_text() for p in PAPERS.glob("*.txt")))
    for experiment in load_catalog().values():
        fragments = [_normalized(f) for f in experiment.scales["paper"]["stated"].split("[...]")]
        missing = [f for f in fragments if f and f not in papers]
        assert not missing, (experiment.name, missing)


def test_icml_irnn_starts_orthogonal_as_section_7_says():
    for experiment in load_catalog().values():
        if experiment.source.startswith(("ICML", "toolkit")):
            for trial in experiment.trials("paper", seeds=1):
                if trial.config["model"] == "irnn":
                    assert trial.config["model_options"]["init"] == "orthogonal", trial.key


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
    from spectral_analysis.cli.experiments import _only

    merged = _only(["variant=rnn", "length=7", "variant=spectral"])
    assert merged == {"variant": "rnn,spectral", "length": "7"}
    with pytest.raises(CommandError, match="KEY=VALUE"):
        _only(["variant="])
    assert len(experiment.trials("paper", seeds=1)) == 4
    with pytest.raises(ValueError, match="seeds must be a positive integer"):
        experiment.trials("paper", seeds=0)
    with pytest.raises(ValueError, match="has no scale 'huge'"):
        experiment.trials("huge")


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
    ],
)
def test_bad_catalog_files_are_refused_naming_file_and_problem(tmp_path, edit, message):
    directory = tiny_catalog(tmp_path, TINY.replace(*edit))
    with pytest.raises(ValueError, match=message) as error:
        load_experiment(directory / "tiny.toml")
    assert "tiny.toml" in str(error.value)


def _run_tiny(tmp_path, catalog, scale="smoke", seeds=None, **spec_fields):
    experiment = load_experiment(catalog / "tiny.toml")
    rows = []
    for trial in experiment.trials(scale, seeds):
        spec = TrialSpec(
            trial.__dict__.copy(),
            str(tmp_path / "runs" / trial.key),
            str(tmp_path / "results"),
            "cpu",
            "test",
            **spec_fields,
        )
        rows.append(run_trial(spec))
    return experiment, rows


def test_run_trial_keeps_summary_curves_checkpoint_and_zoo_entry(tmp_path):
    catalog = tiny_catalog(tmp_path)
    _, rows = _run_tiny(tmp_path, catalog)
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
    _, rows = _run_tiny(tmp_path, catalog)
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
    _run_tiny(tmp_path, tiny_catalog(tmp_path), scale="paper", seeds=1)  # seed 0 of each kept
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
    _run_tiny(tmp_path, catalog)
    results = tmp_path / "results"
    assert resolve_checkpoint("zoo:tiny/smoke/rnn_length5_s0", results).parent.name == "rnn_length5_s0"
    assert resolve_checkpoint("some/file.safetensors", results) == Path("some/file.safetensors")
    with pytest.raises(ValueError, match=r"not found; entries of 'tiny': \['zoo:tiny/smoke/rnn_length5_s0'"):
        resolve_checkpoint("zoo:tiny/rnn_length9_s0", results)
    with pytest.raises(ValueError, match="no entries of experiment 'other'"):
        resolve_checkpoint("zoo:other/x", results)
    with pytest.raises(ValueError, match="bad zoo name"):
        resolve_checkpoint("zoo:just-one-part", results)


def test_analyzers_take_zoo_names_on_the_command_line(tmp_path, monkeypatch, capsys):
    catalog = tiny_catalog(tmp_path)
    _run_tiny(tmp_path, catalog)
    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path / "results"))
    assert main(["bound", "zoo:tiny/spectral_length5_s0", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["T"] == 5 and np.isfinite(report["log10_G"])
    assert main(["inspect", "zoo:tiny/rnn_length7_s0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["name"] == "rnn"
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
    _, rows = _run_tiny(tmp_path, tiny_catalog(tmp_path, text))
    failed = [r for r in rows if r["status"] == "failed"]
    assert {r["variant"] for r in failed} == {"diverges"}
    assert all(r["error"].startswith("TrainingDivergedError: the training loss is") for r in failed)
    assert [r["status"] for r in rows if r["variant"] != "diverges"] == ["done"] * 4


def test_a_diverged_trial_keeps_its_record_up_to_the_divergence_and_curves_read_it_only_there(tmp_path):
    from spectral_analysis.experiments.results import keep_trial, read_curves
    from spectral_analysis.train.evaluation import RunLog

    experiment, rows = _run_tiny(tmp_path, tiny_catalog(tmp_path), seeds=2)
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
    _, stopped = _run_tiny(tmp_path / "a", catalog, deadline=0.0)
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
    _, straight = _run_tiny(tmp_path / "c", catalog)
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
    assert row["diverged_in_probe"] == {"cpu": []}
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
    assert main(["run", "tiny", "--catalog", str(catalog), "--only", "lengthis5"]) == 1
    assert "--only takes KEY=VALUE" in capsys.readouterr().err
    assert main(["run", "tiny", "--catalog", str(catalog), "--only", "lenght=5"]) == 1  # a misspelt key
    assert ("matches {'lenght': '5'}; its trials are selected by variant = rnn, spectral; seed = 0; "
            "length = 5" in capsys.readouterr().err)


def test_only_given_twice_keeps_both_values_as_one_only_with_two_values_does():
    """`--only variant=a --only variant=b` once kept only b's trials, silently (a GPU call lost its
    rnn trials that way): the flags add up, as `--only variant=a variant=b` does."""
    from spectral_analysis.cli import build_parser
    from spectral_analysis.cli.experiments import _only

    parse = build_parser().parse_args
    twice = parse(["run", "tiny", "--only", "variant=rnn", "--only", "variant=spectral", "seed=0"])
    once = parse(["run", "tiny", "--only", "variant=rnn", "variant=spectral", "seed=0"])
    assert _only(twice.only) == _only(once.only) == {"variant": "rnn,spectral", "seed": "0"}


def _fake_trial(
    results: Path,
    experiment: str,
    scale: str,
    key: str,
    variant: str,
    axes: dict,
    seed: int,
    curves: list[str],
    test: float,
    metric: str = "accuracy",
) -> None:
    directory = results / experiment / scale / key
    directory.mkdir(parents=True)
    row = {
        "experiment": experiment,
        "scale": scale,
        "trial": key,
        "status": "done",
        "variant": variant,
        "axes": axes,
        "seed": seed,
        "hidden": 128,
        "metric": metric,
        "test_metrics": {metric: test},
        "config": {},
    }
    (directory / "result.json").write_text(json.dumps(row))
    (directory / "curves.csv").write_text(
        "\n".join(["phase,step,accuracy,grad_h0_norm,spectral_margin", *curves])
    )


def test_grids_aggregate_seeds_and_prefer_the_paper_scale(tmp_path):
    for seed, value in enumerate((0.2, 0.4)):
        _fake_trial(
            tmp_path,
            "x",
            "smoke",
            f"a_s{seed}",
            "a",
            {},
            seed,
            [f"valid,10,{value},,", f"valid,20,{value + 0.1},,", f"train,20,,{value},0"],
            value,
        )
    grid = read_grid(tmp_path, "x")
    assert (
        grid.scale == "smoke" and grid.seeds == 2 and grid.stamp() == "smoke scale, not the paper's; 2 seeds"
    )
    steps, accuracy = grid.group("a").curve("valid", "accuracy")
    assert list(steps) == [10, 20] and np.allclose(accuracy.mean, [0.3, 0.4])
    assert np.allclose(accuracy.low, [0.2, 0.3]) and np.allclose(accuracy.high, [0.4, 0.5])
    final = grid.group("a").final()
    assert (final.mean, final.low, final.high, final.seeds) == pytest.approx((0.3, 0.2, 0.4, 2))
    assert sorted(grid.group("a").final_per_seed()) == pytest.approx([0.2, 0.4])
    _fake_trial(tmp_path, "x", "smoke", "b_s0", "b", {}, 0, ["valid,10,0.5,,"], 0.5)
    grid = read_grid(tmp_path, "x")
    assert grid.stamp() == "smoke scale, not the paper's; 1-2 seeds" and grid.seeds == 1
    assert grid.stamp([grid.group("a")]).endswith("; 2 seeds")
    assert grid.stamp([grid.group("b")]).endswith("; 1 seed")
    _fake_trial(tmp_path, "x", "paper", "a_s0", "a", {}, 0, ["valid,10,0.9,,"], 0.9)
    assert read_grid(tmp_path, "x").scale == "paper" and read_grid(tmp_path, "x", "smoke").seeds == 1
    assert read_grid(tmp_path, "nothing") is None


def test_final_reads_a_rows_own_numbers_beside_its_metrics(tmp_path):
    for seed, (steps, best) in enumerate(((100, 0.7), (300, None))):
        _fake_trial(tmp_path, "x", "paper", f"a_s{seed}", "a", {}, seed, ["valid,1,0.5,,"], 0.5)
        path = tmp_path / "x" / "paper" / f"a_s{seed}" / "result.json"
        numbers = {"steps": steps, "best_valid": best, "seconds": 10.0 * (seed + 1)}
        path.write_text(json.dumps(json.loads(path.read_text()) | numbers))
    group = read_grid(tmp_path, "x").group("a")
    steps = group.final("steps")
    assert (steps.mean, steps.low, steps.high, steps.seeds) == pytest.approx((200, 100, 300, 2))
    best = group.final_per_seed("best_valid")
    assert best[0] == pytest.approx(0.7) and np.isnan(best[1]) and group.final("best_valid").seeds == 1
    assert sorted(group.final_per_seed("seconds")) == pytest.approx([10.0, 20.0])
    assert group.final("test_metrics").mean == pytest.approx(0.5)


def test_gate_judges_only_paper_scale_with_enough_seeds(tmp_path):
    for seed in range(MIN_SEEDS):
        _fake_trial(tmp_path, "x", "paper", f"a_s{seed}", "a", {}, seed, ["valid,1,0.5,,"], 0.5)
        _fake_trial(tmp_path, "y", "paper", f"a_s{seed}", "a", {}, seed, ["valid,1,0.5,,"], 0.5)
    _fake_trial(tmp_path, "z", "smoke", "a_s0", "a", {}, 0, ["valid,1,0.5,,"], 0.5)
    (tmp_path / "y" / "paper" / "a_s2" / "result.json").unlink()
    assert gate(read_grid(tmp_path, "x"), "differs", "e") == ("differs", "paper scale; 3 seeds: e")
    verdict, evidence = gate(read_grid(tmp_path, "y"), "holds", "e")
    assert verdict == "unverified" and "fewer than the 3 paper-scale seeds" in evidence
    verdict, evidence = gate(read_grid(tmp_path, "z"), "holds", "e")
    assert verdict == "unverified" and "would read 'holds'" in evidence and "smoke scale" in evidence


def test_fig3_verdict_names_the_best_model_from_kept_results(tmp_path, monkeypatch):
    accuracy = {"rnn": 0.3, "irnn": 0.6, "spectral": 0.5}
    for task, pixels in (("mnist", 2), ("mnist", 1), ("permuted-mnist", 1)):
        for model, value in accuracy.items():
            best = value + (0.4 if task == "permuted-mnist" and model == "spectral" else 0.0)
            for seed in range(3):
                _fake_trial(
                    tmp_path,
                    "fig3-mnist",
                    "paper",
                    f"{model}_{task}{pixels}_s{seed}",
                    model,
                    {"task": task, "pixels_per_step": pixels},
                    seed,
                    ["valid,1,0.1,,"],
                    best + 0.01 * seed,
                )
    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path))
    (tmp_path / "catalog").mkdir()  # a catalog without fig3-mnist: the made-up grid counts as complete
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tmp_path / "catalog"))
    records = mnist_ranking.run()
    assert [r.verdict for r in records] == ["differs", "differs", "holds", "unverified"]  # no authors' grid
    assert "best first: irnn 0.610 [0.600, 0.620], spectral 0.510" in records[0].evidence
    assert records[2].numbers["test_accuracy"]["spectral"][0] == pytest.approx(0.91)


def test_a_comparison_over_seeds_is_inconclusive_when_the_spreads_overlap():
    assert beats([0.95, 0.96], [0.90, 0.94]) == "holds"
    assert beats([0.90, 0.94], [0.95, 0.96]) == "differs"
    assert beats([0.90, 0.95], [0.94, 0.96]) == "inconclusive"
    assert beats([1e-3, 2e-3], [5e-3, 6e-3], higher_is_better=False) == "holds"
    spread = {"spectral": (0.93, 0.90, 0.96), "rnn": (0.80, 0.79, 0.81), "lstm": (0.94, 0.92, 0.95)}
    assert mnist_ranking.ranking_verdict(spread) == "inconclusive"
    spread["lstm"] = (0.98, 0.97, 0.99)
    assert mnist_ranking.ranking_verdict(spread) == "differs"
    spread["lstm"] = (0.85, 0.84, 0.86)
    assert mnist_ranking.ranking_verdict(spread) == "holds"


def test_experimental_checks_read_the_committed_results_through_the_gate():
    records = (experiments.run() + mnist_ranking.run() + depth.run() + synthetic_tasks.run()
               + svdrnn_leak.run() + dizzy_copy.run())
    for record in records:
        scale, seeds = record.scale, int(re.search(r"; (\d+) seeds?", record.evidence).group(1))
        assert record.seeds == seeds
        stale = re.search(r"(\d+) of \d+ kept trials do not stand for the catalog's current entry",
                          record.evidence)
        judged = scale == "paper" and seeds >= MIN_SEEDS and stale is None
        assert (record.verdict != "unverified") == judged, record.evidence[:120]
    assert "gradient w.r.t. first cell of oRNN/Spectral-RNN does not vanish" in records[0].claim


def test_the_fig4_margin_check_says_when_irnns_margin_first_passes_r_or_that_it_never_does():
    grid = read_grid(ROOT / "results", "fig3-mnist")
    irnn = grid.group("irnn", task="mnist", pixels_per_step=1)
    steps, values = irnn.curve("train", "spectral_margin", with_failed=True)
    above = values.mean > 0.1
    expected = (f"above r = 0.1 from step {int(steps[above.argmax()])}" if above.any()
                else "never above r = 0.1")
    evidence = experiments.margin_record().evidence
    assert expected in evidence and "None" not in evidence
    for row in irnn.failed_rows:  # a diverged seed counts with its record up to its divergence
        assert str(row["last_recorded_step"]) in evidence and "diverged later" in evidence


def test_each_fig3_panel_counts_its_own_seeds_not_the_grids_fewest():
    """A configuration with fewer seeds (diverged trials) lowers only the panel that holds it."""
    grid = read_grid(ROOT / "results", "fig3-mnist")
    panels = mnist_ranking.run()[:len(mnist_ranking.PANELS)]  # the authors' code's reading follows
    for record, (task, pixels) in zip(panels, mnist_ranking.PANELS.values(), strict=True):
        assert record.seeds == min(g.seeds for g in mnist_ranking.panel_groups(grid, task, pixels))
    fig4 = [grid.group(m, task="mnist", pixels_per_step=1) for m in ("irnn", "spectral")]
    assert experiments.margin_record().seeds == min(g.seeds + len(g.failed_dirs) for g in fig4)


def test_fig3_is_read_again_with_the_authors_code_models_only_beside_a_grid_of_the_same_scale(
        tmp_path, monkeypatch):
    results = tmp_path / "results"
    for name in ("fig3-mnist", mnist_ranking.AUTHORS_CODE):
        shutil.copytree(ROOT / "results" / name / "smoke", results / name / "smoke")
    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(results))
    records = mnist_ranking.run()
    panels = len(mnist_ranking.PANELS)
    assert len(records) == 2 * panels
    authors = read_grid(results, mnist_ranking.AUTHORS_CODE, "smoke")
    plain = read_grid(results, "fig3-mnist", "smoke")
    for record, (task, pixels) in zip(records[panels:], mnist_ranking.PANELS.values(), strict=True):
        assert mnist_ranking.AUTHORS_CODE_LABEL in record.claim and record.scale == "smoke"
        accuracy = record.numbers["test_accuracy"]
        assert set(accuracy) == {g.variant for g in mnist_ranking.panel_groups(plain, task, pixels)}
        for model in ("spectral", "ornn"):  # the authors' code's runs, not fig3-mnist's
            assert accuracy[model][0] == authors.group(model, task=task, pixels_per_step=pixels).final().mean
        for model in ("rnn", "irnn", "lstm"):
            assert accuracy[model][0] == plain.group(model, task=task, pixels_per_step=pixels).final().mean
    # fig3-mnist read at a scale the authors' grid lacks: one unverified record that names the command
    shutil.rmtree(results / mnist_ranking.AUTHORS_CODE)
    records = mnist_ranking.run()
    assert len(records) == panels + 1 and records[-1].verdict == "unverified"
    assert f"run {mnist_ranking.AUTHORS_CODE} --scale smoke" in records[-1].evidence


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
    from spectral_analysis.cli.experiments import named_sweeps

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
    from spectral_analysis.cli.experiments import named_sweeps

    catalog = load_catalog()
    assert named_sweeps(catalog, ["table2-mnist@budget", "kru-copy"], "paper") == [
        ("table2-mnist", "budget"), ("kru-copy", "paper")]
    with pytest.raises(CommandError, match=r"\['kru-copy'\] have no 'budget' scale"):
        named_sweeps(catalog, ["kru-copy@budget"], "paper")
    with pytest.raises(CommandError, match=r"'table2-mnist@huge': unknown scale 'huge'"):
        named_sweeps(catalog, ["table2-mnist@huge"], "paper")
    assert main(["park", "table2-mnist@budget", "table2-mnist", "--scale", "paper"]) == 1
    assert "['table2-mnist'] named more than once" in capsys.readouterr().err


def test_a_complete_budget_grid_is_read_before_smoke_and_after_a_complete_paper_grid(tmp_path):
    def fake(scale: str, variant: str, accuracy: float) -> None:
        _fake_trial(tmp_path, "table2-mnist", scale, f"{variant}_s0", variant, {}, 0,
                    [f"valid,1,{accuracy},,"], accuracy)

    for variant in ("spectral", "rnn"):
        fake("smoke", variant, 0.1)
    fake("budget", "rnn", 0.5)
    assert read_grid(tmp_path, "table2-mnist").scale == "smoke"  # the budget grid is under way
    variants = ("spectral", "ornn", "urnn", "lstm")
    for variant in variants:
        fake("budget", variant, 0.5)
    grid = read_grid(tmp_path, "table2-mnist")
    assert grid.scale == "budget" and grid.stamp().startswith("budget scale (4 of the paper grid's 20 epochs")
    verdict, evidence = gate(grid, "holds", "e")
    assert verdict == "unverified" and "the paper's sizes but not its training length" in evidence
    for variant in ("rnn", *variants):
        fake("paper", variant, 0.9)
    assert read_grid(tmp_path, "table2-mnist").scale == "paper"


def test_a_paper_grid_under_way_is_not_read_until_every_configuration_has_a_trial(tmp_path):
    _fake_trial(tmp_path, "table2-mnist", "smoke", "rnn_s0", "rnn", {}, 0, ["valid,1,0.1,,"], 0.1)
    _fake_trial(tmp_path, "table2-mnist", "paper", "rnn_s0", "rnn", {}, 0, ["valid,1,0.9,,"], 0.9)
    assert read_grid(tmp_path, "table2-mnist").scale == "smoke"
    for variant in ("spectral", "ornn", "urnn", "lstm"):
        _fake_trial(
            tmp_path, "table2-mnist", "paper", f"{variant}_s0", variant, {}, 0, ["valid,1,0.9,,"], 0.9
        )
    assert read_grid(tmp_path, "table2-mnist").scale == "paper"


def test_a_configuration_whose_every_seed_diverged_completes_the_grid(tmp_path):
    """A configuration that diverged in every seed has ended: the grid is read at paper scale (and the
    claims see it as beating nothing), not held back at smoke as if it were still to run."""
    from spectral_analysis.experiments.reading import read_variants

    _fake_trial(tmp_path, "table2-mnist", "smoke", "rnn_s0", "rnn", {}, 0, ["valid,1,0.1,,"], 0.1)
    for variant in ("spectral", "ornn", "urnn", "lstm"):
        _fake_trial(tmp_path, "table2-mnist", "paper", f"{variant}_s0", variant, {}, 0, ["valid,1,0.9,,"],
                    0.9)
    assert read_grid(tmp_path, "table2-mnist").scale == "smoke"  # the RNN has not run
    assert read_variants(tmp_path, "table2-mnist", {"rnn", "lstm"}) is None
    failed = tmp_path / "table2-mnist" / "paper" / "rnn_s0"
    failed.mkdir()
    (failed / "result.json").write_text(json.dumps(
        {"experiment": "table2-mnist", "scale": "paper", "trial": "rnn_s0", "status": "failed",
         "error": "TrainingDivergedError: the training loss is nan", "variant": "rnn", "axes": {},
         "seed": 0, "hidden": 128, "config": {}}))
    grid = read_grid(tmp_path, "table2-mnist")
    assert grid.scale == "paper" and [r["trial"] for r in grid.failed] == ["rnn_s0"]
    assert "rnn" not in grid.variants()  # no finished trial to draw; the failed row stands for it
    baselines = read_variants(tmp_path, "table2-mnist", {"rnn", "lstm"})
    assert [g.variant for g in baselines.groups] == ["lstm"] and len(baselines.failed) == 1


def test_the_variants_a_claim_reads_are_judged_once_theirs_are_kept_while_the_grid_runs_on(tmp_path):
    from spectral_analysis.experiments.reading import read_variants

    for variant in ("rnn", "lstm"):
        _fake_trial(tmp_path, "table2-mnist", "paper", f"{variant}_s0", variant, {}, 0, ["valid,1,0.9,,"],
                    0.9)
    _fake_trial(tmp_path, "table2-mnist", "smoke", "rnn_s0", "rnn", {}, 0, ["valid,1,0.1,,"], 0.1)
    assert read_grid(tmp_path, "table2-mnist").scale == "smoke"  # spectral, ornn, urnn still to run
    grid = read_variants(tmp_path, "table2-mnist", {"rnn", "lstm"})
    assert grid.scale == "paper" and [g.variant for g in grid.groups] == ["rnn", "lstm"]
    assert read_variants(tmp_path, "table2-mnist", {"rnn", "spectral"}) is None  # spectral not kept
    assert read_variants(tmp_path, "table2-mnist", {"no-such-variant"}) is None
    assert read_variants(tmp_path, "not-in-the-catalog", {"rnn"}) is None


def test_committed_smoke_results_cover_the_catalog():
    catalog = load_catalog()
    for name, experiment in catalog.items():
        grid = read_grid(ROOT / "results", name, "smoke")
        assert grid is not None and len(grid.groups) == len(experiment.trials("smoke")), name


def test_figures_are_drawn_from_kept_results_without_training(tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("a reader trained a model")

    monkeypatch.setattr(Trainer, "run", no_training)
    beside = {"fig3-mnist": "fig3_mnist.png"} | {n: f.file for n, f in LEARNING_FIGURES.items()}
    for file in beside.values():  # left by an earlier draw: stale once the paper grid is whole
        (tmp_path / file.replace(".png", "_paper.png")).write_bytes(b"stale")
    drawn = draw_figures(ROOT / "results", tmp_path)
    names = {Path(d["path"]).name for d in drawn}
    assert {
        "fig1_addition.png",
        "fig2_copy.png",
        "fig3_mnist.png",
        "fig4_mnist_dynamics.png",
        "fig5_depth.png",
        "fig2c_leak.png",
        "bound_vs_T.png",
        "kru_amplitude.png",
        "table2_mnist.md",
        "table4_ucr.md",
    } <= names
    assert all(Path(d["path"]).stat().st_size > 0 for d in drawn)
    for d in drawn:  # each file at the scale of a grid it reads (drawn grid, paper rows beside it)
        if d["experiment"] != "benchmarks":
            assert d["scale"] in {g.scale for g in read_grids(ROOT / "results", d["experiment"])}
    for experiment, file in beside.items():  # the paper-scale models kept so far beside a smaller grid
        grid = read_grid(ROOT / "results", experiment)
        paper_so_far = grid.scale != "paper" and read_grid(ROOT / "results", experiment, "paper") is not None
        paper_file = file.replace(".png", "_paper.png")
        assert (paper_file in names) == paper_so_far == (tmp_path / paper_file).exists(), experiment
        assert not paper_so_far or (tmp_path / paper_file).read_bytes() != b"stale", experiment
    table2_files = [d["scale"] for d in drawn if d["experiment"] == "table2-mnist"]
    assert table2_files == [g.scale for g in read_grids(ROOT / "results", "table2-mnist")]
    table2 = read_grid(ROOT / "results", "table2-mnist")
    assert table2.stamp() in (tmp_path / "table2_mnist.md").read_text()
    assert set(READERS) - {"benchmarks"} <= set(load_catalog())


def test_a_grid_validated_only_at_epoch_ends_is_drawn_from_its_training_records(tmp_path, monkeypatch):
    from spectral_analysis.plotting import results_figures

    drawn = []
    real = results_figures.plot_learning_curves

    def capture(panels, metric, *args, **kwargs):
        drawn.append((panels, kwargs))
        return real(panels, metric, *args, **kwargs)

    monkeypatch.setattr(results_figures, "plot_learning_curves", capture)
    LEARNING_FIGURES["kru-ptb"].draw("kru-ptb", ROOT / "results", tmp_path)
    (panels, kwargs), = drawn
    grid = read_grid(ROOT / "results", "kru-ptb")
    for group in grid.groups:  # two validations (the epoch ends) against 100 training records a trial
        assert len(group.curve("valid", "cross_entropy")[0]) == 2
        steps = panels[""][group.variant]["steps"]
        assert len(steps) > 50 and np.array_equal(steps, group.curve("train", "cross_entropy")[0])
    assert kwargs["data_name"] == "training"
    assert LEARNING_FIGURES["fig1-addition"].phase == "valid"


def test_the_r_claims_of_the_earlier_fig2a():
    from spectral_analysis.paper import svdrnn_r

    spread = {"rnn": (0.85, 0.84, 0.86), "ornn": (0.88, 0.87, 0.89), "spectral-r0.01": (0.905, 0.90, 0.91),
              "spectral-r1": (0.90, 0.895, 0.905)}
    assert svdrnn_r.best_verdict(spread) == "holds" and svdrnn_r.r_verdict(spread) == "holds"
    spread["spectral-r1"] = (0.85, 0.845, 0.855)  # r = 1 loses 5 points, well outside the seeds
    assert svdrnn_r.r_verdict(spread) == "differs"
    spread["spectral-r1"] = (0.885, 0.86, 0.91)  # 2 points, but within its own seed range
    assert svdrnn_r.r_verdict(spread) == "holds"
    spread["spectral-r1"] = (0.88, 0.875, 0.899)  # 2.5 points, seeds 1 point apart: not separated by more
    assert svdrnn_r.r_verdict(spread) == "inconclusive"
    spread["ornn"] = (0.95, 0.94, 0.96)
    assert svdrnn_r.best_verdict(spread) == "differs"
    assert svdrnn_r.r_verdict({"spectral-r1": (0.9, 0.9, 0.9), "rnn": (0.8, 0.8, 0.8)}) == "unverified"


def test_the_baseline_claims_of_section_7_1():
    import math

    assert synthetic_tasks.copy_baseline(100) == pytest.approx(10 * math.log(8) / 120)
    line = 0.98 * 0.1
    assert synthetic_tasks.against_baseline((0.05, 0.04, line - 1e-9), 0.1) == "beats"
    assert synthetic_tasks.against_baseline((0.2, line, 0.3), 0.1) == "fails"
    assert synthetic_tasks.against_baseline((0.1, 0.05, 0.15), 0.1) == "undecided"
    assert synthetic_tasks.against_baseline((0.05, 0.04, math.inf), 0.1) == "undecided"  # a seed diverged
    spreads = {"spectral": (0.05, 0.04, 0.06), "ornn": (0.07, 0.06, 0.08), "lstm": (0.3, 0.2, 0.4)}
    assert synthetic_tasks.only_these_beat(spreads, 0.167, {"spectral", "ornn"}) == "holds"
    assert synthetic_tasks.only_these_beat(spreads, 0.167, set(spreads)) == "differs"  # lstm fails
    spreads["lstm"] = (0.01, 0.005, 0.02)  # lstm beats it too
    assert synthetic_tasks.only_these_beat(spreads, 0.167, {"spectral", "ornn"}) == "differs"
    assert synthetic_tasks.only_these_beat(spreads, 0.167, set(spreads)) == "holds"
    spreads["ornn"] = (0.15, 0.1, 0.2)  # ornn undecided
    assert synthetic_tasks.only_these_beat(spreads, 0.167, set(spreads)) == "inconclusive"
    panels = {50: {"spectral": (0.1, 0.09, 0.11), "rnn": (0.3, 0.2, math.inf)},
              200: {"spectral": (0.05, 0.04, 0.06), "lstm": (0.08, 0.07, 0.09)}}
    assert synthetic_tasks.best_everywhere(panels) == "holds"
    panels[200]["lstm"] = (0.05, 0.045, 0.055)
    assert synthetic_tasks.best_everywhere(panels) == "inconclusive"
    panels[200]["lstm"] = (0.02, 0.01, 0.03)
    assert synthetic_tasks.best_everywhere(panels) == "differs"


def test_the_leak_claims_of_the_earlier_fig2c_f():
    per_leak = {0.0: ([0.92, 0.93], [0.90, 0.91]), 1.0: ([0.88, 0.89], [0.84, 0.85])}
    assert svdrnn_leak.every_leak_beats(per_leak) == "holds"
    per_leak[0.5] = ([0.90, 0.92], [0.91, 0.93])  # overlapping seeds at one leak
    assert svdrnn_leak.every_leak_beats(per_leak) == "inconclusive"
    per_leak[0.2] = ([0.80, 0.81], [0.90, 0.91])  # RNN ahead at one leak
    assert svdrnn_leak.every_leak_beats(per_leak) == "differs"
    linear = [0.04, 0.05]
    assert svdrnn_leak.vanishing([0.001, 0.003], linear) == "vanishes"  # every seed below 0.1 x 0.04
    assert svdrnn_leak.vanishing([0.01, 0.02], linear) == "kept"
    assert svdrnn_leak.vanishing([0.003, 0.02], linear) == "undecided"
    claimed = {"spectral": {0.0: "kept", 0.5: "kept"}, "rnn": {0.0: "vanishes", 0.5: "kept"}}
    assert svdrnn_leak.gradient_verdict(claimed) == "holds"
    assert svdrnn_leak.gradient_verdict({**claimed, "rnn": {0.0: "kept", 0.5: "vanishes"}}) == "differs"
    assert svdrnn_leak.gradient_verdict({**claimed, "spectral": {0.0: "vanishes"}}) == "differs"
    assert svdrnn_leak.gradient_verdict({**claimed, "rnn": {0.0: "undecided"}}) == "inconclusive"
    assert svdrnn_leak.gradient_verdict({"spectral": {0.0: "kept"}}) == "unverified"


def test_the_leak_check_reads_the_committed_grid_with_every_leak_and_both_models():
    records = svdrnn_leak.run()
    assert len(records) == 3 and all(r.quote for r in records)
    gradients = records[2].numbers
    assert set(gradients) == {"spectral", "rnn"} and set(gradients["rnn"]) == {"0.0", "0.2", "0.5", "1.0"}
    assert all(g > 0 for seeds in gradients["rnn"].values() for g in seeds)


def test_several_comparisons_make_one_claim_and_dizzyrnns_near_perfect_rule():
    assert every(["holds", "holds"]) == "holds"
    assert every(["holds", "inconclusive"]) == "inconclusive"
    assert every(["holds", "differs", "inconclusive"]) == "differs"
    assert every([]) == "inconclusive"  # nothing compared is no evidence
    assert dizzy_copy.reaches([0.96, 0.99]) == "holds"
    assert dizzy_copy.reaches([0.5, 0.96]) == "inconclusive"
    assert dizzy_copy.reaches([0.5, 0.94]) == "differs"


def test_the_dizzyrnn_check_reads_every_model_of_the_committed_grid():
    reached, ahead = dizzy_copy.run()
    assert set(ahead.numbers["test_accuracy"]) == {"dizzy", "rnn", "irnn", "lstm"}
    assert len(reached.numbers["best_validation"]) == reached.seeds
    assert all(0.0 <= v <= 1.0 for v in reached.numbers["best_validation"])


def test_the_kru_amplitude_check_reads_margins_and_best_validation_per_amplitude(tmp_path, monkeypatch):
    from spectral_analysis.paper import kru_amplitude

    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path))
    (tmp_path / "catalog").mkdir()
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tmp_path / "catalog"))

    def fake(task: str, margins: dict[float, list[float]], nll: dict[float, list[float]]) -> list:
        for a in margins:
            for seed, (margin, best) in enumerate(zip(margins[a], nll[a], strict=True)):
                key = f"kru_penalty{a:g}_s{seed}"
                directory = tmp_path / "kru-amplitude" / "paper" / key
                directory.mkdir(parents=True, exist_ok=True)
                row = {"experiment": "kru-amplitude", "scale": "paper", "trial": key, "status": "done",
                       "variant": "kru", "axes": {"penalty": a}, "seed": seed, "hidden": 100, "task": task,
                       "metric": "nll", "best_valid": best, "test_metrics": {"nll": best}, "config": {}}
                (directory / "result.json").write_text(json.dumps(row))
                (directory / "curves.csv").write_text("phase,step,spectral_margin\n" + "".join(
                    f"train,{s},{margin}\n" for s in range(1, 6)))
        return kru_amplitude.run()

    margins = {1e-7: [0.8, 0.7, 0.9], 1e-2: [0.3, 0.4, 0.35], 1e-1: [0.1, 0.12, 0.2]}
    nll = {1e-7: [8.9, 9.0, 9.1], 1e-2: [8.5, 8.6, 8.55], 1e-1: [8.8, 8.7, 8.75]}
    unitary, best = fake("jsb", margins, nll)
    assert (unitary.verdict, best.verdict) == ("holds", "holds")
    nll[1e-1] = [8.4, 8.45, 8.42]  # the largest amplitude validates best
    margins[1e-1] = [0.95, 0.97, 0.99]  # and ends farther from unitary
    unitary, best = fake("jsb", margins, nll)
    assert (unitary.verdict, best.verdict) == ("differs", "differs")


def test_a_check_does_not_judge_from_trials_the_current_catalog_entry_would_retrain(tmp_path, monkeypatch):
    capped = TINY.replace("steps = 8\ntask_options = { train_size = 64",
                          "steps = 8\nmax_steps = 16\ntask_options = { train_size = 64")
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tiny_catalog(tmp_path, capped)))
    trials = load_catalog()["tiny"].trials("paper")

    def keep(trial, config: dict, best_step: int, steps: int) -> None:
        directory = tmp_path / "results" / "tiny" / "paper" / trial.key
        directory.mkdir(parents=True, exist_ok=True)
        row = {"experiment": "tiny", "scale": "paper", "trial": trial.key, "status": "done",
               "variant": trial.variant, "axes": trial.axes, "seed": trial.seed, "metric": "mse",
               "test_metrics": {"mse": 0.1}, "config": config, "steps": steps, "best_step": best_step}
        (directory / "result.json").write_text(json.dumps(row))

    for trial in trials:
        keep(trial, trial.config, best_step=16, steps=16)  # ran to the cap: stands
    grid = read_grid(tmp_path / "results", "tiny")
    assert grid.trials == 12 and not grid.stale and gate(grid, "holds", "e")[0] == "holds"
    shorter = {k: v for k, v in trials[0].config.items() if k != "max_steps"}
    keep(trials[0], shorter, best_step=2, steps=8)  # an older run that plateaued early: stands
    assert not read_grid(tmp_path / "results", "tiny").stale
    keep(trials[0], shorter, best_step=8, steps=8)  # stopped at its minimum, still improving: trains on
    keep(trials[1], {**trials[1].config, "hidden": 5}, best_step=16, steps=16)  # a changed entry
    grid = read_grid(tmp_path / "results", "tiny")
    assert grid.stale == {trials[0].key: ["max_steps"], trials[1].key: ["hidden"]}
    verdict, evidence = gate(grid, "holds", "e")
    assert verdict == "unverified" and "would read 'holds'" in evidence
    assert "2 of 12 kept trials" in evidence and "differ in hidden, max_steps" in evidence
    assert grid.stamp().endswith("2 of 12 trials stale")


def test_a_run_directory_of_an_older_catalog_entry_is_started_over_not_resumed(tmp_path):
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    trial = experiment.trials("smoke", seeds=1)[0]

    def run(hidden: int) -> dict:
        config = {**trial.config, "hidden": hidden}
        spec = TrialSpec({**trial.__dict__, "config": config}, str(tmp_path / "runs" / trial.key),
                         str(tmp_path / "results"), "cpu", "test")
        return run_trial(spec)

    assert run(4)["status"] == "done"
    row = run(5)  # the catalog's entry changed: its old run cannot be resumed
    assert row["status"] == "done" and row["hidden"] == 5, row.get("error")
    stored = json.loads((tmp_path / "runs" / trial.key / "config.json").read_text())
    assert stored["train"]["hidden"] == 5


def _kept_paper_trials(root: Path, experiment: str, column: str, slope: float,
                       runs: dict[str, tuple[list[float], float]]) -> None:
    """Kept paper-scale trials of ``experiment``: per variant, each seed's test ``column`` and a training
    curve of ``column`` falling by ``slope`` a record to the given end value over 9 records (so the
    median of the last five is that value + 2 * slope)."""
    for variant, (tests, train) in runs.items():
        for seed, test in enumerate(tests):
            directory = root / experiment / "paper" / f"{variant}_s{seed}"
            directory.mkdir(parents=True)
            row = {"experiment": experiment, "scale": "paper", "trial": f"{variant}_s{seed}",
                   "status": "done", "variant": variant, "axes": {}, "seed": seed, "hidden": 100,
                   "metric": column, "test_metrics": {column: test}, "config": {}}
            (directory / "result.json").write_text(json.dumps(row))
            (directory / "curves.csv").write_text(f"phase,step,{column}\n" + "".join(
                f"train,{s},{train + (9 - s) * slope}\n" for s in range(1, 10)))


def test_the_kru_table4_claims_read_test_nll_and_the_overfitting_gap(tmp_path, monkeypatch):
    from spectral_analysis.paper import kru_music

    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path))
    (tmp_path / "catalog").mkdir()
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tmp_path / "catalog"))
    _kept_paper_trials(tmp_path, "kru-music", "nll", 0.1, {
        "kru": ([8.6, 8.5, 8.55], 8.3), "rnn": ([9.1, 9.0, 9.2], 8.2), "lstm": ([8.7, 8.8, 8.75], 7.9)})
    better, less = kru_music.run()
    assert better.verdict == "holds" and less.verdict == "holds"  # gaps: kru 0-0.1, rnn 0.6-0.8, lstm 0.6-0.7
    assert less.numbers["kru"][0] == pytest.approx(8.6 - 8.5)  # median of the last five: 8.3 + 0.2


def test_the_table3_claims_read_test_perplexity_per_depth_and_the_two_layer_training_gap(tmp_path,
                                                                                           monkeypatch):
    from spectral_analysis.paper import ptb

    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path))
    (tmp_path / "catalog").mkdir()
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tmp_path / "catalog"))
    _kept_paper_trials(tmp_path, "table3-ptb", "perplexity", 10, {
        "spectral-1x512": ([130, 131, 129], 65), "lstm-1x128": ([140, 139, 141], 69),
        "spectral-2x512": ([121, 120, 122], 36), "lstm-2x128": ([125, 124, 126], 26)})
    better, two = ptb.run()
    assert better.verdict == "holds" and two.verdict == "holds", (better.evidence, two.evidence)
    assert two.numbers["train_perplexity"]["spectral-2x512"][0] == pytest.approx(56)  # 36 + 2 * 10
    assert better.quote == ptb.BETTER_QUOTE and better.seeds == 3
    for run in (tmp_path / "table3-ptb" / "paper").glob("lstm-2x128_s*"):
        shutil.rmtree(run)  # the 2-layer LSTM now overfits less and generalizes better
    _kept_paper_trials(tmp_path, "table3-ptb", "perplexity", 10, {"lstm-2x128": ([110, 111, 112], 60)})
    better, two = ptb.run()
    assert better.verdict == "differs" and two.verdict == "differs"
    assert "(lower: differs)" in two.evidence and "(higher: differs)" in two.evidence


def test_the_table3_claims_are_unverified_without_their_rows():
    from spectral_analysis.paper import ptb

    records = ptb.records_from_grid(None)
    assert [r.verdict for r in records] == ["unverified", "unverified"]
    assert [r.quote for r in records] == [ptb.BETTER_QUOTE, ptb.TWO_LAYER_QUOTE]


@pytest.mark.parametrize("module", ["dizzy_copy", "kru_amplitude", "kru_music", "svdrnn_leak"])
def test_a_check_with_nothing_kept_is_unverified_and_names_the_command(module):
    import importlib

    records = importlib.import_module(f"spectral_analysis.paper.{module}").records_from_grid(None)
    assert [r.verdict for r in records] == ["unverified"]
    assert "spectral-analysis run" in records[0].evidence and "--scale paper" in records[0].evidence


def test_one_grid_runs_the_experiments_in_order_each_longest_first_by_its_kept_estimate(tmp_path,
                                                                                     monkeypatch):
    from contextlib import nullcontext

    from spectral_analysis.experiments import runner

    catalog = tiny_catalog(tmp_path)
    (catalog / "second.toml").write_text(TINY.replace('name = "tiny"', 'name = "second"'))
    first, second = load_experiment(catalog / "tiny.toml"), load_experiment(catalog / "second.toml")
    grids: list[list[str]] = []
    results = tmp_path / "results"

    def fake_ray(specs, trainable, gpus_per_trial, storage, name, report, finished):  # noqa: ANN001
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


def test_the_kru_copy_and_adding_claims_read_test_losses_against_the_baselines(tmp_path, monkeypatch):
    from spectral_analysis.experiments.reading import read_grid
    from spectral_analysis.paper import kru_synthetic
    from spectral_analysis.paper.synthetic_tasks import copy_baseline

    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path))
    (tmp_path / "catalog").mkdir()
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tmp_path / "catalog"))

    def keep(experiment: str, metric: str, tests: dict[tuple[str, int], list[float]]) -> None:
        for (variant, length), values in tests.items():
            for seed, value in enumerate(values):
                key = f"{variant}_length{length}_s{seed}"
                directory = tmp_path / experiment / "paper" / key
                directory.mkdir(parents=True, exist_ok=True)
                row = {"experiment": experiment, "scale": "paper", "trial": key, "status": "done",
                       "variant": variant, "axes": {"length": length}, "seed": seed, "hidden": 128,
                       "metric": metric, "test_metrics": {metric: value}, "config": {},
                       "parameters": parameters[variant]}
                (directory / "result.json").write_text(json.dumps(row))

    parameters = {"kru": 4680, "rnn": 16896, "lstm": 67200}
    stuck = {lag: copy_baseline(lag) for lag in (1000, 2000)}
    copy = {("kru", lag): [1e-4, 2e-4, 3e-4] for lag in stuck}
    copy |= {(m, lag): [b, b * 1.01, b * 0.995] for lag, b in stuck.items() for m in ("rnn", "lstm")}
    keep("kru-copy", "cross_entropy", copy)
    adding = {("kru", t): [1e-4, 2e-4, 1e-4] for t in (100, 750)}
    adding |= {("lstm", t): [1e-3, 2e-3, 3e-3] for t in (100, 750)}
    adding |= {("rnn", t): [0.17] * 3 for t in (100, 750)}
    keep("kru-adding", "mse", adding)
    assert [r.verdict for r in kru_synthetic.run()] == ["holds"] * 4
    keep("kru-copy", "cross_entropy", {("kru", 2000): [0.5 * stuck[2000]] * 3,  # KRU halfway at T = 2000
                                       ("lstm", 1000): [0.5 * stuck[1000]] * 3})  # the LSTM learns 1000
    keep("kru-adding", "mse", {("lstm", 750): [1e-5, 1e-5, 1e-5]})  # the LSTM beats KRU at T = 750
    zero, others, best, learns = kru_synthetic.run()
    assert (zero.verdict, others.verdict, best.verdict, learns.verdict) == ("differs",) * 3 + ("holds",)
    assert "T = 2000: kru" in zero.evidence and "(differs)" in zero.evidence
    for seed in range(3):  # the RNN at T = 2000 diverged in every seed: it beats no baseline
        directory = tmp_path / "kru-copy" / "paper" / f"rnn_length2000_s{seed}"
        (directory / "result.json").write_text(json.dumps(
            {"experiment": "kru-copy", "scale": "paper", "trial": directory.name, "status": "failed",
             "error": "TrainingDivergedError: the training loss is nan", "variant": "rnn",
             "axes": {"length": 2000}, "seed": seed, "hidden": 128, "config": {}}))
    keep("kru-copy", "cross_entropy", {("lstm", 1000): [stuck[1000]] * 3})
    _, others = kru_synthetic.copy_records(read_grid(tmp_path, "kru-copy"))
    assert others.verdict == "holds" and "rnn all 3 seeds diverged (fails)" in others.evidence
    keep("kru-adding", "mse", {("lstm", 750): [1e-3, 2e-3, 3e-3]})  # KRU best again
    best, _ = kru_synthetic.adding_records(read_grid(tmp_path, "kru-adding"))
    assert best.verdict == "holds" and "parameters: kru 4,680, rnn 16,896, lstm 67,200" in best.evidence
    parameters["kru"] = 20000  # more than the RNN: "with fewer parameters" fails though KRU is best
    keep("kru-adding", "mse", adding)
    best, _ = kru_synthetic.adding_records(read_grid(tmp_path, "kru-adding"))
    assert best.verdict == "differs" and best.numbers["parameters"]["kru"] == 20000



def test_the_kru_copy_baselines_are_judged_from_their_paper_trials_while_kru_runs_on(tmp_path, monkeypatch):
    """RNN and LSTM end hours before KRU: their claim reads their paper-scale trials (every RNN seed at
    T = 2000 diverged, as in the kept runs) while KRU's stays at smoke, unverified."""
    from spectral_analysis.experiments.catalog import find_experiment
    from spectral_analysis.paper import kru_synthetic
    from spectral_analysis.paper.synthetic_tasks import copy_baseline

    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path))
    experiment = find_experiment("kru-copy")

    def keep(scale: str, test: dict[tuple[str, int], float | None]) -> None:
        """A row for every seed of each configuration in ``test``: done with that test loss, or failed
        (``None``)."""
        for trial in experiment.trials(scale):
            where = (trial.variant, trial.axes["length"])
            if where not in test:
                continue
            directory = tmp_path / "kru-copy" / scale / trial.key
            directory.mkdir(parents=True, exist_ok=True)
            row = {"experiment": "kru-copy", "scale": scale, "trial": trial.key, "variant": trial.variant,
                   "axes": trial.axes, "seed": trial.seed, "hidden": 128, "config": trial.config,
                   "parameters": 1, "status": "failed", "error": "TrainingDivergedError: nan"}
            if test[where] is not None:
                row |= {"status": "done", "metric": "cross_entropy",
                        "test_metrics": {"cross_entropy": test[where]}}
            (directory / "result.json").write_text(json.dumps(row))

    at_baseline = {(m, lag): copy_baseline(lag) for m in ("kru", "rnn", "lstm") for lag in (1000, 2000)}
    keep("smoke", at_baseline)
    keep("paper", {("lstm", 1000): copy_baseline(1000), ("lstm", 2000): copy_baseline(2000),
                   ("rnn", 1000): copy_baseline(1000)})
    converged, stuck = kru_synthetic.run()[:2]
    assert (converged.verdict, converged.scale) == (stuck.verdict, stuck.scale) == ("unverified", "smoke")
    keep("paper", {("rnn", 2000): None})  # every seed diverged: the baselines' grid has ended
    converged, stuck = kru_synthetic.run()[:2]
    assert converged.scale == "smoke" and (stuck.verdict, stuck.scale, stuck.seeds) == ("holds", "paper", 3)
    assert "rnn all 3 seeds diverged (fails)" in stuck.evidence
    for seed in range(3):  # a failed run of another configuration does not stand for the catalog's trial
        kept = tmp_path / "kru-copy" / "paper" / f"rnn_length2000_s{seed}" / "result.json"
        row = json.loads(kept.read_text())
        row["config"] = {**row["config"], "lr": 0.1}
        kept.write_text(json.dumps(row))
    stuck = kru_synthetic.run()[1]
    assert stuck.verdict == "unverified" and "3 of 12 kept trials do not stand" in stuck.evidence
    keep("paper", {("rnn", 2000): None})
    keep("paper", {("lstm", 1000): 0.5 * copy_baseline(1000)})
    assert kru_synthetic.run()[1].verdict == "differs"  # the LSTM learns T = 1000
    keep("paper", {("lstm", 1000): copy_baseline(1000)})
    kept = tmp_path / "kru-copy" / "paper" / "rnn_length1000_s0" / "result.json"  # one of three diverged
    kept.write_text(json.dumps({**json.loads(kept.read_text()), "status": "failed", "error": "nan"}))
    stuck = kru_synthetic.run()[1]
    assert stuck.verdict == "holds"
    level = f"{copy_baseline(1000):.4g}"
    assert f"rnn {level} [{level}, 1 of 3 seeds diverged]" in stuck.evidence


def test_a_catalog_edited_while_a_sweep_runs_does_not_stop_it(tmp_path, monkeypatch):
    """The sweep writes the ledger from the catalog it started with: a catalog file rewritten with a field
    the running code does not know (as a checkout updated under a running sweep) once made the ledger's
    reload raise inside Tune's callback and end the whole sweep."""
    from contextlib import nullcontext

    from spectral_analysis.experiments import runner

    catalog = tiny_catalog(tmp_path)
    tiny = load_experiment(catalog / "tiny.toml")
    results = tmp_path / "results"

    def fake_ray(specs, trainable, gpus_per_trial, storage, name, report, finished):  # noqa: ANN001
        (catalog / "newer.toml").write_text(TINY.replace('name = "tiny"', 'name = "newer"')
                                            .replace("lr = 1e-2", "lr = 1e-2\nnot_a_field = 1"))
        trainable({"spec": specs[0]})
        finished(specs[0]["trial"]["experiment"])
        return {f"{specs[0]['trial']['experiment']}/{specs[0]['trial']['key']}": "done"}

    monkeypatch.setattr(runner, "ray_session", lambda *args: nullcontext())
    monkeypatch.setattr(runner, "run_grid", fake_ray)
    (outcome,) = runner.run_sweeps([tiny], "paper", seeds=1, out=tmp_path / "runs", results=results,
                                   report=lambda _: None)
    assert outcome.ran and "| tiny | paper | 1 / 12 |" in (results / "LEDGER.md").read_text()
    with pytest.raises(ValueError, match="newer.toml"):  # the next sweep reads the catalog as it is now
        runner.run_sweeps([tiny], "paper", seeds=1, out=tmp_path / "runs", results=results,
                          report=lambda _: None)

def test_kru_mnist_claims_compare_kru_and_the_lstm_per_task_over_seeds(tmp_path, monkeypatch):
    from spectral_analysis.paper import kru_mnist

    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path))
    (tmp_path / "catalog").mkdir()
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tmp_path / "catalog"))
    assert [r.verdict for r in kru_mnist.run()] == ["unverified"] * 2  # nothing kept

    def keep(scale: str, accuracy: dict[tuple[str, str], list[float]]) -> None:
        for (variant, task), values in accuracy.items():
            for seed, value in enumerate(values):
                key = f"{variant}_task{task}_s{seed}"
                directory = tmp_path / "kru-mnist" / scale / key
                directory.mkdir(parents=True, exist_ok=True)
                row = {"experiment": "kru-mnist", "scale": scale, "trial": key, "status": "done",
                       "variant": variant, "axes": {"task": task}, "seed": seed, "hidden": 512,
                       "metric": "accuracy", "test_metrics": {"accuracy": value}, "config": {}}
                (directory / "result.json").write_text(json.dumps(row))

    as_printed = {("kru", "permuted-mnist"): [0.945, 0.94, 0.95],
                  ("lstm", "permuted-mnist"): [0.91, 0.9, 0.92],
                  ("kru", "mnist"): [0.964, 0.96, 0.965], ("lstm", "mnist"): [0.978, 0.975, 0.98]}
    keep("paper", as_printed)
    permuted, unpermuted = kru_mnist.run()
    assert (permuted.verdict, unpermuted.verdict) == ("holds", "holds")
    assert "kru 0.945 [0.940, 0.950], lstm 0.910 [0.900, 0.920]" in permuted.evidence
    keep("paper", {("lstm", "permuted-mnist"): [0.96, 0.955, 0.97],  # the LSTM ahead on permuted MNIST
                   ("kru", "mnist"): [0.97, 0.985, 0.99]})  # and the seeds overlap on unpermuted
    permuted, unpermuted = kru_mnist.run()
    assert (permuted.verdict, unpermuted.verdict) == ("differs", "inconclusive")



def test_kru_ptb_claims_read_bits_per_character_from_the_test_cross_entropy(tmp_path, monkeypatch):
    import math

    from spectral_analysis.paper import kru_ptb

    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path))
    (tmp_path / "catalog").mkdir()
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tmp_path / "catalog"))

    def keep(bpc: dict[str, list[float]]) -> None:
        for variant, values in bpc.items():
            for seed, value in enumerate(values):
                key = f"{variant}_s{seed}"
                directory = tmp_path / "kru-ptb" / "paper" / key
                directory.mkdir(parents=True, exist_ok=True)
                row = {"experiment": "kru-ptb", "scale": "paper", "trial": key, "status": "done",
                       "variant": variant, "axes": {}, "seed": seed, "hidden": 300, "metric": "cross_entropy",
                       "test_metrics": {"cross_entropy": value * math.log(2)}, "config": {}}
                (directory / "result.json").write_text(json.dumps(row))

    printed = {"rnn-300": 1.60, "lstm-150": 1.59, "ornn-512": 1.68, "kru-411": 1.60, "rnn-600": 1.51,
               "lstm-300": 1.45, "kru-993": 1.48}
    keep({m: [b, b - 0.01, b + 0.01] for m, b in printed.items()})
    worse, close = kru_ptb.run()
    assert (worse.verdict, close.verdict) == ("holds", "holds")
    assert "ornn-512 1.680 [1.670, 1.690]" in worse.evidence  # BPC = cross entropy / ln 2
    keep({"ornn-512": [1.55, 1.54, 1.56], "kru-993": [1.60, 1.59, 1.61]})  # oRNN best; KRU 0.15 behind
    worse, close = kru_ptb.run()
    assert (worse.verdict, close.verdict) == ("differs", "differs")
    keep({"kru-993": [1.52, 1.40, 1.60]})  # 0.07 from the LSTM's mean, but the seeds overlap
    assert kru_ptb.run()[1].verdict == "inconclusive"

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


def make_recipe_grids(target: str, command: str) -> list[tuple[list[tuple[str, str]], dict[str, str] | None]]:
    """The Makefile ``target``'s ``spectral-analysis COMMAND`` lines as ((experiment, scale) pairs, only),
    the names read as the command line reads them (``NAME@SCALE`` at its own scale)."""
    from spectral_analysis.cli.experiments import named_sweeps

    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    variables = dict(re.findall(r"^(\w+) [:?]= *(.*)$", text, flags=re.M))
    recipe = text.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
    lines = [re.sub(r"\$\((\w+)\)", lambda m: variables.get(m[1], m[0]), line)
             for line in recipe.splitlines() if f" {command} " in line]
    grids = []
    for line in lines:
        args = line.split(f" {command} ", 1)[1].split()
        names = [a for a in args[: next(i for i, a in enumerate(args) if a.startswith("--"))]]
        scale = args[args.index("--scale") + 1]
        only = None
        if "--only" in args:
            key, value = args[args.index("--only") + 1].split("=")
            only = {key: value}
        grids.append((named_sweeps(load_catalog(), names, scale), only))
    return grids


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
