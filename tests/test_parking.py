"""Parking: a stopped sweep's unfinished trials resume from the results directory on another checkout."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
from experiment_fixtures import TINY, make_recipe_grids, tiny_catalog

from spectral_analysis.cli import main
from spectral_analysis.experiments import (
    find_experiment,
    load_catalog,
    load_experiment,
    park_sweeps,
    parking,
    read_rows,
    run_trial,
)
from spectral_analysis.experiments import trial as trial_module
from spectral_analysis.experiments.ledger import ledger_rows
from spectral_analysis.experiments.parking import checkpoint_step, parked_dir, restore_parked
from spectral_analysis.experiments.trial import TrialSpec
from spectral_analysis.io.zoo import zoo_entries
from spectral_analysis.train import Trainer

LONG = TINY.replace("steps = 8\ntask_options = { train_size = 32",
                    "steps = 40\ntask_options = { train_size = 32")


def _stopped_run(tmp_path, step: int = 12):
    """The tiny grid's first smoke trial trained to ``step`` in ``tmp_path/a/runs``, as a killed sweep
    leaves it."""
    experiment = load_experiment(tiny_catalog(tmp_path, LONG) / "tiny.toml")
    trial = experiment.trials("smoke", seeds=1)[0]
    run_dir = tmp_path / "a" / "runs" / "tiny" / "smoke" / trial.key
    trainer = Trainer(trial.train_config(run_dir), resume=False)
    trainer.run(stop=lambda s: s >= step)
    return experiment, trial, run_dir


def _spec(trial, run_dir, results) -> TrialSpec:
    return TrialSpec(trial.__dict__.copy(), str(run_dir), str(results), "cpu", "test")


def test_a_parked_run_resumes_on_a_fresh_checkout_and_ends_as_the_uninterrupted_run(tmp_path):
    experiment, trial, run_dir = _stopped_run(tmp_path)
    results = tmp_path / "a" / "results"
    assert park_sweeps([experiment], "paper", seeds=1, out=tmp_path / "a" / "runs", results=results) == []
    [line] = park_sweeps([(experiment, "smoke")], "paper", seeds=1, out=tmp_path / "a" / "runs",
                         results=results)  # its own scale, as `park tiny@smoke --scale paper` gives it
    assert line.startswith(f"tiny: parked {trial.key} at step 12 (")
    parked = parked_dir(results, "tiny", "smoke", trial.key)
    assert sorted(p.name for p in parked.iterdir()) == ["config.json", "last.safetensors", "metrics.jsonl.gz"]
    assert read_rows(results, "tiny", "smoke") == [] and zoo_entries(results) == []  # not a kept trial
    [_, entry] = ledger_rows(results, load_catalog(tmp_path / "catalog"))  # paper (not begun), smoke
    assert (entry["scale"], entry["done"], entry["parked"]) == ("smoke", 0, 1)

    # another machine: only the results directory travels (a commit), the run directory does not
    fresh = tmp_path / "b"
    shutil.copytree(results, fresh / "results")
    resumed = run_trial(_spec(trial, fresh / "runs" / trial.key, fresh / "results"))
    before = (run_dir / "metrics.jsonl").read_text().splitlines()
    after = (fresh / "runs" / trial.key / "metrics.jsonl").read_text().splitlines()
    # resumed, not retrained: the first 12 steps' lines are machine A's, their training times included
    assert after[:len(before)] == before and json.loads(before[-1])["step"] == 12
    assert not parked_dir(fresh / "results", "tiny", "smoke", trial.key).parent.exists()

    straight = run_trial(_spec(trial, tmp_path / "c" / "runs" / trial.key, tmp_path / "c" / "results"))
    assert resumed["status"] == straight["status"] == "done" and resumed["steps"] == 40
    assert resumed["test_metrics"]["mse"] == straight["test_metrics"]["mse"]
    assert resumed["seconds"] > 0


def test_a_run_too_big_to_park_is_named_and_leaves_nothing_behind(tmp_path, monkeypatch):
    experiment, trial, run_dir = _stopped_run(tmp_path)
    monkeypatch.setattr(parking, "PARK_LIMIT_BYTES", 1000)
    results = tmp_path / "results"
    [line] = park_sweeps([experiment], "smoke", seeds=1, out=tmp_path / "a" / "runs", results=results)
    assert line.startswith(f"tiny: not parked: {trial.key} would take") and "> 0.000954 MB" in line
    assert not any((results / "tiny" / "smoke" / "parked").iterdir())


def test_the_later_checkpoint_wins_between_the_run_directory_and_the_parked_run(tmp_path):
    _, trial, run_dir = _stopped_run(tmp_path, step=12)
    target = tmp_path / "parked" / trial.key
    assert parking.park_run(run_dir, target).startswith(f"parked {trial.key} at step 12")
    behind = tmp_path / "behind"
    trainer = Trainer(trial.train_config(behind), resume=False)
    trainer.run(stop=lambda s: s >= 4)
    assert restore_parked(target, trial.train_config(behind)) == 12
    assert checkpoint_step(behind / "last.safetensors") == 12
    assert restore_parked(target, trial.train_config(behind)) is None  # level: the run directory stays
    ahead = Trainer(trial.train_config(run_dir), resume=True)
    ahead.run(stop=lambda s: s >= 16)
    assert restore_parked(target, trial.train_config(run_dir)) is None
    assert checkpoint_step(run_dir / "last.safetensors") == 16
    assert parking.park_run(run_dir, target).startswith(f"parked {trial.key} at step 16")
    assert parking.park_run(behind, target) == f"not parked: {target} already holds a later step"
    assert checkpoint_step(target / "last.safetensors") == 16


def test_a_run_of_an_older_catalog_entry_is_not_parked(tmp_path):
    """A run whose configuration the catalog has since changed cannot be resumed by the trial (the runner
    starts it afresh): parking it would keep dead weight and count it as parked in the ledger."""
    experiment, trial, run_dir = _stopped_run(tmp_path)
    results = tmp_path / "results"
    changed = load_experiment(tiny_catalog(tmp_path, LONG.replace("lr = 1e-2", "lr = 2e-2")) / "tiny.toml")
    assert changed.trials("smoke", seeds=1)[0].config != trial.config
    [line] = park_sweeps([changed], "smoke", seeds=1, out=tmp_path / "a" / "runs", results=results)
    assert line == f"tiny: not parked: {trial.key} is a run of an older catalog entry (lr was 0.01 in this " \
                   "run, now 0.02; the next run starts the trial afresh)"
    assert not parked_dir(results, "tiny", "smoke", trial.key).exists()
    relative = os.path.relpath(tmp_path / "a" / "runs")  # as `park` is given it: the run recorded its out
    [line] = park_sweeps([experiment], "smoke", seeds=1, out=relative, results=results)  # absolute
    assert line.startswith(f"tiny: parked {trial.key} at step 12")


def test_a_parked_run_of_an_older_catalog_entry_gives_way_to_the_trial_started_afresh(tmp_path, monkeypatch):
    """The catalog changed after a run was parked at step 12: the trial starts over, and when it stops at
    an earlier step it is that run, not the stale one, that is parked for the next session."""
    experiment, trial, run_dir = _stopped_run(tmp_path)
    results = tmp_path / "results"
    [line] = park_sweeps([experiment], "smoke", seeds=1, out=tmp_path / "a" / "runs", results=results)
    assert line.startswith(f"tiny: parked {trial.key} at step 12")
    changed = load_experiment(tiny_catalog(tmp_path, LONG.replace("lr = 1e-2", "lr = 2e-2")) / "tiny.toml")
    new = changed.trials("smoke", seeds=1)[0]
    fresh = tmp_path / "b" / "runs" / "tiny" / "smoke" / new.key
    spec = _spec(new, fresh, results)
    spec.deadline = time.time() + 3600
    stops = iter([False] * 4 + [True] * 1000)  # stopped by the budget a few steps in, as a session ends
    run = Trainer.run
    monkeypatch.setattr(Trainer, "run", lambda self, stop=None, **_: run(self, stop=lambda _: next(stops)))
    row = run_trial(spec)
    assert row["status"] == "unfinished" and 0 < row["step"] < 12
    assert row["parked"].startswith(f"parked {new.key} at step {row['step']}")
    parked = parked_dir(results, "tiny", "smoke", new.key)
    assert json.loads((parked / "config.json").read_text())["train"]["lr"] == 2e-2


def test_a_stale_parked_run_does_not_overwrite_the_trials_own_run_behind_it(tmp_path, monkeypatch):
    """The run directory holds the current catalog entry's run at step 4, the results an older entry's
    run parked at step 12: the trial resumes its own run (not restored over, not started over) and parks
    it in the stale run's place."""
    experiment, trial, _ = _stopped_run(tmp_path)
    results = tmp_path / "results"
    park_sweeps([experiment], "smoke", seeds=1, out=tmp_path / "a" / "runs", results=results)
    changed = load_experiment(tiny_catalog(tmp_path, LONG.replace("lr = 1e-2", "lr = 2e-2")) / "tiny.toml")
    new = changed.trials("smoke", seeds=1)[0]
    run_dir = tmp_path / "b" / "runs" / new.key
    Trainer(new.train_config(run_dir), resume=False).run(stop=lambda s: s >= 4)
    before = (run_dir / "metrics.jsonl").read_text().splitlines()
    spec = _spec(new, run_dir, results)
    spec.deadline = time.time() + 3600
    stops = iter([False] * 2 + [True] * 1000)
    run = Trainer.run
    monkeypatch.setattr(Trainer, "run", lambda self, stop=None, **_: run(self, stop=lambda _: next(stops)))
    row = run_trial(spec)
    assert row["status"] == "unfinished" and 4 < row["step"] < 12  # a few steps beyond its own 4
    assert (run_dir / "metrics.jsonl").read_text().splitlines()[:len(before)] == before  # resumed
    assert row["parked"].startswith(f"parked {new.key} at step {row['step']}")
    parked = parked_dir(results, "tiny", "smoke", new.key)
    assert json.loads((parked / "config.json").read_text())["train"]["lr"] == 2e-2


