"""One trial of a sweep: what a worker is given (:class:`TrialSpec`), when it stops (a time budget, a
stop request, the sweep's death), :func:`run_trial` itself, and its Tune side (:func:`tune_trainable`
reports each evaluation; :func:`keep_stopped` keeps a trial a scheduler ended). The sweep around it is
:mod:`~spectral_analysis.experiments.runner`.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from spectral_analysis.allocator import keep_freed_memory
from spectral_analysis.experiments.grid import Trial
from spectral_analysis.experiments.parking import drop_parked, park_run, parked_dir, restore_parked
from spectral_analysis.experiments.ray_grid import SCORE, report_evaluation, restore_reported, trial_spec
from spectral_analysis.experiments.results import keep_trial
from spectral_analysis.experiments.row_status import outcome_text
from spectral_analysis.train import TrainConfig, Trainer
from spectral_analysis.train.run_state import lock_run_directory, resume_conflicts

logger = logging.getLogger(__name__)

STOP_REQUEST = ".stop"  # in a sweep's out directory: see request_stop


@dataclass
class TrialSpec:
    """Everything a worker needs to run one trial (plain data: it travels to Ray workers)."""

    trial: dict[str, Any]
    run_dir: str
    results: str
    device: str
    git_revision: str
    deadline: float | None = None  # time.time() after which the trial checkpoints and stops
    stop_request: str | None = None  # a file whose modification after `started` stops the trial so too
    started: float = 0.0  # time.time() when the sweep started
    threads: int = 1  # torch's intra-op threads in the trial (the runner's threads_per_trial)
    tensorboard: bool = False  # the trainer also writes TensorBoard event files into the run directory
    driver_pid: int | None = None  # the sweep's process on this machine: a trial stops when it is gone


def git_revision() -> str:
    """The checkout's commit (``-dirty`` when files differ from it), or ``unknown`` outside git."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def run_conflicts(config: TrainConfig) -> list[str]:
    """Why the run directory ``config.out`` does not hold this trial's run (the catalog entry may have
    changed since, or its configuration is unreadable); empty when it does."""
    try:
        return resume_conflicts(config)
    except ValueError as error:  # no readable configuration: not a run this trial can continue
        return [str(error)]


def request_stop(out: str | Path = "runs") -> Path:
    """Ask every sweep training into ``out`` to checkpoint, park its running trials and start no more
    (see the module docstring); the request file written."""
    path = Path(out).resolve() / STOP_REQUEST
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()  # an existing request file is renewed (its modification time is the request's)
    return path


def _driver_gone(spec: TrialSpec) -> bool:
    """The sweep that started this trial has died (``kill -9``): its workers must not train on."""
    if spec.driver_pid is None:
        return False
    try:
        os.kill(spec.driver_pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's: not ours, but not gone
        return False
    return False


def _stop_now(spec: TrialSpec) -> bool:
    """The time budget is spent, a stop was requested after the sweep started, or the sweep died."""
    if spec.deadline is not None and time.time() >= spec.deadline:
        return True
    if _driver_gone(spec):
        return True
    try:
        return spec.stop_request is not None and os.stat(spec.stop_request).st_mtime >= spec.started
    except OSError:  # no request
        return False


def run_trial(spec: TrialSpec | dict[str, Any],
              on_evaluation: Callable[[dict[str, Any], str], None] | None = None,
              restore: Callable[[TrainConfig], int | None] | None = None) -> dict[str, Any]:
    """Run (or resume) one trial and keep its results; the same on a Ray worker or in this process.
    ``on_evaluation(line, primary)`` gets each validation line and the task's primary metric;
    ``restore(config)`` may first put a later checkpoint into the run directory (Tune's, on a restart),
    before the trial's parked run is weighed against it."""
    spec = spec if isinstance(spec, TrialSpec) else TrialSpec(**spec)
    torch.set_num_threads(spec.threads)
    keep_freed_memory()  # a Ray worker is its own process: the memory policy is set in each
    trial, run_dir = Trial(**spec.trial), Path(spec.run_dir)
    if _stop_now(spec):
        return {"trial": trial.key, "status": "unfinished", "step": 0}
    config = trial.train_config(run_dir, spec.device)
    config.tensorboard = spec.tensorboard
    parked = parked_dir(spec.results, trial.experiment, trial.scale, trial.key)
    started = time.perf_counter()
    try:
        if restore is not None:
            restore(config)
        restore_parked(parked, config)
        checkpointed = (run_dir / "last.safetensors").is_file()
        conflicts = run_conflicts(config) if checkpointed else []
        resume = checkpointed and not conflicts
        if not resume:  # killed before its first checkpoint, or a run of an older catalog entry
            if run_dir.is_dir():
                lock_run_directory(run_dir).close()  # never another writer's run (ValueError: locked)
            if conflicts:
                logger.warning("%s starts over: %s holds a run of another configuration (%s)", trial.key,
                               run_dir, "; ".join(conflicts))
            shutil.rmtree(run_dir, ignore_errors=True)
            drop_parked(parked)  # else its later step would keep the new run from parking over it
        trainer = Trainer(config, resume=resume)
        report = (lambda line: on_evaluation(line, trainer.primary)) if on_evaluation else None
        trainer.run(stop=lambda _step: _stop_now(spec), on_evaluation=report)
        status, error = ("done" if trainer.finished else "unfinished"), None
    except Exception as exc:  # noqa: BLE001 (any failure of one trial is recorded; the grid goes on)
        status, error = "failed", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if status == "unfinished" and _driver_gone(spec):  # its checkpoint stays; nothing more is written
        return {"trial": trial.key, "status": status, "step": trainer.step}
    if status == "unfinished":
        return {"trial": trial.key, "status": status, "step": trainer.step,
                "parked": park_run(run_dir, parked)}
    if status == "done":  # a failed trial keeps its parked state: --retry-failed resumes from it
        drop_parked(parked)
    return keep_trial(
        trial,
        run_dir,
        spec.results,
        status=status,
        error=error,
        device=spec.device,
        git_revision=spec.git_revision,
        wall_seconds=time.perf_counter() - started,
        threads=spec.threads,
    )


def tune_trainable(config: dict[str, Any]) -> dict[str, Any]:
    """A Tune trial: each evaluation reported as it comes, with a Tune checkpoint of its step; started
    from the Tune checkpoint Tune hands back when it restarts the trial; the last evaluation reported
    again with the trial's status."""
    last: dict[str, float] = {}
    spec = trial_spec(config)

    def report(line: dict[str, Any], primary: str) -> None:
        last.update(report_evaluation(line, primary, Path(spec["run_dir"])))

    row = run_trial(spec, on_evaluation=report, restore=restore_reported)
    return {**last, "trial_status": row["status"], "trial_key": row["trial"],
            "trial_outcome": outcome_text(row)}


def keep_stopped(spec: dict[str, Any], result: dict[str, Any]) -> str:
    """Keep a trial that a Tune scheduler ended at an evaluation, as ``stopped`` (its run directory stays:
    ``--retry-failed`` resumes it)."""
    spec_ = TrialSpec(**spec)
    score = result.get(SCORE)
    keep_trial(Trial(**spec_.trial), spec_.run_dir, spec_.results, status="stopped",
               error=f"stopped by the Tune scheduler at step {result.get('step')} ({SCORE} {score:.4g})",
               device=spec_.device, git_revision=spec_.git_revision,
               wall_seconds=float(result.get("time_total_s") or 0.0), threads=spec_.threads)
    return "stopped"
