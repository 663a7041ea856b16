"""Data layer: the papers' tasks as seeded, offline datasets (torch and numpy only)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from spectral_analysis.data.base import TASK_KINDS, Split, TaskData
from spectral_analysis.data.mnist import mnist_task
from spectral_analysis.data.music import jsb_task
from spectral_analysis.data.synthetic import addition_task, copy_task
from spectral_analysis.data.text import ptb_task
from spectral_analysis.data.ucr import ucr_input_size, ucr_task
from spectral_analysis.vocabulary import MNIST_VARIANTS, TASK_NAMES


def _loader(name: str) -> Callable[..., TaskData]:
    loaders: dict[str, Callable[..., TaskData]] = {"addition": addition_task, "copy": copy_task,
                                                   "ucr": ucr_task, "ptb": ptb_task, "jsb": jsb_task}
    if name in MNIST_VARIANTS:
        return lambda **options: mnist_task(name, **options)
    if name not in loaders:
        raise ValueError(f"unknown task {name!r}; expected one of {TASK_NAMES}")
    return loaders[name]


def task_options(name: str) -> tuple[str, ...]:
    """The options task ``name`` accepts."""
    loader = mnist_task if name in MNIST_VARIANTS else _loader(name)
    return tuple(p for p in inspect.signature(loader).parameters if p != "variant")


def load_task(name: str, **options: Any) -> TaskData:
    """A task by name with its options (``TaskData.options`` reloads the same data)."""
    loader = _loader(name)
    unknown = sorted(set(options) - set(task_options(name)))
    if unknown:
        raise ValueError(f"task {name!r} does not take option(s) {unknown}; "
                         f"it accepts {list(task_options(name))}")
    if name == "ucr" and "dataset" not in options:
        raise ValueError("the ucr task needs a dataset name (--dataset, or the option dataset=; e.g. "
                         "ArrowHead)")
    return loader(**options)


__all__ = ["TASK_KINDS", "TASK_NAMES", "Split", "TaskData", "addition_task", "copy_task", "load_task",
           "jsb_task", "mnist_task", "ptb_task", "task_options", "ucr_input_size", "ucr_task"]
