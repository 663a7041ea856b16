"""Training until the validation metric plateaus (``max_steps``) and the kept rows that stand for it."""

import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from spectral_analysis.cli import main
from spectral_analysis.experiments.grid import Trial
from spectral_analysis.experiments.row_status import kept_row_stands, outcome_text, plateaued
from spectral_analysis.train import TrainConfig, Trainer, load_checkpoint, train
from spectral_analysis.train.plateau import best_validation, is_plateau, last_improvement_step


def _config(out, **overrides) -> TrainConfig:
    base = dict(model="rnn", task="addition", out=str(out), hidden=8, batch_size=16,
                task_options={"length": 10, "train_size": 160, "valid_size": 32, "test_size": 32},
                steps=24, record_every=4, eval_every=8, checkpoint_every=8, progress=False)
    base.update(overrides)
    return TrainConfig(**base)


@pytest.fixture
def scripted_validation(monkeypatch):
    """The validation mse as a function of the trainer's step (``script[0](step)``); the test split's
    metrics stay real."""
    from spectral_analysis.train import trainer as trainer_module

    script, trainers = [lambda step: 1.0 / step], []
    real_evaluate, real_init = trainer_module.evaluate, Trainer.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        trainers.append(self)

    def evaluate(model, task, split, batch_size, device, limit=None):
        metrics = real_evaluate(model, task, split, batch_size, device, limit)
        if split is task.valid:
            metrics["mse"] = script[0](trainers[-1].step)
        return metrics

    monkeypatch.setattr(Trainer, "__init__", init)
    monkeypatch.setattr(trainer_module, "evaluate", evaluate)
    return script


def _phases(out):
    rows = map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
    return [(row["phase"], row["step"]) for row in rows if row["phase"] in ("valid", "test")]


def test_best_validation_takes_the_direction_of_the_metric_and_the_earliest_tie():
    lines = [{"step": 8, "mse": 0.5, "accuracy": 0.2}, {"step": 16, "mse": 0.3, "accuracy": 0.9},
             {"step": 24, "mse": 0.3, "accuracy": 0.9}, {"step": 32, "mse": 0.4, "accuracy": 0.1}]
    assert best_validation(lines, "mse") == (0.3, 16)
    assert best_validation(lines, "accuracy") == (0.9, 16)
    assert best_validation([{"step": 8}], "mse") == (None, None)
    assert is_plateau(16, 20) and not is_plateau(17, 20)


@given(st.lists(st.sampled_from([0.1, 0.2, 0.25, 0.3, 0.5, 1.0]), max_size=12),
       st.sampled_from(["mse", "accuracy"]))
def test_without_a_tolerance_the_last_improvement_is_the_best_step(values, metric):
    lines = [{"step": 8 * (i + 1), metric: v} for i, v in enumerate(values)]
    assert last_improvement_step(lines, metric) == best_validation(lines, metric)[1]


def test_a_tolerance_ignores_small_gains_until_together_they_pass_it():
    solved = [1.4e-3, 7.9e-6, 9.3e-7, 1.4e-6, 2.0e-7, 5.9e-8, 8.5e-9, 6.5e-10]  # KRU's copy at T = 2000
    lines = [{"step": 1000 * (i + 1), "cross_entropy": v} for i, v in enumerate(solved)]
    assert best_validation(lines, "cross_entropy")[1] == 8000
    assert last_improvement_step(lines, "cross_entropy", 1e-6) == 3000  # 7.9e-6 -> 9.3e-7, the last
    accuracies = (0.5, 0.54, 0.58, 0.62, 0.625)
    creeping = [{"step": i + 1, "accuracy": a} for i, a in enumerate(accuracies)]
    assert last_improvement_step(creeping, "accuracy", 0.05) == 3  # 0.58 passes 0.5 by 0.08; 0.625 is 0.045
    assert last_improvement_step(creeping, "accuracy", 0.1) == 4  # 0.62 passes 0.5 by 0.12
    assert last_improvement_step(creeping, "accuracy", 0.2) == 1
    row = {"status": "done", "steps": 20000, "best_step": 19500, "plateau_step": 2500}
    assert plateaued(row) and not plateaued({**row, "plateau_step": 19500})
    assert not plateaued({k: v for k, v in row.items() if k != "plateau_step"})  # kept before: best step


