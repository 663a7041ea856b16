"""Kept results of a sweep (``results/<experiment>/<scale>/``), written from a trial's run directory.

Per trial (see :mod:`spectral_analysis.io.zoo` for the layout): ``result.json`` (the summary row:
configuration, final and best metrics, seconds (split by machine where a resumed run changed machines),
machine, git revision, torch version),
``curves.csv`` (at most :data:`TRAIN_ROWS` training records and :data:`VALID_ROWS` validation records,
evenly spaced, and the test line: loss, metrics, spectral margin, ||dL/dh0||, time),
``singular_values.safetensors`` (the singular values of every matrix at most :data:`TRAIN_ROWS`
recorded steps) and ``model.safetensors`` (the final checkpoint without the optimizer state).
A failed trial (a diverged run) keeps its row with the error, ``last_recorded_step``, and its curves and
singular values up to the failure.
``summary.csv`` and ``summary.json`` gather the rows of every trial of the scale.

To keep ``results/`` small enough to commit, the checkpoint and the singular values are kept for one seed
of each configuration only (:func:`zoo_seed`: seed 0, or the lowest seed above the ones that failed; a
scale that says ``keep_models = "every seed"`` keeps every seed's checkpoint), and the checkpoint only when
its tensors take at most :data:`MAX_KEPT_CHECKPOINT_BYTES` (a PTB vocabulary or a 100-layer MLP stays in its
run directory; the row says so). The singular values keep fewer recorded steps where
:data:`SINGULAR_VALUE_ROWS` of them would pass :data:`MAX_KEPT_SINGULAR_VALUE_BYTES` (a 100-layer net
records 13,000 values a step, so its file keeps 5 of them; Fig. 5's 30 seed-0 nets then take 8 MB).
Curves are kept for every seed.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from spectral_analysis import __version__
from spectral_analysis.atomic import atomic_target, atomic_write_text
from spectral_analysis.data import TaskData, load_task
from spectral_analysis.data.objectives import PRIMARY_METRIC
from spectral_analysis.experiments.fitness import trial_fitness
from spectral_analysis.experiments.grid import Trial
from spectral_analysis.experiments.row_status import counted_step, plateaued
from spectral_analysis.io.zoo import CHECKPOINT_NAME, RESULT_NAME, read_kept_row, trial_results_dir
from spectral_analysis.machine import machine_name
from spectral_analysis.train import Checkpoint, load_checkpoint, save_checkpoint
from spectral_analysis.train.evaluation import RunLog
from spectral_analysis.train.plateau import best_validation, last_improvement_step

TRAIN_ROWS, VALID_ROWS, SINGULAR_VALUE_ROWS = 100, 50, 50
MAX_KEPT_CHECKPOINT_BYTES, MAX_KEPT_SINGULAR_VALUE_BYTES = 1 << 19, 1 << 18
CURVES_NAME, SINGULAR_VALUES_NAME = "curves.csv", "singular_values.safetensors"
OTHER_SEED_NOTE = "kept in the run directory only (the zoo keeps seed"
SUMMARY_COLUMNS = (
    "trial",
    "status",
    "variant",
    "seed",
    "model",
    "task",
    "hidden",
    "steps",
    "metric",
    "final_valid",
    "test",
    "best_valid",
    "best_step",
    "plateau_step",
    "plateau",
    "seconds",
    "parameters",
    "device",
    "machine",
    "git_revision",
    "torch_version",
    "finished_at",
    "axes",
    "fit",
    "error",
)


def _evenly(rows: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    if len(rows) <= limit:
        return rows
    picks = np.unique(np.linspace(0, len(rows) - 1, limit).round().astype(int))
    return [rows[i] for i in picks]


def _write_curves(lines: list[dict[str, Any]], path: Path) -> None:
    train = _evenly([x for x in lines if x["phase"] == "train"], TRAIN_ROWS)
    valid = _evenly([x for x in lines if x["phase"] == "valid"], VALID_ROWS)
    tests = [x for x in lines if x["phase"] == "test"]  # the end's line, or a test curve (test_with_valid)
    rows = train + valid + _evenly(tests, VALID_ROWS)
    columns = ["phase", "step"] + sorted({k for x in rows for k in x} - {"phase", "step", "singular_values"})
    with atomic_target(path) as tmp, tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})


def _write_singular_values(lines: list[dict[str, Any]], path: Path) -> None:
    records = [x for x in lines if x["phase"] == "train" and x.get("singular_values")]
    if not records:
        return
    fitting = MAX_KEPT_SINGULAR_VALUE_BYTES // (4 * sum(len(v) for v in records[0]["singular_values"]))
    records = _evenly(records, max(2, min(SINGULAR_VALUE_ROWS, fitting)))
    tensors = {"steps": torch.tensor([x["step"] for x in records], dtype=torch.int64)}
    for k in range(len(records[0]["singular_values"])):
        tensors[f"matrix/{k}"] = torch.tensor([x["singular_values"][k] for x in records], dtype=torch.float32)
    with atomic_target(path) as tmp:
        save_file(tensors, str(tmp))


def read_singular_values(trial_dir: str | Path) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """``(steps, [per-matrix (records, k) singular values])`` of a kept trial, or ``None``."""
    path = Path(trial_dir) / SINGULAR_VALUES_NAME
    if not path.is_file():
        return None
    tensors = load_file(str(path))
    count = sum(1 for k in tensors if k.startswith("matrix/"))
    return tensors["steps"].numpy(), [tensors[f"matrix/{k}"].double().numpy() for k in range(count)]


def read_curves(trial_dir: str | Path) -> dict[str, dict[str, np.ndarray]]:
    """A kept trial's curves by phase (``train``, ``valid``, ``test``): column name -> array (NaN where
    a row has no value)."""
    path = Path(trial_dir) / CURVES_NAME
    if not path.is_file():
        raise ValueError(f"{trial_dir} holds no {CURVES_NAME}: not a kept trial of the experiments runner")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    phases: dict[str, dict[str, np.ndarray]] = {}
    for phase in ("train", "valid", "test"):
        part = [r for r in rows if r["phase"] == phase]
        columns = [c for c in (part[0] if part else {}) if c != "phase"]
        phases[phase] = {c: np.array([float(r[c]) if r[c] != "" else np.nan for r in part]) for c in columns}
    return phases


def keep_trial(
    trial: Trial,
    run_dir: str | Path,
    results: str | Path,
    *,
    status: str,
    error: str | None,
    device: str,
    git_revision: str,
    wall_seconds: float,
    threads: int = 1,
) -> dict[str, Any]:
    """Write a trial's kept results from its run directory and return its summary row (``threads``: torch's
    CPU threads it trained on, which its ``wall_seconds`` depend on)."""
    run_dir, out = Path(run_dir), trial_results_dir(results, trial.experiment, trial.scale, trial.key)
    out.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {
        "experiment": trial.experiment,
        "scale": trial.scale,
        "trial": trial.key,
        "status": status,
        "error": error,
        "variant": trial.variant,
        "axes": trial.axes,
        "seed": trial.seed,
        "model": trial.config["model"],
        "task": trial.config["task"],
        "hidden": trial.config.get("hidden"),
        "config": trial.config,
        "device": device,
        "machine": machine_name(device),
        "git_revision": git_revision,
        "torch_version": torch.__version__,
        "package_version": __version__,
        "finished_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "wall_seconds": round(wall_seconds, 2),
        "threads": threads,
    }
    lines = RunLog(run_dir / "metrics.jsonl").read()
    zoo = zoo_seed(read_rows(results, trial.experiment, trial.scale), trial.variant, trial.axes, trial.seed)
    if lines:  # a failed run's too: a diverged trial's margins and gradients up to its divergence
        if trial.seed == zoo:
            _write_singular_values(lines, out / SINGULAR_VALUES_NAME)
        _write_curves(lines, out / CURVES_NAME)
    if status in ("failed", "stopped") and lines:
        row["last_recorded_step"] = max(x["step"] for x in lines)
    last = run_dir / "last.safetensors"
    if status == "done" and last.is_file():
        checkpoint = load_checkpoint(last)
        meta = checkpoint.metadata
        metric = PRIMARY_METRIC[meta["task"]["kind"]]
        valid = [x for x in lines if x["phase"] == "valid"]
        tests = [x for x in lines if x["phase"] == "test"]
        best, best_step = best_validation(valid, metric)
        at_best = next((x for x in tests if x["step"] == best_step), None)
        row.update(_keep_checkpoint(checkpoint, out, None if trial.seed == zoo or trial.keep_model else zoo))
        row.update(
            {
                "metric": metric,
                "steps": meta["step"],
                "seconds": round(meta["elapsed"], 2),
                **({"seconds_by_machine": {name: round(seconds, 2) for name, seconds in
                                           meta["seconds_by_machine"].items()}}
                   if meta.get("seconds_by_machine") else {}),
                "final_train": _scalars(meta["metrics"].get("train", {})),
                "final_valid": _scalars(valid[-1] if valid else {}),
                "test_metrics": _scalars(tests[-1] if tests else {}),
                "best_valid": best,
                "best_step": best_step,
                **({"test_at_best_valid": _scalars(at_best)} if at_best else {}),
                "plateau_step": last_improvement_step(
                    valid, metric, trial.config.get("plateau_min_delta", 0.0)),
                "parameters": checkpoint.model.parameter_counts()["total"],
            }
        )
    row["fitness"] = trial_fitness(row, last if status == "done" and last.is_file() else None)
    atomic_write_text(out / RESULT_NAME, json.dumps(row, indent=1))
    return row


def zoo_seed(rows: list[dict[str, Any]], variant: str, axes: dict[str, Any],
             replacing: int | None = None) -> int:
    """The seed whose checkpoint and singular values the zoo keeps for the configuration ``variant, axes``:
    the lowest seed not kept as failed among ``rows`` (seed 0 unless it diverged). ``replacing``: a seed
    whose kept row is being rewritten (a retried failure), so its old row does not count."""
    failed = {r["seed"] for r in rows if r["variant"] == variant and r["axes"] == axes
              and r["status"] == "failed" and r["seed"] != replacing}
    seed = 0
    while seed in failed:
        seed += 1
    return seed


def _keep_checkpoint(checkpoint: Checkpoint, out: Path, zoo_keeps: int | None) -> dict[str, Any]:
    """Write ``checkpoint``'s model (without the optimizer state) into the kept trial directory ``out``
    unless the zoo keeps another seed (``zoo_keeps``) or it passes :data:`MAX_KEPT_CHECKPOINT_BYTES`;
    returns the row's ``checkpoint`` field and, where none is kept, its ``checkpoint_note``."""
    size = sum(t.numel() * t.element_size() for t in checkpoint.model.state_dict().values())
    if zoo_keeps is not None:
        return {"checkpoint": None, "checkpoint_note": f"{OTHER_SEED_NOTE} {zoo_keeps})"}
    if size > MAX_KEPT_CHECKPOINT_BYTES:
        limit = MAX_KEPT_CHECKPOINT_BYTES / 2**20
        return {"checkpoint": None,
                "checkpoint_note": f"kept in the run directory only ({size / 2**20:.1f} MB > {limit:.1f} MB)"}
    drop = ("format", "format_version", "package_version", "model")
    keep = {k: v for k, v in checkpoint.metadata.items() if k not in drop}
    save_checkpoint(out / CHECKPOINT_NAME, checkpoint.model, keep)
    return {"checkpoint": CHECKPOINT_NAME}