def test_park_replaces_a_stale_parked_run_at_a_later_step(tmp_path):
    """`park` after a catalog change: the trial's own run (step 4) takes the place of the older entry's
    parked run (step 12), which no run can resume."""
    experiment, trial, _ = _stopped_run(tmp_path)
    results = tmp_path / "results"
    park_sweeps([experiment], "smoke", seeds=1, out=tmp_path / "a" / "runs", results=results)
    changed = load_experiment(tiny_catalog(tmp_path, LONG.replace("lr = 1e-2", "lr = 2e-2")) / "tiny.toml")
    new = changed.trials("smoke", seeds=1)[0]
    out = tmp_path / "b" / "runs"
    Trainer(new.train_config(out / "tiny" / "smoke" / new.key), resume=False).run(stop=lambda s: s >= 4)
    [line] = park_sweeps([changed], "smoke", seeds=1, out=out, results=results)
    assert line.startswith(f"tiny: parked {new.key} at step 4")
    parked = parked_dir(results, "tiny", "smoke", new.key)
    assert json.loads((parked / "config.json").read_text())["train"]["lr"] == 2e-2


def test_kept_trials_are_not_parked(tmp_path):
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    trial = experiment.trials("smoke", seeds=1)[0]
    out, results = tmp_path / "runs", tmp_path / "results"
    assert run_trial(_spec(trial, out / "tiny" / "smoke" / trial.key, results))["status"] == "done"
    assert park_sweeps([experiment], "smoke", seeds=1, out=out, results=results) == []


