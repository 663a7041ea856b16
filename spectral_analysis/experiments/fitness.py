"""Whether a kept trial is fit evidence: it did not diverge, its test score is not within noise of its
task's chance level, and its kept model's output depends on its input.

A trial that fails any of the three cannot carry a verdict about how well its model learns: a diverged run
failed for numbers, not for the model; a run at chance or collapsed to one output learned nothing the
claim could be about. :func:`trial_fitness` measures the three; the runner records the result in each kept
row (``result.json``) and the summaries as ``fitness``
(:func:`~spectral_analysis.experiments.results.record_fitness` measures rows kept before):
``{"fit": bool, "reasons": [...], "chance": ..., "modal_share": ...}``. The paper checks' gate
(:func:`spectral_analysis.paper.kept.gate`) reads it.

Example::

    >>> trial_fitness({"status": "failed", "error": "TrainingDivergedError: the loss is nan at step 5",
    ...                "last_recorded_step": 4}, None)["reasons"]
    ['diverged (the last record before it at step 4)']
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from spectral_analysis.data import TaskData, load_task

CHANCE_SIGMAS = 3.0  # an accuracy within this many binomial standard errors of chance is at chance
BASELINE_TOLERANCE = 0.02  # a loss within this fraction of its task's baseline (or above it) is at it
COLLAPSED_SHARE = 0.99  # one prediction for this share of the test inputs: an output independent of input
REGRESSION_COLLAPSE = 0.05  # predictions whose spread is below this fraction of the targets' spread
SAMPLES = 256  # test inputs the collapse is measured on


def diverged(row: dict[str, Any]) -> bool:
    """Whether a kept trial failed by diverging (the trainer's ``TrainingDivergedError``), not otherwise."""
    return row.get("status") == "failed" and (row.get("error") or "").startswith("TrainingDivergedError")


def chance_level(task: TaskData, metric: str) -> tuple[float, bool] | None:
    """``(baseline, higher is better)`` of ``metric`` on ``task`` from the task's own baselines (the
    majority class, predicting 1 on addition, the memoryless copy), or ``None`` where it has none."""
    for name, value in task.baselines.items():
        if name.startswith(f"{metric}_"):
            return value, metric.startswith("accuracy")
    return None


def _at_chance(row: dict[str, Any], task: TaskData) -> tuple[str | None, float | None]:
    metric = row.get("metric")
    value = (row.get("test_metrics") or {}).get(metric)
    level = chance_level(task, metric) if metric else None
    if level is None or value is None:
        return None, None
    chance, higher_is_better = level
    if higher_is_better:
        band = CHANCE_SIGMAS * math.sqrt(chance * (1 - chance) / max(len(task.test), 1))
        if value <= chance + band:
            return (f"at chance: test {metric} {value:.4g} within {CHANCE_SIGMAS:g} standard errors of "
                    f"the chance level {chance:.4g}"), chance
    elif value >= chance * (1 - BASELINE_TOLERANCE):
        return (f"at chance: test {metric} {value:.4g} within {BASELINE_TOLERANCE:.0%} of the baseline "
                f"{chance:.4g} or above it"), chance
    return None, chance


@torch.no_grad()
def _collapse(checkpoint: Path, task: TaskData) -> tuple[str | None, float | None]:
    """Whether the kept model answers every test input the same way: for a classifier the share of the
    inputs that get its most common prediction, for a regression its predictions' spread against the
    targets'. ``(None, None)`` for the kinds it does not measure (piano rolls, streamed text)."""
    from spectral_analysis.train import load_checkpoint
    from spectral_analysis.train.evaluation import model_outputs

    if task.stream or task.kind == "multilabel-sequence":
        return None, None
    model = load_checkpoint(checkpoint).model.eval()
    count = min(SAMPLES, len(task.test))
    inputs, targets = task.test.inputs[:count], task.test.targets[:count]
    last_step = task.kind in ("classification-last", "regression-last")
    outputs, _ = model_outputs(model, inputs, last_step=last_step)
    if task.kind == "regression-last":
        spread = float(outputs[:, -1].std() / targets.float().std().clamp(min=1e-12))
        if spread < REGRESSION_COLLAPSE:
            return (f"collapsed: its predictions on {count} test inputs spread {spread:.3g} x the targets' "
                    "spread"), spread
        return None, spread
    logits = outputs[:, -1] if task.kind == "classification-last" else outputs
    if task.kind == "sequence":
        logits = logits[:, -(task.recall_steps or logits.shape[1]):]
    predictions = logits.argmax(-1).flatten()
    share = float(torch.bincount(predictions).max()) / predictions.numel()
    if share >= COLLAPSED_SHARE:
        return f"collapsed: one prediction for {share:.1%} of {count} test inputs", share
    return None, share


def trial_fitness(row: dict[str, Any], checkpoint: Path | None,
                  task: TaskData | None = None) -> dict[str, Any]:
    """The fitness of one kept trial (see the module docstring); ``checkpoint``: its kept model, where
    there is one (the collapse is measured only there); ``task``: its task, loaded from the row when not
    given."""
    if row.get("status") == "failed":
        if diverged(row):
            step = row.get("last_recorded_step")
            return {"fit": False, "reasons": [f"diverged (the last record before it at step {step})"]}
        return {"fit": False, "reasons": [f"failed: {row.get('error')}"]}
    if row.get("status") == "stopped":
        return {"fit": False, "reasons": [row.get("error") or "stopped early by a Tune scheduler"]}
    if task is None:
        config = row["config"]
        task = load_task(config["task"], **config.get("task_options", {}))
    reasons: list[str] = []
    chance_reason, chance = _at_chance(row, task)
    reasons += [chance_reason] if chance_reason else []
    kept_model = checkpoint is not None and checkpoint.is_file()
    collapse_reason, modal = _collapse(checkpoint, task) if kept_model else (None, None)
    reasons += [collapse_reason] if collapse_reason else []
    return {"fit": not reasons, "reasons": reasons, "chance": chance, "modal_share": modal,
            "collapse_measured": kept_model and modal is not None}
