"""The runner's processes backend: the same trials and kept results as the Ray grid, without Ray."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from experiment_fixtures import TINY, tiny_catalog

from spectral_analysis.allocator import ALLOCATOR_ENVIRONMENT
from spectral_analysis.experiments import load_experiment, read_rows, run_sweeps, run_trial
from spectral_analysis.experiments.process_grid import run_processes
from spectral_analysis.experiments.trial import TrialSpec
from spectral_analysis.train import load_checkpoint

# the tiny grid (rnn and spectral at two lengths) with trials long enough to be interrupted
LONG = TINY.replace("steps = 8\ntask_options = { train_size = 32",
                    "steps = 50000\ntask_options = { train_size = 32")


def _die_on_rnn(spec: dict) -> dict:
    """A trial whose worker process dies (as one killed for memory does), for the rnn trials."""
    if spec["trial"]["key"].startswith("rnn"):
        os._exit(3)
    return run_trial(spec)


def _allocator_policy(spec: dict) -> dict:
    """A trial that reports the worker's memory policy as its status."""
    return {"status": ",".join(os.environ.get(name, "unset") for name in sorted(ALLOCATOR_ENVIRONMENT))}


@pytest.mark.slow
def test_workers_start_with_the_memory_policy_and_the_parent_environment_is_left_as_it_was(tmp_path,
                                                                                         monkeypatch):
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    specs = [TrialSpec(t.__dict__.copy(), str(tmp_path / "runs" / t.key), str(tmp_path / "results"), "cpu",
                       "test").__dict__ for t in experiment.trials("smoke")[:3]]
    name, *others = sorted(ALLOCATOR_ENVIRONMENT)
    monkeypatch.setenv(name, "7")  # a value of the user's own, to be restored
    for other in others:
        monkeypatch.delenv(other, raising=False)
    statuses = run_processes(specs, _allocator_policy, 2, lambda _line: None, lambda _experiment: None)
    policy = ",".join(ALLOCATOR_ENVIRONMENT[n] for n in sorted(ALLOCATOR_ENVIRONMENT))
    assert set(statuses.values()) == {policy} and len(statuses) == 3
    assert os.environ[name] == "7" and not any(other in os.environ for other in others)


@pytest.mark.slow
def test_the_processes_backend_keeps_what_an_in_process_trial_keeps_and_a_rerun_skips(tmp_path):
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    lines: list[str] = []
    [outcome] = run_sweeps([experiment], "smoke", workers=2, backend="processes", out=tmp_path / "runs",
                           results=tmp_path / "results", report=lines.append)
    trials = experiment.trials("smoke")
    assert sorted(outcome.ran) == sorted(t.key for t in trials)
    assert not outcome.failed and not outcome.unfinished
    assert {r["status"] for r in read_rows(tmp_path / "results", "tiny", "smoke")} == {"done"}
    assert sum(line.startswith("[") and ": done: " in line for line in lines) == len(trials)
    trial = trials[-1]
    direct = tmp_path / "direct"
    run_trial(TrialSpec(trial.__dict__.copy(), str(direct / "runs" / trial.key), str(direct / "results"),
                        "cpu", "test"))
    kept = [load_checkpoint(r / "tiny" / "smoke" / trial.key / "model.safetensors").model.state_dict()
            for r in (tmp_path / "results", direct / "results")]
    assert all(torch.equal(kept[0][name], kept[1][name]) for name in kept[1])
    [again] = run_sweeps([experiment], "smoke", workers=2, backend="processes", out=tmp_path / "runs",
                         results=tmp_path / "results", report=lines.append)
    assert not again.ran and sorted(again.skipped) == sorted(t.key for t in trials)