def test_a_trial_stopped_by_the_time_budget_parks_itself(tmp_path, monkeypatch):
    _, trial, _ = _stopped_run(tmp_path)
    clock = iter([0.0] + [10.0] * 1000)  # the deadline check before training passes, the first stop check not
    monkeypatch.setattr(trial_module, "time", type("Clock", (), {"time": staticmethod(lambda: next(clock)),
                                                          "perf_counter": staticmethod(time.perf_counter)}))
    results = tmp_path / "results"
    spec = _spec(trial, tmp_path / "runs" / trial.key, results)
    spec.deadline = 5.0
    row = run_trial(spec)
    assert row["status"] == "unfinished" and row["parked"].startswith(f"parked {trial.key} at step")
    parked = parked_dir(results, "tiny", "smoke", trial.key)
    assert checkpoint_step(parked / "last.safetensors") == row["step"]


def test_the_park_command_parks_a_killed_sweep_and_says_when_there_is_nothing(tmp_path, capsys):
    _, trial, _ = _stopped_run(tmp_path)
    where = ["--catalog", str(tmp_path / "catalog"), "--results", str(tmp_path / "results"), "--seeds", "1"]
    assert main(["park", "tiny", "--out", str(tmp_path / "empty"), *where]) == 0
    assert capsys.readouterr().out.strip() == f"no unfinished run directory under {tmp_path / 'empty'}"
    assert main(["park", "tiny", "--out", str(tmp_path / "a" / "runs"), *where, "--json"]) == 0
    [line] = json.loads(capsys.readouterr().out)["parked"]
    assert line.startswith(f"tiny: parked {trial.key} at step 12")
    ledger = (tmp_path / "results" / "LEDGER.md").read_text()
    done, _, _, _, parked = ledger.split("| tiny | smoke |")[1].split("|")[:5]
    assert done.strip() == "0 / 4" and parked.strip() == "1"


