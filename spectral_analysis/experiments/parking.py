"""Parking: an unfinished trial's resumable state kept beside the results, so a sweep resumes on another
checkout or machine.

A run directory (``runs/`` by default) is scratch space that a fresh clone, a cluster job's new node or
the next session does not have, and a trial longer than one such session would start over each time.
:func:`park_run` copies what the trainer resumes from (``config.json``, ``metrics.jsonl`` compressed,
``last.safetensors``) to ``<results>/<experiment>/<scale>/parked/<trial>/``, a directory the results
readers and the zoo do not list; the runner restores it (:func:`restore_parked`) when the trial's run
directory is missing or behind and the parked run is of the trial's configuration, and deletes it once the
trial is kept done. A run whose parked files would
exceed :data:`PARK_LIMIT_BYTES` is not parked (its checkpoint is too big to keep in a repository).
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from pathlib import Path

from spectral_analysis.atomic import read_text_file
from spectral_analysis.train.checkpoint import CheckpointError, read_checkpoint
from spectral_analysis.train.config import TrainConfig
from spectral_analysis.train.run_state import resume_conflicts

PARKED_DIR = "parked"
PARK_LIMIT_BYTES = 4 * 2**20
CHECKPOINT = "last.safetensors"
LOG, PARKED_LOG = "metrics.jsonl", "metrics.jsonl.gz"
CONFIG = "config.json"


def parked_dir(results: str | Path, experiment: str, scale: str, trial: str) -> Path:
    return Path(results) / experiment / scale / PARKED_DIR / trial


def parked_trials(results: str | Path, experiment: str, scale: str) -> list[str]:
    """The trials of ``experiment`` at ``scale`` parked in ``results``."""
    root = Path(results) / experiment / scale / PARKED_DIR
    return sorted(p.parent.name for p in root.glob(f"*/{CHECKPOINT}"))


def checkpoint_step(path: str | Path) -> int | None:
    """The training step a trainer checkpoint was written at, or ``None`` when ``path`` is missing or not
    a valid checkpoint (:func:`~spectral_analysis.train.checkpoint.read_checkpoint`)."""
    try:
        meta, _ = read_checkpoint(path)
    except CheckpointError:
        return None
    step = meta.get("step")
    return step if isinstance(step, int) else None


def park_run(run_dir: str | Path, target: str | Path, any_size: bool = False) -> str:
    """Copy ``run_dir``'s resumable state to ``target`` (replacing an older one), unless it would take
    more than :data:`PARK_LIMIT_BYTES` (``any_size``: whatever it takes, as a Tune checkpoint takes it);
    one line saying what was parked, or why nothing was."""
    run_dir, target = Path(run_dir), Path(target)
    step = checkpoint_step(run_dir / CHECKPOINT)
    if step is None or not (run_dir / CONFIG).is_file():
        return f"not parked: {run_dir} has no readable {CHECKPOINT} and {CONFIG}"
    if (checkpoint_step(target / CHECKPOINT) or -1) > step:
        return f"not parked: {target} already holds a later step"
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        shutil.copyfile(run_dir / CONFIG, staging / CONFIG)
        shutil.copyfile(run_dir / CHECKPOINT, staging / CHECKPOINT)
        if (run_dir / LOG).is_file():
            log = staging / PARKED_LOG  # mtime 0: the same log parks as the same bytes
            with open(run_dir / LOG, "rb") as source, gzip.GzipFile(log, "wb", mtime=0) as sink:
                shutil.copyfileobj(source, sink)
        size = sum(p.stat().st_size for p in staging.iterdir())
        if not any_size and size > PARK_LIMIT_BYTES:
            return (f"not parked: {run_dir.name} would take {size / 2**20:.1f} MB "
                    f"(> {PARK_LIMIT_BYTES / 2**20:.3g} MB)")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return f"parked {run_dir.name} at step {step} ({size / 2**20:.2f} MB)"


def restore_parked(target: str | Path, config: TrainConfig) -> int | None:
    """Put the run parked in ``target`` back into the run directory ``config.out`` when that has no
    checkpoint or an earlier one; the step restored, or ``None`` when nothing is parked or the run
    directory was kept as it is. A parked run of another configuration (an older catalog entry) is
    dropped: the trial can never resume it, and its later step would keep the trial's own run from
    parking. ``ValueError`` naming the file for a parked run that cannot be read."""
    target, run_dir = Path(target), Path(config.out)
    if not target.is_dir():
        return None
    parked = checkpoint_step(target / CHECKPOINT)
    try:
        stored = json.loads(read_text_file(target / CONFIG, "parked configuration", limit=2 ** 24))
        stored["train"]["out"] = str(run_dir)  # the parking machine's path is not this one's
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"parked run {target} is unreadable ({CONFIG}: {error}); delete it to start the "
                         "trial over") from None
    if parked is None:
        raise ValueError(f"parked run {target} has no readable {CHECKPOINT}; delete it to start the trial "
                         "over")
    if drop_if_stale(target, config):
        return None
    if (checkpoint_step(run_dir / CHECKPOINT) or -1) >= parked:
        return None
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    (run_dir / CONFIG).write_text(json.dumps(stored, indent=2))
    shutil.copyfile(target / CHECKPOINT, run_dir / CHECKPOINT)
    if (target / PARKED_LOG).is_file():
        with gzip.open(target / PARKED_LOG, "rb") as source, open(run_dir / LOG, "wb") as sink:
            shutil.copyfileobj(source, sink)
    return parked


def drop_if_stale(target: str | Path, config: TrainConfig) -> bool:
    """Drop the run parked in ``target`` when it is of another configuration than ``config`` (an older
    catalog entry's, which the trial can never resume, and whose later step would keep the trial's own
    run from parking); whether it was dropped. One whose configuration cannot be read is left as it is."""
    try:
        stale = Path(target).is_dir() and bool(resume_conflicts(config, target))
    except ValueError:
        return False
    if stale:
        drop_parked(target)
    return stale


def drop_parked(target: str | Path) -> None:
    """Forget a parked run (its trial is kept), and the experiment's ``parked/`` once it is empty."""
    target = Path(target)
    shutil.rmtree(target, ignore_errors=True)
    if target.parent.is_dir() and not any(target.parent.iterdir()):
        target.parent.rmdir()