@pytest.mark.slow
def test_each_trial_trains_on_the_threads_per_trial_it_is_given_and_its_row_says_how_many(tmp_path):
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    trial = experiment.trials("smoke")[0]
    before = torch.get_num_threads()
    try:  # in this process: run_trial sets torch's threads to the spec's
        torch.set_num_threads(1)
        row = run_trial(TrialSpec(trial.__dict__.copy(), str(tmp_path / "direct" / trial.key),
                                  str(tmp_path / "direct-results"), "cpu", "test", threads=2))
        assert torch.get_num_threads() == 2 and row["threads"] == 2
    finally:
        torch.set_num_threads(before)
    [outcome] = run_sweeps([experiment], "smoke", only={"seed": "0"}, workers=1, threads_per_trial=3,
                           backend="processes", out=tmp_path / "runs", results=tmp_path / "results")
    rows = read_rows(tmp_path / "results", "tiny", "smoke")
    assert outcome.ran and {r["threads"] for r in rows} == {3}
    with pytest.raises(ValueError, match="threads_per_trial must be a positive integer, got 0"):
        run_sweeps([experiment], "smoke", threads_per_trial=0, out=tmp_path)


@pytest.mark.slow
def test_a_dead_worker_ends_the_pool_and_leaves_the_rest_unfinished(tmp_path):
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    specs = [TrialSpec(t.__dict__.copy(), str(tmp_path / "runs" / t.key), str(tmp_path / "results"), "cpu",
                       "test").__dict__ for t in experiment.trials("smoke")]
    assert specs[0]["trial"]["key"].startswith("rnn")
    lines: list[str] = []
    statuses = run_processes(specs, _die_on_rnn, 1, lines.append, lambda _experiment: None)
    assert statuses == {}
    assert any("a worker process died" in line and f"{len(specs)} trial(s) unfinished" in line
               for line in lines)


def test_the_processes_backend_refuses_a_cluster_and_an_unknown_backend_is_named(tmp_path):
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    with pytest.raises(ValueError, match="cluster address needs the ray backend"):
        run_sweeps([experiment], "smoke", backend="processes", address="127.0.0.1:6379", out=tmp_path)
    with pytest.raises(ValueError, match="backend must be one of ray, processes, got 'dask'"):
        run_sweeps([experiment], "smoke", backend="dask", out=tmp_path)


@pytest.mark.slow
def test_ctrl_c_stops_the_running_trial_and_never_starts_the_queued_one(tmp_path):
    catalog = tiny_catalog(tmp_path, LONG)
    runs = tmp_path / "runs" / "tiny" / "smoke"
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "spectral-analysis"), "run", "tiny", "--catalog", str(catalog),
         "--backend", "processes", "--workers", "1", "--out", str(tmp_path / "runs"),
         "--results", str(tmp_path / "results")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 240
    while not (runs / "rnn_length5_s0" / "last.safetensors").is_file():
        assert process.poll() is None and time.time() < deadline, process.communicate()[0]
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl+C sends to the terminal's foreground group
    process.communicate(timeout=60)
    assert process.returncode != 0
    assert sorted(p.name for p in runs.iterdir()) == ["rnn_length5_s0"]  # the queued trials never began
    assert not (tmp_path / "results" / "tiny").exists()