def test_make_park_parks_every_grid_make_paper_runs():
    parked = {pair for pairs, _ in make_recipe_grids("park", "park") for pair in pairs}
    ran = {pair for pairs, _ in make_recipe_grids("paper", "run") for pair in pairs}
    assert ran and ran <= parked


def test_an_unreadable_parked_run_fails_its_trial_with_the_file_named_and_stays_for_a_look(tmp_path):
    experiment, trial, run_dir = _stopped_run(tmp_path)
    results = tmp_path / "results"
    park_sweeps([experiment], "smoke", seeds=1, out=tmp_path / "a" / "runs", results=results)
    parked = parked_dir(results, "tiny", "smoke", trial.key)
    (parked / "config.json").write_text("<<<<<<< HEAD\n")  # a merge conflict
    row = run_trial(_spec(trial, tmp_path / "b" / trial.key, results))
    assert row["status"] == "failed"
    assert row["error"].startswith(f"ValueError: parked run {parked} is unreadable (config.json: ")
    assert (parked / "last.safetensors").is_file()
    [_, entry] = ledger_rows(results, load_catalog(tmp_path / "catalog"))  # kept for --retry-failed,
    assert (entry["failed"], entry["parked"]) == (1, 0)  # but the trial is failed, not unfinished


@pytest.mark.slow
def test_gpu_unpack_lays_the_machines_grids_over_these_and_drops_the_runs_it_kept(tmp_path):
    """scripts/gpu_unpack.sh: the tarball's paper-scale grids over this checkout's, files of this
    checkout's own left as they are, and a parked run the machine no longer holds (it kept the trial)
    removed; a grid the tarball does not hold is not touched."""
    import subprocess
    import sys
    import tarfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "scripts").mkdir()
    shutil.copy(root / "scripts" / "gpu_unpack.sh", tmp_path / "scripts")
    here = tmp_path / "results" / "fig3-mnist" / "paper"
    for trial in ("lstm_s0", "lstm_s1"):
        (here / "parked" / trial).mkdir(parents=True)
        (here / "parked" / trial / "config.json").write_text("old")
    (here / "estimate_cpu.json").write_text('{"configurations": {}}')
    other = tmp_path / "results" / "kru-copy" / "paper" / "parked" / "lstm_length2000_s0"
    other.mkdir(parents=True)
    machine = tmp_path / "machine"
    kept = machine / "results" / "fig3-mnist" / "paper" / "lstm_s0"
    kept.mkdir(parents=True)
    (kept / "result.json").write_text(json.dumps({
        "trial": "lstm_s0", "status": "done", "device": "cuda", "machine": "NVIDIA H200 (CUDA)",
        "seconds": 375.0, "finished_at": "2026-11-26 08:06:28 UTC", "config": {}}))
    (machine / "results" / "fig3-mnist" / "paper" / "summary.json").write_text("[]")  # run writes it
    (machine / "results" / "fig3-mnist" / "paper" / "parked" / "lstm_s1").mkdir(parents=True)
    (machine / "results" / "fig3-mnist" / "paper" / "parked" / "lstm_s1" / "config.json").write_text("new")
    with tarfile.open(tmp_path / "results.tgz", "w:gz") as tar:
        tar.add(machine / "results", arcname="results")
    subprocess.run(["bash", str(tmp_path / "scripts" / "gpu_unpack.sh"), str(tmp_path / "results.tgz")],
                   check=True, capture_output=True, env={**os.environ, "PYTHON": sys.executable})
    assert not (here / "parked" / "lstm_s0").exists() and (here / "lstm_s0" / "result.json").exists()
    assert (here / "parked" / "lstm_s1" / "config.json").read_text() == "new"
    assert (here / "estimate_cpu.json").exists() and other.exists()
    planned = len(find_experiment("fig3-mnist").trials("paper"))
    assert f"| fig3-mnist | paper | 1 / {planned} |" in (tmp_path / "results" / "LEDGER.md").read_text()
    estimates = tmp_path / "estimates.tgz"  # a call that only timed the grid: its parked runs stay
    (machine / "results" / "fig3-mnist" / "paper" / "estimate_cuda.json").write_text('{"configurations": {}}')
    with tarfile.open(estimates, "w:gz") as tar:
        tar.add(machine / "results" / "fig3-mnist" / "paper" / "estimate_cuda.json",
                arcname="results/fig3-mnist/paper/estimate_cuda.json")
    subprocess.run(["bash", str(tmp_path / "scripts" / "gpu_unpack.sh"), str(estimates)],
                   check=True, capture_output=True, env={**os.environ, "PYTHON": sys.executable})
    assert (here / "parked" / "lstm_s1").exists() and (here / "estimate_cuda.json").exists()
    empty = tmp_path / "empty.tgz"
    with tarfile.open(empty, "w:gz") as tar:
        tar.add(tmp_path / "scripts", arcname="scripts")
    refused = subprocess.run(["bash", str(tmp_path / "scripts" / "gpu_unpack.sh"), str(empty)],
                             capture_output=True, text=True)
    assert refused.returncode == 1 and "holds no results/<experiment>/paper/ directory" in refused.stderr