def test_the_summary_reports_the_step_the_plateau_criterion_counts(tmp_path):
    import csv

    from spectral_analysis.experiments.results import write_summary

    base = {"status": "done", "steps": 20000, "best_step": 19500, "config": {"steps": 20000}}
    rows = {"tolerant_s0": {**base, "plateau_step": 2500}, "kept_before_s0": base}
    for trial, row in rows.items():
        (tmp_path / "e" / "paper" / trial).mkdir(parents=True)
        (tmp_path / "e" / "paper" / trial / "result.json").write_text(json.dumps({"trial": trial, **row}))
    summary = {r["trial"]: r for r in write_summary(tmp_path, "e", "paper")}
    assert summary["tolerant_s0"]["plateau"] is True and summary["kept_before_s0"]["plateau"] is False
    with (tmp_path / "e" / "paper" / "summary.csv").open() as f:
        flat = {r["trial"]: r for r in csv.DictReader(f)}
    assert (flat["tolerant_s0"]["plateau_step"], flat["tolerant_s0"]["plateau"]) == ("2500", "True")
    assert (flat["kept_before_s0"]["plateau_step"], flat["kept_before_s0"]["plateau"]) == ("19500", "False")


def test_a_run_with_a_tolerance_stops_where_its_gains_fell_below_it(tmp_path, scripted_validation, capsys):
    # gains of 1e-4 per validation from step 16: none passes 1e-3 by step 48, so 16 <= 0.8 s at 24
    scripted_validation[0] = lambda step: 1.0 if step < 16 else 0.5 - 1e-4 * step
    strict = train(_config(tmp_path / "strict", max_steps=48))
    tolerant = train(_config(tmp_path / "tolerant", max_steps=48, plateau_min_delta=1e-3))
    assert strict["test"]["step"] == 48 and tolerant["test"]["step"] == 24
    with pytest.raises(ValueError, match="plateau_min_delta must be finite and >= 0, got -0.1"):
        train(_config(tmp_path / "bad", plateau_min_delta=-0.1))
    # the tolerance only decides where a run stops: a run at its cap resumes under a larger cap and one,
    # and stops at once (gains from step 16 to 48 add up to 3.2e-3 < 1e-2)
    assert main(["train", "--config", str(tmp_path / "strict" / "config.json"), "--resume", "--max-steps",
                 "96", "--plateau-min-delta", "1e-2", "--no-progress", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["test"]["step"] == 48
    # a run stopped early (a time budget) and resumed where the tolerance ends it gets its test line there
    Trainer(_config(tmp_path / "stopped", max_steps=48)).run(stop=lambda step: step == 40)
    assert ("test", 40) not in _phases(tmp_path / "stopped")
    resumed = train(_config(tmp_path / "stopped", max_steps=48, plateau_min_delta=1e-3), resume=True)
    assert resumed["test"]["step"] == 40
    assert _phases(tmp_path / "stopped")[-2:] == [("valid", 40), ("test", 40)]
    kept = load_checkpoint(tmp_path / "stopped" / "last.safetensors").metadata
    assert kept["metrics"]["test"]["step"] == 40


def test_a_run_stops_at_the_first_validation_step_past_its_minimum_where_it_has_plateaued(
        tmp_path, scripted_validation):
    # improving until step 40, flat after: 40 <= 0.8 s first holds for s >= 50, so at validation step 56
    scripted_validation[0] = lambda step: 1.0 / min(step, 40)
    summary = train(_config(tmp_path / "run", max_steps=400))
    assert summary["test"]["step"] == 56 and summary["train"]["step"] == 56
    assert _phases(tmp_path / "run") == [("valid", s) for s in range(8, 57, 8)] + [("test", 56)]
    assert load_checkpoint(tmp_path / "run" / "last.safetensors").metadata["step"] == 56


def test_a_run_that_never_plateaus_stops_at_max_steps_with_a_last_validation(tmp_path, scripted_validation):
    summary = train(_config(tmp_path / "run", max_steps=60))  # always improving; 60 is no validation step
    assert summary["test"]["step"] == 60 and summary["valid"]["step"] == 60
    assert _phases(tmp_path / "run")[-3:] == [("valid", 56), ("valid", 60), ("test", 60)]


def test_a_run_that_plateaus_at_its_minimum_is_the_same_run_without_max_steps(tmp_path, scripted_validation):
    scripted_validation[0] = lambda step: 1.0 if step > 8 else 0.5  # best at 8 <= 0.8 * 24
    train(_config(tmp_path / "capped", max_steps=400))
    train(_config(tmp_path / "plain"))
    a = load_checkpoint(tmp_path / "capped" / "last.safetensors")
    b = load_checkpoint(tmp_path / "plain" / "last.safetensors")
    assert a.metadata["step"] == b.metadata["step"] == 24
    assert a.tensors.keys() == b.tensors.keys()
    assert all(torch.equal(a.tensors[k], b.tensors[k]) for k in a.tensors)
    assert _phases(tmp_path / "capped") == _phases(tmp_path / "plain")


def test_a_finished_run_resumed_with_max_steps_trains_on_as_one_run_would(
        tmp_path, scripted_validation, capsys):
    scripted_validation[0] = lambda step: 1.0 / min(step, 32)  # plateau from 40 on: stops at 40
    whole = train(_config(tmp_path / "whole", max_steps=400))
    train(_config(tmp_path / "extended"))
    assert _phases(tmp_path / "extended")[-1] == ("test", 24)
    assert main(["train", "--config", str(tmp_path / "extended" / "config.json"), "--resume",
                 "--max-steps", "400", "--no-progress", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["test"]["step"] == whole["test"]["step"] == 40
    assert _phases(tmp_path / "extended") == _phases(tmp_path / "whole")  # one test line, at the new end
    a = load_checkpoint(tmp_path / "whole" / "last.safetensors").tensors
    b = load_checkpoint(tmp_path / "extended" / "last.safetensors").tensors
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # resuming the finished run again trains nothing and keeps its test line
    assert train(_config(tmp_path / "extended", max_steps=400), resume=True)["test"]["step"] == 40
    assert _phases(tmp_path / "extended") == _phases(tmp_path / "whole")


def test_max_steps_below_the_minimum_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"max_steps \(10\) must be at least steps \(24\)"):
        train(_config(tmp_path / "a", max_steps=10))
    with pytest.raises(ValueError, match=r"max_steps \(5\) must be at least the 1 epochs' 10 steps"):
        train(_config(tmp_path / "b", steps=None, epochs=1, max_steps=5))
    with pytest.raises(ValueError, match="max_steps must be a positive integer"):
        train(_config(tmp_path / "c", max_steps=0))


def _trial(**config) -> Trial:
    return Trial("e", "paper", "rnn_s0", "rnn", {}, 0, {"model": "rnn", "steps": 100, **config})


def _row(status="done", steps=100, best_step=50, steps_=100, **config) -> dict:
    """A kept row that ran ``steps`` steps under a configuration whose ``steps`` field is ``steps_``."""
    return {"status": status, "steps": steps, "best_step": best_step,
            "config": {"model": "rnn", "steps": steps_, **config}}


@pytest.mark.parametrize(("row", "trial", "stands"), [
    (_row(), _trial(), True),  # same configuration, done
    (_row(status="failed"), _trial(), True),  # same configuration, failed (not retried)
    (_row(lr=0.1), _trial(), False),  # another configuration
    (_row(best_step=50), _trial(max_steps=300), True),  # plateaued at its minimum: the same run
    (_row(best_step=90), _trial(max_steps=300), False),  # not plateaued: trains on to the new cap
    (_row(steps=250, best_step=150, max_steps=300), _trial(max_steps=200), False),  # plateaued past the cap
    (_row(steps=200, best_step=190, max_steps=200), _trial(max_steps=400), False),  # capped, a larger cap
    (_row(status="failed"), _trial(max_steps=300), True),  # failed within its minimum: fails the same
    (_row(status="failed", max_steps=500), _trial(max_steps=300), False),  # may have failed past 300
    (_row(best_step=50, max_steps=300), _trial(), True),  # ran exactly the trial's fixed 100 steps
    (_row(steps=250, best_step=50, max_steps=300), _trial(), False),  # ran past the fixed budget
    # a minimum in epochs and a cap, lengthened to a fixed number of steps: the run that reached it
    # stands, the run its plateau rule stopped earlier trains on
    (_row(steps=15600, best_step=15210, steps_=None, epochs=20, max_steps=15600), _trial(steps=15600), True),
    (_row(steps=7800, best_step=3120, steps_=None, epochs=20, max_steps=15600), _trial(steps=15600), False),
    (_row(steps=15600, steps_=None, epochs=20, max_steps=15600, lr=0.1), _trial(steps=15600), False),
    (_row(), _trial(sequence_loss="mean"), True),  # kept before the field existed: it ran the default
    (_row(), _trial(sequence_loss="sum-over-steps"), False),  # ... which is not this one
    (_row(best_step=50), _trial(sequence_loss="mean", max_steps=300), True),
])
def test_a_kept_row_stands_for_a_trial_when_the_trial_would_end_the_same(row, trial, stands):
    assert kept_row_stands(row, trial) is stands
    if row["status"] == "failed":
        assert kept_row_stands(row, trial, retry_failed=True) is False


GRID = """
name = "grid"
source = "test"
description = "four short trials: two plateau at step 4 of 8, two improve to the end"
[base]
task = "addition"
lr = 0.1
batch_size = 8
record_every = 2
eval_every = 2
checkpoint_every = 4
hidden = 4
task_options = { length = 5, train_size = 32, valid_size = 16, test_size = 16 }
[[variants]]
label = "rnn"
model = "rnn"
[[variants]]
label = "spectral"
model = "spectral"
[scales.paper]
stated = "unused"
steps = 8
[scales.smoke]
seeds = 2
steps = 8
"""


@pytest.mark.slow
def test_a_sweep_given_max_steps_keeps_the_plateaued_trials_and_trains_the_others_on(tmp_path):
    pytest.importorskip("ray.tune")
    from spectral_analysis.experiments import load_experiment, run_sweep

    reported: list[str] = []

    def sweep(text: str):
        (tmp_path / "grid.toml").write_text(text)
        reported.clear()
        return run_sweep(load_experiment(tmp_path / "grid.toml"), "smoke", out=tmp_path / "runs",
                         results=tmp_path / "results", report=reported.append)

    first = {r["trial"]: r for r in sweep(GRID).rows}
    plateaued = {key for key, r in first.items() if r["best_step"] <= 0.8 * r["steps"]}
    assert plateaued and plateaued != set(first)  # both kinds, so both paths below are taken
    second = sweep(GRID.replace("seeds = 2\nsteps = 8", "seeds = 2\nsteps = 8\nmax_steps = 40"))
    assert set(second.skipped) == plateaued and set(second.ran) == set(first) - plateaued
    for row in second.rows:
        if row["trial"] in plateaued:
            assert row == {**first[row["trial"]], "plateau": True}
        else:
            assert row["config"]["max_steps"] == 40 and 8 < row["steps"] <= 40
            assert row["plateau"] or row["steps"] == 40
            lines = (tmp_path / "runs" / "grid" / "smoke" / row["trial"] / "metrics.jsonl").read_text()
            assert [json.loads(x)["step"] for x in lines.splitlines() if '"test"' in x] == [row["steps"]]
    # each trial that ran is reported as it ends, with how it stopped
    progress = {line.split("] ", 1)[1] for line in reported if line.startswith("[")}
    ran = [row for row in second.rows if row["trial"] not in plateaued]
    assert progress == {f"grid/{row['trial']}: {outcome_text(row)}" for row in ran}


def _kept_curve(directory, steps, values):
    directory.mkdir(parents=True)
    lines = ["phase,step,mse"] + [f"valid,{s},{v}" for s, v in zip(steps, values, strict=True)]
    (directory / "curves.csv").write_text("\n".join(lines) + "\n")
    return directory


def test_seeds_that_stopped_at_different_steps_are_read_on_the_union_of_their_steps_held_at_their_ends(
    tmp_path,
):
    from spectral_analysis.experiments.groups import Group

    long = _kept_curve(tmp_path / "s0", range(10, 101, 10), [float(s) for s in range(10, 101, 10)])
    short = _kept_curve(tmp_path / "s1", range(15, 61, 15), [2.0 * s for s in range(15, 61, 15)])
    group = Group("rnn", {}, [{}, {}], [long, short])
    steps, curve = group.curve("valid", "mse")
    assert list(steps) == [10, 15, 20, 30, 40, 45, 50, 60, 70, 80, 90, 100]
    at = dict(zip(steps.tolist(), zip(curve.mean, curve.low, curve.high, strict=True), strict=True))
    assert at[30] == (45.0, 30.0, 60.0)  # both recorded step 30
    assert at[20] == (30.0, 20.0, 40.0)  # the short seed interpolated between its steps 15 and 30
    assert at[10] == (10.0, 10.0, 10.0)  # before the short seed's first record: the long seed alone
    assert at[70] == (95.0, 70.0, 120.0)  # past the short seed's last record it holds it (120)
    assert at[100] == (110.0, 100.0, 120.0)  # so the mean moves only as the seeds' own values do
    # a seed whose last records are not finite diverged: its curve ends at its last finite record
    diverged = _kept_curve(tmp_path / "s2", [15, 30, 45], [30.0, float("nan"), float("nan")])
    steps, curve = Group("rnn", {}, [{}, {}], [long, diverged]).curve("valid", "mse")
    at = dict(zip(steps.tolist(), curve.mean, strict=True))
    assert at[15] == 22.5 and at[40] == 40.0 and at[100] == 100.0
    end = group.last("valid", "mse", records=2)  # each seed's own last two records
    assert (end.mean, end.low, end.high, end.seeds) == (100.0, 95.0, 105.0, 2)
