"""One writer per results tree and per run, and the driver owns its workers: a second sweep into the
same folders is refused with the holder's pid (a dead holder's lock is no obstacle), a trial whose sweep
died stops and writes nothing more, a trial never deletes another writer's run, ``run`` fails when a
trial failed, and a resume refuses an edited config.json or a checkpoint that is not a file, leaving
the run directory byte for byte as it was."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from experiment_fixtures import TINY, tiny_catalog

from spectral_analysis.atomic import exclusive_lock
from spectral_analysis.cli import main
from spectral_analysis.experiments import load_experiment, read_rows, run_sweep
from spectral_analysis.experiments.runner import SWEEP_LOCK
from spectral_analysis.experiments.trial import TrialSpec, run_trial
from spectral_analysis.train import TrainConfig, Trainer, train
from spectral_analysis.train.run_state import lock_run_directory


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_second_sweep_into_the_same_results_is_refused(tmp_path):
    experiment = load_experiment(tiny_catalog(tmp_path) / "tiny.toml")
    results, out = tmp_path / "results", tmp_path / "runs"
    held = exclusive_lock(results / SWEEP_LOCK, "held by the test (pid {pid})")
    try:
        with pytest.raises(ValueError, match=rf"{results} is in use: another sweep \(pid \d+\) writes"):
            run_sweep(experiment, "smoke", seeds=1, only={"variant": "rnn"}, out=out, results=results,
                      backend="processes")
        assert not out.exists() or not any(out.glob("tiny"))  # nothing trained
    finally:
        held.close()
    (results / SWEEP_LOCK).write_text(str(_dead_pid()))  # a lock file its dead holder left: no obstacle
    (outcome,) = [run_sweep(experiment, "smoke", seeds=1, only={"variant": "rnn", "length": "5"}, out=out,
                            results=results, backend="processes")]
    assert outcome.ran and not outcome.failed


def _tiny_spec(tmp_path: Path, **fields) -> TrialSpec:
    trial = load_experiment(tiny_catalog(tmp_path) / "tiny.toml").trials("smoke", seeds=1)[0]
    run_dir = tmp_path / "runs" / trial.key
    return TrialSpec(trial.__dict__.copy(), str(run_dir), str(tmp_path / "results"), "cpu", "test", **fields)


def test_a_trial_whose_sweep_died_stops_and_writes_nothing_more(tmp_path):
    spec = _tiny_spec(tmp_path, driver_pid=_dead_pid())
    row = run_trial(spec)
    assert row["status"] == "unfinished" and "parked" not in row
    assert not (tmp_path / "results").exists()  # no kept row, nothing parked


def test_a_trial_never_deletes_another_writers_run(tmp_path):
    spec = _tiny_spec(tmp_path)
    run_dir = Path(spec.run_dir)
    held = lock_run_directory(run_dir)  # another process training into it, before its first checkpoint
    try:
        row = run_trial(spec)
        assert row["status"] == "failed" and "is locked" in row["error"]
        assert (run_dir / ".lock").is_file()
    finally:
        held.close()


def test_run_fails_when_a_trial_failed(tmp_path, capsys):
    catalog = tiny_catalog(tmp_path, TINY.replace("lr = 1e-2", "lr = 1e30"))
    args = ["run", "tiny", "--catalog", str(catalog), "--scale", "smoke", "--seeds", "1", "--only",
            "variant=rnn", "length=5", "--backend", "processes", "--out", str(tmp_path / "runs"),
            "--results", str(tmp_path / "results"), "--json"]
    assert main(args) == 1
    (sweep,) = json.loads(capsys.readouterr().out)["sweeps"]
    assert list(sweep["failed"]) == ["rnn_length5_s0"]
    assert read_rows(tmp_path / "results", "tiny", "smoke")[0]["status"] == "failed"  # kept all the same


def _trained(tmp_path: Path) -> TrainConfig:
    config = TrainConfig(task="addition", model="rnn", hidden=4, steps=4, batch_size=8, eval_every=2,
                         checkpoint_every=2, out=str(tmp_path / "run"), progress=False,
                         task_options={"length": 3, "train_size": 16, "valid_size": 8, "test_size": 8})
    train(config)
    return config


def test_a_resume_refuses_an_edited_config_and_leaves_the_run_as_it_was(tmp_path):
    config = _trained(tmp_path)
    run_dir = Path(config.out)
    stored = json.loads((run_dir / "config.json").read_text())
    stored["train"]["task_options"]["train_size"] = 20000  # edited by hand: the command agrees with it
    (run_dir / "config.json").write_text(json.dumps(stored))
    before = _snapshot(run_dir)
    edited = TrainConfig(**{**stored["train"], "steps": 8})
    with pytest.raises(ValueError, match=r"task_options was .*'train_size': 16.* when the checkpoint was "
                                         r"written, now .*20000.*config.json disagrees"):
        Trainer(edited, resume=True)
    assert _snapshot(run_dir) == before


def test_a_resume_from_a_checkpoint_that_is_not_a_file_leaves_the_run_as_it_was(tmp_path):
    config = _trained(tmp_path)
    run_dir = Path(config.out)
    (run_dir / "last.safetensors").unlink()
    (run_dir / "last.safetensors").mkdir()
    before = _snapshot(run_dir)
    with pytest.raises(ValueError, match="last.safetensors is not a regular file"):
        Trainer(TrainConfig(**{**json.loads((run_dir / "config.json").read_text())["train"]}), resume=True)
    assert _snapshot(run_dir) == before


LONG_GRID = TINY.replace("steps = 8\ntask_options = { train_size = 32",  # a smoke trial of seconds
                         "steps = 800\ntask_options = { train_size = 32")


def _run_command(tmp_path: Path, out: str, results: str) -> list[str]:
    catalog = tiny_catalog(tmp_path, LONG_GRID)
    return [str(Path(sys.executable).parent / "spectral-analysis"), "--threads", "1", "--quiet", "run",
            "tiny", "--catalog", str(catalog), "--scale", "smoke", "--seeds", "1", "--only", "variant=rnn",
            "length=5", "--backend", "processes", "--out", str(tmp_path / out), "--results",
            str(tmp_path / results), "--json"]


def _kept_weights(results: Path) -> dict[str, str]:
    """Each kept model's tensors, hashed (the file's metadata records wall times, which differ)."""
    from safetensors.torch import load_file

    def digest(path: Path) -> str:
        tensors = load_file(path)
        return hashlib.sha256(b"".join(tensors[k].numpy().tobytes() for k in sorted(tensors))).hexdigest()

    return {str(p.relative_to(results)): digest(p) for p in sorted(results.rglob("model.safetensors"))}


def _wait_for(condition, seconds: float = 120) -> None:
    import time

    deadline = time.time() + seconds
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.slow
def test_two_concurrent_sweeps_end_with_one_writer_and_the_zoo_of_one_sweep(tmp_path):
    first = subprocess.Popen(_run_command(tmp_path, "runs", "results"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: (tmp_path / "results" / SWEEP_LOCK).is_file()
              and (tmp_path / "results" / SWEEP_LOCK).read_text().strip() == str(first.pid))
    second = subprocess.run(_run_command(tmp_path, "runs", "results"), capture_output=True, text=True,
                            timeout=300)
    assert second.returncode == 1 and f"another sweep (pid {first.pid})" in second.stderr, second.stderr
    assert first.wait(timeout=600) == 0, first.stderr[-2000:]
    alone = subprocess.run(_run_command(tmp_path, "alone-runs", "alone-results"), capture_output=True,
                           text=True, timeout=600)
    assert alone.returncode == 0, alone.stderr[-2000:]
    together, single = _kept_weights(tmp_path / "results"), _kept_weights(tmp_path / "alone-results")
    assert together and together == single  # the same zoo, bit for bit


@pytest.mark.slow
def test_a_killed_sweeps_worker_stops_and_the_rerun_ends_as_an_uninterrupted_run(tmp_path):
    import signal

    driver = subprocess.Popen(_run_command(tmp_path, "runs", "results"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    run_dir = tmp_path / "runs" / "tiny" / "smoke" / "rnn_length5_s0"
    _wait_for(lambda: (run_dir / "last.safetensors").is_file())
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    lock = run_dir / ".lock"
    _wait_for(lambda: not _locked(lock), seconds=60)  # the orphaned worker stops at its next step
    assert not list((tmp_path / "results").rglob("result.json"))  # and kept nothing
    rerun = subprocess.run(_run_command(tmp_path, "runs", "results"), capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    straight = subprocess.run(_run_command(tmp_path, "straight-runs", "straight-results"),
                              capture_output=True, text=True, timeout=600)
    assert straight.returncode == 0
    assert _kept_weights(tmp_path / "results") == _kept_weights(tmp_path / "straight-results")


def _locked(lock: Path) -> bool:
    """Whether a live process holds ``lock`` (flock): what a trainer holds while it trains."""
    try:
        exclusive_lock(lock, "held").close()
    except ValueError:
        return True
    return False