@pytest.mark.slow
def test_gpu_run_runs_each_grid_side_by_side_with_its_own_selection(tmp_path):
    """scripts/gpu_run.sh: one paper-scale `run` per named grid, all started before any ends, each with
    the `--only` pairs of its GRID:KEY=VALUE spec (none for a bare name), its own workers after `@` (the
    call's otherwise) and the options after `--`; both grids come back in results.tgz and each log beside
    it; a malformed `@` is refused before anything runs."""
    import subprocess
    import tarfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "scripts").mkdir()
    for script in ("gpu_run.sh", "gpu_setup.sh"):
        shutil.copy(root / "scripts" / script, tmp_path / "scripts")
    site = tmp_path / "site"
    (site / "mnist" / "data").mkdir(parents=True)
    (site / "mnist" / "data" / "mnist.pkl.gz").write_bytes(b"")  # installed: the setup skips its install
    stubs, out = tmp_path / "bin", tmp_path / "out"
    stubs.mkdir()
    out.mkdir()
    (stubs / "nvidia-smi").write_text("#!/bin/sh\necho stub GPU\n")
    # the stub `run` records its arguments, waits for the other grid's to start, then writes its grid
    (stubs / "python3").write_text(
        "#!/bin/bash\nname=$4\nprintf '%s\\n' \"$@\" > \"$OUT/$name.args\"\n"
        "for _ in $(seq 50); do [ $(ls \"$OUT\"/*.args | wc -l) -ge 2 ] && break; sleep 0.1; done\n"
        "ls \"$OUT\"/*.args | wc -l > \"$OUT/$name.seen\"\n"
        "mkdir -p results/$name/paper && echo '[]' > results/$name/paper/summary.json\necho ran $name\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "OUT": str(out), "GPU_SITE": str(site)}
    done = subprocess.run(
        ["bash", "scripts/gpu_run.sh", "2", "6", "0.08", "table2-mnist:variant=rnn,ornn",
         "fig3-mnist@3:variant=spectral:task=mnist", "kru-copy", "--", "--retry-failed"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    args = {name: (out / f"{name}.args").read_text().split("\n")[:-1]
            for name in ("table2-mnist", "fig3-mnist", "kru-copy")}
    common = ["--scale", "paper", "--backend", "processes", "--workers", "6", "--gpus-per-trial", "0.08",
              "--time-budget", "2", "--out", "/tmp/runs"]
    assert args["table2-mnist"] == ["-m", "spectral_analysis.cli", "run", "table2-mnist", *common,
                                    "--only", "variant=rnn,ornn", "--retry-failed"]
    assert args["fig3-mnist"][-4:] == ["--only", "variant=spectral", "task=mnist", "--retry-failed"]
    assert args["fig3-mnist"][args["fig3-mnist"].index("--workers") + 1] == "3"
    assert "--only" not in args["kru-copy"] and args["kru-copy"][-1] == "--retry-failed"
    assert all(int((out / f"{name}.seen").read_text()) >= 2 for name in args)  # side by side
    assert (out / "fig3-mnist.log").read_text() == "ran fig3-mnist\n"
    with tarfile.open(out / "results.tgz") as tar:
        assert {"results/table2-mnist/paper/summary.json", "results/kru-copy/paper/summary.json"} <= set(
            tar.getnames())
    refused = subprocess.run(["bash", "scripts/gpu_run.sh", "2", "6", "0.08", "--", "--retry-failed"],
                             cwd=tmp_path, env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "name at least one grid" in refused.stderr
    for bad in ("kru-copy@", "kru-copy@0:variant=kru", "kru-copy@two"):
        refused = subprocess.run(["bash", "scripts/gpu_run.sh", "2", "6", "0.08", "table2-mnist", bad],
                                 cwd=tmp_path, env=env, capture_output=True, text=True)
        assert refused.returncode == 2 and "the workers after @ must be a positive whole number" in (
            refused.stderr), bad
        assert "stub GPU" not in refused.stdout  # refused before the setup


def test_gpu_slim_leaves_the_other_grids_out_of_the_call_and_restore_tracks_them_again(tmp_path):
    """scripts/gpu_slim.sh: only the named grids' results stay tracked (the others stay on disk, ignored,
    so neither they nor an untracked copy travel); a second call slims anew; --restore, which
    gpu_unpack.sh runs first, tracks again only the grids it left out (a change staged meanwhile stays
    staged); staged changes under results/ are refused."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "scripts").mkdir()
    for script in ("gpu_slim.sh", "gpu_unpack.sh"):
        shutil.copy(root / "scripts" / script, tmp_path / "scripts")
    for grid in ("fig3-mnist", "fig5-depth", "kru-copy"):
        (tmp_path / "results" / grid / "paper").mkdir(parents=True)
        (tmp_path / "results" / grid / "paper" / "summary.json").write_text("[]")
    (tmp_path / "results" / "LEDGER.md").write_text("ledger")

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    def slim(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "scripts/gpu_slim.sh", *args], cwd=tmp_path, capture_output=True,
                              text=True)

    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "results")
    first = slim("fig3-mnist")
    assert first.returncode == 0, first.stderr
    assert "the tree that travels (tracked and untracked, not ignored): 0.0 MiB" in first.stdout
    assert git("ls-files", "results").split() == ["results/LEDGER.md",
                                                  "results/fig3-mnist/paper/summary.json"]
    assert (tmp_path / "results" / "kru-copy" / "paper" / "summary.json").exists()
    assert git("status", "--porcelain", "--untracked-files=all").split("\n")[:-1] == [
        "D  results/fig5-depth/paper/summary.json", "D  results/kru-copy/paper/summary.json"]
    again = slim("fig3-mnist", "kru-copy")  # a second call slims anew
    assert again.returncode == 0 and len(git("ls-files", "results").split()) == 3
    restored = slim("--restore")
    assert restored.returncode == 0 and "tracked again" in restored.stdout
    assert git("status", "--porcelain", "--untracked-files=all") == ""
    assert "gpu_slim" not in (tmp_path / ".git" / "info" / "exclude").read_text()
    assert slim("kru-copy", "fig5-depth").returncode == 0
    assert len(git("ls-files", "results").split()) == 3
    unpack = subprocess.run(["bash", "scripts/gpu_unpack.sh", "missing.tgz"], cwd=tmp_path,
                            capture_output=True, text=True)  # fails on its tarball, after restoring
    assert unpack.returncode != 0 and git("status", "--porcelain", "--untracked-files=all") == ""
    (tmp_path / "results" / "LEDGER.md").write_text("a new ledger")
    git("add", "results/LEDGER.md")
    staged = slim("fig3-mnist")
    assert staged.returncode == 1 and "staged changes" in staged.stderr
    assert len(git("ls-files", "results").split()) == 4
    git("reset", "-q")
    assert slim("fig5-depth").returncode == 0
    git("add", "results/LEDGER.md")  # staged while slim: the restore gives back only the grids it left out
    assert slim("--restore").returncode == 0
    assert git("status", "--porcelain", "--untracked-files=all") == "M  results/LEDGER.md\n"
    unknown = slim("table9")
    assert unknown.returncode == 2 and "no results/table9/" in unknown.stderr
