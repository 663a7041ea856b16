"""What the analyzers need from a checkpoint besides its weights: its task's data, re-created offline."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from spectral_analysis.data import Split, TaskData, load_task


def checkpoint_task(metadata: dict[str, Any]) -> TaskData:
    """The task a checkpoint was trained on, rebuilt from its metadata (same options, same seed)."""
    task = metadata.get("task") or {}
    if "name" not in task:
        raise ValueError("no task to draw data from (an imported model records none): give your own "
                         "sequences with --inputs (and --labels), or --data-bound and --length")
    options = dict(task.get("options") or {})
    if task["name"] == "ptb":
        options["batch_size"] = (metadata.get("train") or {}).get("batch_size", 50)
    return load_task(task["name"], **options)


def task_split(task: TaskData, name: str) -> Split:
    if name not in ("train", "valid", "test"):
        raise ValueError(f"data split must be train, valid or test, got {name!r}")
    return getattr(task, name)


def sample_batch(task: TaskData, split: Split, count: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """``count`` sequences of one window (length T) from ``split``, chosen at random (seeded)."""
    if count < 1:
        raise ValueError(f"the number of samples must be >= 1, got {count}")
    if task.stream:
        return split.inputs[:count, :task.length], split.targets[:count, :task.length]
    generator = torch.Generator().manual_seed(seed)
    index = torch.randperm(len(split), generator=generator)[:count].sort().values
    return split.inputs[index], split.targets[index]


def validation_selections(metadata: dict[str, Any]) -> int | None:
    """How many checkpoints a run's validation split chose among: 1 for a run of fixed length (the split
    only watched), the evaluations up to ``max_steps`` for one that trained to a plateau (it chose the
    stopping step); ``None`` when the split steered training itself (``lr_cut`` read it after each epoch),
    so the checkpoint depends on it and it holds nothing out."""
    train = metadata.get("train") or {}
    if train.get("lr_cut", 1.0) < 1.0:
        return None
    if train.get("max_steps") is None:
        return 1
    return max(1, -(-int(train["max_steps"]) // int(train.get("eval_every") or 1)))


def held_out_split(metadata: dict[str, Any], task: TaskData) -> tuple[tuple[Tensor, Tensor] | None, int]:
    """A toolkit checkpoint's validation split as the certificates' held-out sequences, with the
    :func:`validation_selections` they chose among; ``(None, 1)`` where it holds nothing out."""
    selections = validation_selections(metadata)
    if selections is None or not len(task.valid):
        return None, 1
    return (task.valid.inputs, task.valid.targets), selections