def left_to_another_seed(row: dict[str, Any]) -> bool:
    """Whether a kept ``row`` has no checkpoint because the zoo keeps another seed's of its configuration
    (not because its network is too large to keep)."""
    return (row.get("checkpoint_note") or "").startswith(OTHER_SEED_NOTE)


def promote_zoo_seeds(results: str | Path, experiment: str, scale: str, runs: str | Path) -> list[str]:
    """Keep the zoo's checkpoint and singular values for configurations whose seed 0 (or a later zoo seed)
    failed after a higher seed was kept without them: from that seed's run directory under
    ``runs/<experiment>/<scale>/``, when it still holds the run's last checkpoint at the kept step.
    Returns the trial keys promoted."""
    rows = read_rows(results, experiment, scale)
    promoted = []
    for row in rows:
        if not left_to_another_seed(row) or row["seed"] != zoo_seed(rows, row["variant"], row["axes"]):
            continue
        run_dir = Path(runs) / experiment / scale / row["trial"]
        last = run_dir / "last.safetensors"
        if not last.is_file():
            continue
        checkpoint = load_checkpoint(last)
        if checkpoint.metadata.get("step") != row.get("steps"):
            continue  # the run directory holds another run than the kept one
        out = trial_results_dir(results, experiment, scale, row["trial"])
        lines = RunLog(run_dir / "metrics.jsonl").read()
        _write_singular_values(lines, out / SINGULAR_VALUES_NAME)
        kept = {k: v for k, v in row.items() if k != "checkpoint_note"}
        kept.update(_keep_checkpoint(checkpoint, out, None))
        atomic_write_text(out / RESULT_NAME, json.dumps(kept, indent=1))
        promoted.append(row["trial"])
    return promoted