@pytest.mark.slow
def test_stop_parks_the_running_trial_starts_no_other_and_an_older_request_is_ignored(tmp_path, capsys):
    from spectral_analysis.cli import main
    from spectral_analysis.experiments.parking import checkpoint_step, parked_dir

    catalog, out = tiny_catalog(tmp_path, LONG), tmp_path / "runs"
    assert main(["stop", "--out", str(out), "--json"]) == 0  # a request left from an earlier sweep
    assert json.loads(capsys.readouterr().out)["request"] == str(out / ".stop")
    time.sleep(0.05)
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "spectral-analysis"), "run", "tiny", "--catalog", str(catalog),
         "--backend", "processes", "--workers", "1", "--out", str(out),
         "--results", str(tmp_path / "results")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    runs, deadline = out / "tiny" / "smoke", time.time() + 240
    while not (runs / "rnn_length5_s0" / "last.safetensors").is_file():  # it trains: the old request is past
        assert process.poll() is None and time.time() < deadline, process.communicate()[0]
        time.sleep(0.1)
    assert main(["stop", "--out", str(out)]) == 0
    assert "each running trial checkpoints at its next step and parks itself" in capsys.readouterr().out
    text = process.communicate(timeout=120)[0]
    assert process.returncode == 0, text
    assert "ran 4, skipped 0 already kept, 4 unfinished, 0 failed" in text
    assert sorted(p.name for p in runs.iterdir()) == ["rnn_length5_s0"]  # the queued trials never began
    parked = parked_dir(tmp_path / "results", "tiny", "smoke", "rnn_length5_s0")
    step = checkpoint_step(parked / "last.safetensors")
    assert step is not None and 4 <= step < 50000


@pytest.mark.slow
def test_the_run_command_names_trials_a_time_budget_stopped_and_how_to_resume_them(tmp_path, capsys):
    from spectral_analysis.cli import main

    catalog = tiny_catalog(tmp_path, LONG)
    assert main(["run", "tiny", "--catalog", str(catalog), "--backend", "processes", "--workers", "1",
                 "--seeds", "1", "--only", "variant=rnn", "length=5", "--time-budget", "0.001",
                 "--out", str(tmp_path / "runs"), "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert ("unfinished (stopped by the time budget, `stop` or an interrupt): rnn_length5_s0; rerun the same "
            "command") in out and "`spectral-analysis park`" in out


@pytest.mark.slow
def test_a_seed_kept_without_the_network_its_scale_now_keeps_trains_again_only_when_asked(tmp_path):
    """A scale that said ``keep_models = "every seed"`` after its seed 1 was kept has no network of that
    seed (the certificates read each seed's): a rerun skips it unless asked to retrain it, and the
    retrained seed keeps the very network the first run ended with (the trainer is deterministic)."""
    import shutil

    from spectral_analysis.experiments.results import OTHER_SEED_NOTE

    only = {"variant": "rnn", "length": "5"}
    options = dict(workers=1, backend="processes", out=tmp_path / "runs", results=tmp_path / "results",
                   seeds=2, only=only)
    catalog = tiny_catalog(tmp_path)
    run_sweeps([load_experiment(catalog / "tiny.toml")], "paper", **options)
    kept = tmp_path / "results" / "tiny" / "paper" / "rnn_length5_s1"
    row = json.loads((kept / "result.json").read_text())
    assert row["checkpoint"] is None and row["checkpoint_note"].startswith(OTHER_SEED_NOTE)
    run_dir = tmp_path / "runs" / "tiny" / "paper" / "rnn_length5_s1"
    first_model = load_checkpoint(run_dir / "last.safetensors")
    shutil.rmtree(run_dir)  # its run directory is gone
    every_seed = TINY.replace('stated = "quoted"', 'stated = "quoted"\nkeep_models = "every seed"')
    experiment = load_experiment(tiny_catalog(tmp_path, every_seed) / "tiny.toml")
    [skipped] = run_sweeps([experiment], "paper", **options)
    assert not skipped.ran and sorted(skipped.skipped) == ["rnn_length5_s0", "rnn_length5_s1"]
    [again] = run_sweeps([experiment], "paper", retrain_unkept_models=True, **options)
    assert again.ran == ["rnn_length5_s1"] and again.skipped == ["rnn_length5_s0"]
    row = json.loads((kept / "result.json").read_text())
    assert row["checkpoint"] == "model.safetensors" and "checkpoint_note" not in row
    retrained = load_checkpoint(kept / "model.safetensors").model.state_dict()
    assert all(torch.equal(value, retrained[name]) for name, value in first_model.model.state_dict().items())
    [done] = run_sweeps([experiment], "paper", retrain_unkept_models=True, **options)
    assert not done.ran
