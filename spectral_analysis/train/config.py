"""The training configuration: what a run trains, on what, for how long, and what may change on resume."""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

import torch

from spectral_analysis.vocabulary import MODEL_NAMES, OPTIMIZER_NAMES, SEQUENCE_LOSSES, TASK_NAMES

OPTIMIZERS = dict(zip(OPTIMIZER_NAMES, (torch.optim.Adam, torch.optim.RMSprop, torch.optim.SGD), strict=True))
LENGTH_FIELDS = ("steps", "epochs", "max_steps")  # how long a run trains, not what it trains
RESUMABLE_CHANGES = (*LENGTH_FIELDS, "plateau_min_delta", "device", "progress", "tensorboard",
                     "test_with_valid")


@dataclass
class TrainConfig:
    """One training run: the model and task (registry names and options), the optimizer, the budget
    (``steps`` or ``epochs``, and ``max_steps`` to train on until the validation metric plateaus), the
    seed, and how often to record, evaluate and checkpoint."""

    model: str
    task: str
    out: str
    hidden: int = 128
    model_options: dict[str, Any] = field(default_factory=dict)
    task_options: dict[str, Any] = field(default_factory=dict)
    optimizer: str = "adam"
    optimizer_options: dict[str, Any] = field(default_factory=dict)  # e.g. RMSprop's alpha (KRU's "decay")
    lr: float = 1e-3
    lr_decay: float = 1.0  # multiplied in once per epoch
    lr_cut: float = 1.0  # multiplied in after each epoch whose validation does not improve (KRU Sec. 4.4)
    batch_size: int = 50
    steps: int | None = None
    epochs: int | None = None
    max_steps: int | None = None  # past steps/epochs, train on until validation plateaus, at most this
    plateau_min_delta: float = 0.0  # a validation gain no larger than this is no improvement (plateau.py)
    clip: float | None = None  # max gradient norm
    clip_value: float | None = None  # each gradient entry clipped to [-v, v] (the uRNN authors' T.clip)
    sequence_loss: str = "mean"  # a sequence task's objective over its steps (objectives.training_objective)
    penalty: float = 0.0  # weight of the models' spectral penalty (sigma map "none")
    freeze: list[str] = field(default_factory=list)  # fnmatch patterns of parameters kept at their init
    seed: int = 0
    device: str = "auto"
    record_every: int = 10
    eval_every: int = 100
    checkpoint_every: int = 100
    eval_batches: int | None = None
    test_batches: int | None = None  # limit the final test evaluation (smoke-scale sweeps)
    test_with_valid: bool = False  # also score the test set at each validation: a test curve, and the test
    # metric where validation is best (the protocol of ICML Table 4)
    progress: bool = True
    tensorboard: bool = False  # also write TensorBoard event files into out/tensorboard

    def validate(self) -> None:
        for name in ("model", "task", "optimizer", "device"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a name, got {getattr(self, name)!r}")
        if self.model not in MODEL_NAMES:
            raise ValueError(f"unknown model {self.model!r}; expected one of {MODEL_NAMES}")
        if self.task not in TASK_NAMES:
            raise ValueError(f"unknown task {self.task!r}; expected one of {TASK_NAMES}")
        for name in ("lr", "lr_decay", "lr_cut", "plateau_min_delta", "penalty", "clip", "clip_value"):
            value = getattr(self, name)
            if not (value is None and name in ("clip", "clip_value")) and (isinstance(value, bool)
                                                          or not isinstance(value, int | float)):
                raise ValueError(f"{name} must be a number, got {value!r}")
        for name in ("model_options", "task_options"):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"{name} must be a table, got {getattr(self, name)!r}")
        if self.sequence_loss not in SEQUENCE_LOSSES:
            raise ValueError(f"unknown sequence_loss {self.sequence_loss!r}; expected one of "
                             f"{SEQUENCE_LOSSES}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; expected one of {tuple(OPTIMIZERS)}")
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("give exactly one of steps and epochs")
        for name in ("steps", "epochs", "max_steps", "batch_size", "hidden", "record_every", "eval_every",
                     "checkpoint_every", "eval_batches", "test_batches"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.max_steps is not None and self.steps is not None and self.max_steps < self.steps:
            raise ValueError(f"max_steps ({self.max_steps}) must be at least steps ({self.steps})")
        if not 0 <= self.plateau_min_delta < math.inf:
            raise ValueError(f"plateau_min_delta must be finite and >= 0, got {self.plateau_min_delta}")
        if not self.lr > 0:
            raise ValueError(f"learning rate must be > 0, got {self.lr}")
        if not 0 < self.lr_decay <= 1:
            raise ValueError(f"lr decay must lie in (0, 1], got {self.lr_decay}")
        if not 0 < self.lr_cut <= 1:
            raise ValueError(f"lr cut must lie in (0, 1], got {self.lr_cut}")
        if self.clip is not None and not self.clip > 0:
            raise ValueError(f"gradient clip must be > 0, got {self.clip}")
        if self.clip_value is not None and not self.clip_value > 0:
            raise ValueError(f"gradient clip_value must be > 0, got {self.clip_value}")
        if self.clip is not None and self.clip_value is not None:
            raise ValueError("give at most one of clip (the gradient's norm) and clip_value (each entry)")
        if not 0 <= self.penalty < math.inf:
            raise ValueError(f"penalty weight must be finite and >= 0, got {self.penalty}")
        if not isinstance(self.freeze, list) or not all(isinstance(p, str) and p for p in self.freeze):
            raise ValueError(f"freeze must be a list of parameter-name patterns, got {self.freeze!r}")
        if not isinstance(self.optimizer_options, dict) or "lr" in self.optimizer_options:
            raise ValueError(f"optimizer_options must be a table of the optimizer's options other than lr, "
                             f"got {self.optimizer_options!r}")


def field_default(name: str) -> Any:
    """The default of a :class:`TrainConfig` field (what a run written before the field existed had)."""
    spec = next(f for f in fields(TrainConfig) if f.name == name)
    return spec.default_factory() if spec.default is MISSING else spec.default
