"""Evaluation of a model on a split of a task (no gradients), and the run log ``metrics.jsonl``."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

from spectral_analysis.atomic import read_text_file
from spectral_analysis.data import Split, TaskData
from spectral_analysis.data.objectives import (
    scored_count,
    scores_last_step,
    task_loss_and_metrics,
    weighted_mean,
)
from spectral_analysis.nn import RecurrentModel
from spectral_analysis.train.schema import validate_log_row

logger = logging.getLogger(__name__)


def model_outputs(model: nn.Module, inputs: torch.Tensor, h0=None, last_step: bool = False):
    """``(outputs, run)``: a recurrent model's run (with its final state), or a feed-forward output.
    ``last_step``: a recurrent model reads out only its last step, ``(B, 1, n_y)`` (a last-step task)."""
    if isinstance(model, RecurrentModel):
        run = model.run(inputs, h0)
        return (run.last_outputs() if last_step else run.outputs), run
    return model(inputs), None


@torch.no_grad()
def evaluate(model: nn.Module, task: TaskData, split: Split, batch_size: int, device: torch.device,
             max_batches: int | None = None) -> dict[str, float]:
    """Metrics of ``model`` on ``split``: mean over batches (stream tasks: windows carrying the state).
    Parametrized weights (the SVD map) are formed once for the whole split, not once per batch."""
    was_training = model.training
    model.eval()
    with parametrize.cached():
        parts = _batch_metrics(model, task, split, batch_size, device, max_batches)
    model.train(was_training)
    return weighted_mean(parts)


def _batch_metrics(model: nn.Module, task: TaskData, split: Split, batch_size: int, device: torch.device,
                   max_batches: int | None) -> list[tuple[dict[str, float], int]]:
    parts: list[tuple[dict[str, float], int]] = []
    if task.stream:
        state = None
        for start in range(0, split.inputs.shape[1], task.length):
            x = split.inputs[:, start:start + task.length].to(device)
            y = split.targets[:, start:start + task.length].to(device)
            outputs, run = model_outputs(model, x, state, scores_last_step(task.kind))
            state = run.state
            parts.append((task_loss_and_metrics(task, outputs, y)[1], scored_count(task, y)))
            if max_batches and len(parts) >= max_batches:
                break
    else:
        for start in range(0, len(split), batch_size):
            x = split.inputs[start:start + batch_size].to(device)
            y = split.targets[start:start + batch_size].to(device)
            outputs, _ = model_outputs(model, x, last_step=scores_last_step(task.kind))
            parts.append((task_loss_and_metrics(task, outputs, y)[1], scored_count(task, y)))
            if max_batches and len(parts) >= max_batches:
                break
    return parts


class RunLog:
    """``metrics.jsonl``: one JSON object a line, flushed and fsynced as it is written; ``mirror`` (e.g.
    a :class:`~spectral_analysis.train.tensorboard.TensorBoardMirror`) gets every row too."""

    def __init__(self, path: Path, mirror: Any = None) -> None:
        self.path, self.mirror = path, mirror

    def truncate_after(self, step: int) -> None:
        """Drop the lines of steps after ``step`` (what a killed run wrote past its last checkpoint)."""
        if not self.path.exists():
            return
        kept = [row for row in self.read() if row["step"] <= step]
        self.path.write_text("".join(json.dumps(row) + "\n" for row in kept))

    def drop_phase(self, phase: str) -> None:
        """Drop the lines of ``phase`` (a finished run's ``test`` line when it trains on)."""
        rows = self.read()
        kept = [row for row in rows if row["phase"] != phase]
        if len(kept) < len(rows):
            self.path.write_text("".join(json.dumps(row) + "\n" for row in kept))

    def write(self, record: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if self.mirror is not None:
            self.mirror.write(record)

    def read(self) -> list[dict[str, Any]]:
        """The rows, validated (:func:`~spectral_analysis.train.schema.validate_log_row`). A torn last
        line (what a kill during a write leaves) is dropped with a warning; any other bad line is a
        ``ValueError`` naming the file and the line."""
        if not self.path.exists():
            return []
        text = read_text_file(self.path, "run log")
        lines = [line for line in text.splitlines() if line.strip()]
        rows = []
        for number, line in enumerate(lines, start=1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines) and not text.endswith("\n"):
                    logger.warning("%s: dropped a torn last line (an interrupted write)", self.path)
                    break
                raise ValueError(f"{self.path}: line {number} is not JSON") from None
            try:
                rows.append(validate_log_row(row, number))
            except ValueError as error:
                raise ValueError(f"{self.path}: {error}") from None
        return rows