def _scalars(line: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in line.items() if isinstance(v, int | float) and k not in ("step", "epoch")}


def read_rows(results: str | Path, experiment: str, scale: str) -> list[dict[str, Any]]:
    """Every kept trial row of ``experiment`` at ``scale`` (empty when none)."""
    root = Path(results) / experiment / scale
    return [read_kept_row(path) for path in sorted(root.glob(f"*/{RESULT_NAME}"))]


def write_summary(results: str | Path, experiment: str, scale: str) -> list[dict[str, Any]]:
    """Gather the trial rows into ``summary.json`` and ``summary.csv``; returns the rows."""
    rows = [{**r, "plateau": plateaued(r)} for r in read_rows(results, experiment, scale)]
    root = Path(results) / experiment / scale
    atomic_write_text(root / "summary.json", json.dumps(rows, indent=1))
    flat = []
    for r in rows:
        metric = r.get("metric")
        flat.append(
            {
                **{k: r.get(k) for k in SUMMARY_COLUMNS},
                "axes": json.dumps(r.get("axes", {})),
                "steps": r.get("steps", r["config"].get("steps")),
                "plateau_step": counted_step(r),
                "final_valid": (r.get("final_valid") or {}).get(metric) if metric else None,
                "test": (r.get("test_metrics") or {}).get(metric) if metric else None,
                "fit": (r.get("fitness") or {}).get("fit"),
            }
        )
    with atomic_target(root / "summary.csv") as tmp, tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows(flat)
    return rows


def record_fitness(results: str | Path, experiment: str, scale: str) -> list[dict[str, Any]]:
    """Measure every kept trial of ``experiment`` at ``scale`` and write its ``fitness`` into its
    ``result.json`` and the summaries; returns the rows."""
    tasks: dict[str, TaskData] = {}
    for row in read_rows(results, experiment, scale):
        directory = trial_results_dir(results, experiment, scale, row["trial"])
        config = row["config"]
        key = json.dumps([config["task"], config.get("task_options", {})], sort_keys=True)
        if row.get("status") != "failed" and key not in tasks:
            tasks[key] = load_task(config["task"], **config.get("task_options", {}))
        row["fitness"] = trial_fitness(row, directory / CHECKPOINT_NAME, tasks.get(key))
        atomic_write_text(directory / RESULT_NAME, json.dumps(row, indent=1))
    return write_summary(results, experiment, scale)
