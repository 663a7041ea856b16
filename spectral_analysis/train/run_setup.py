"""What a run is built from before its first step: the device it asks for, its task (Penn Treebank's
batches are the training batch size), and the parameters it keeps frozen."""

from __future__ import annotations

from fnmatch import fnmatchcase

import torch
from torch import nn

from spectral_analysis.data import TaskData, load_task
from spectral_analysis.train.config import TrainConfig


def resolve_device(name: str) -> torch.device:
    """``auto`` (CUDA where there is one, else the CPU), ``cpu`` or ``cuda[:k]``; ``ValueError`` for CUDA
    asked for on a machine without it, or another name."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but no CUDA device is available")
    if name != "cpu" and not name.startswith("cuda"):
        raise ValueError(f"unknown device {name!r}; expected auto, cpu or cuda")
    return torch.device(name)


def load_run_task(config: TrainConfig) -> TaskData:
    """The task ``config`` trains on, with its options (a PTB stream is cut into ``batch_size`` rows)."""
    options = dict(config.task_options)
    if config.task == "ptb":
        options["batch_size"] = config.batch_size
    return load_task(config.task, **options)


def freeze_parameters(model: nn.Module, patterns: list[str]) -> list[str]:
    """Turn off the gradient of every parameter whose name matches one of ``patterns``; the names frozen.
    ``ValueError`` for a pattern that matches nothing (naming the model's parameters) or a model left
    with nothing to train."""
    names = [name for name, _ in model.named_parameters()]
    for pattern in patterns:
        if not any(fnmatchcase(name, pattern) for name in names):
            shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
            raise ValueError(f"freeze pattern {pattern!r} matches no parameter of the model; its "
                             f"parameters are {shown}")
    frozen = [name for name in names if any(fnmatchcase(name, pattern) for pattern in patterns)]
    if frozen and len(frozen) == len(names):
        raise ValueError(f"freeze {patterns} matches every parameter: nothing would train")
    for name, parameter in model.named_parameters():
        if name in frozen:
            parameter.requires_grad_(False)
    return frozen
