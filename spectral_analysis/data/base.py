"""What a task is for the trainer: tensors for train / valid / test, its sizes and its baselines.

Every task is one of five kinds, which fix the loss and the metric (``spectral_analysis.train``):

- ``regression-last``: one real target per sequence, read off the last step (addition);
- ``classification-last``: one class per sequence, read off the last step (MNIST, UCR);
- ``classification``: one class per flat vector, for the feed-forward nets (flat MNIST);
- ``sequence``: one class per step (copy; word-level language modelling reads the same way);
- ``multilabel-sequence``: a binary vector per step, padded steps marked (the chorales' piano rolls).

Inputs are float tensors ``(N, T, n_i)`` (``(N, n_i)`` for ``classification``) or integer symbol
ids ``(N, T)``; a recurrent model multiplies an id by ``M`` as the one-hot vector it stands for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

TASK_KINDS = ("regression-last", "classification-last", "classification", "sequence", "multilabel-sequence")


@dataclass
class Split:
    inputs: Tensor
    targets: Tensor

    def __len__(self) -> int:
        return int(self.inputs.shape[0])


def majority_class_accuracy(train: Split, test: Split) -> float:
    """The test accuracy of always guessing the training set's most common class (a classification
    task's chance level)."""
    counts = torch.bincount(train.targets.flatten())
    return float((test.targets == counts.argmax()).float().mean())


def unigram_cross_entropy(train: Split, test: Split, vocabulary: int) -> float:
    """The test cross entropy (nats a token) of predicting every token by its training frequency, the
    best prediction that reads no context (a language model's chance level); counts add one, so a token
    unseen in training costs a finite amount.

    Example: on Penn Treebank's words it is about 6.5 nats (perplexity about 640), against ln 10,000 = 9.2
    for a uniform guess."""
    counts = torch.bincount(train.targets.flatten(), minlength=vocabulary).double() + 1.0
    log_shares = counts.log() - counts.sum().log()
    return float(-log_shares[test.targets.flatten()].mean())


@dataclass
class TaskData:
    """A loaded task. ``options`` are the resolved arguments that reload it exactly."""

    name: str
    kind: str
    input_size: int
    output_size: int
    length: int
    train: Split
    valid: Split
    test: Split
    options: dict[str, Any] = field(default_factory=dict)
    baselines: dict[str, float] = field(default_factory=dict)
    stream: bool = False  # successive batches continue each other (carry the hidden state)
    recall_steps: int | None = None  # sequence tasks scored on their last steps too (copy: 10)
    loss_steps: int | None = None  # a sequence task whose loss covers only its last steps
    domain_bound: float | None = None  # a-priori bound on ||x_t|| over the whole input domain, if any
    domain: str = ""  # what the domain bound rests on, e.g. "pixels in [0, 1]"

    @property
    def symbolic(self) -> bool:
        return not self.train.inputs.is_floating_point()

    def data_bound(self) -> float:
        """``B = max_t ||x_t||`` over the training set (1 for one-hot symbols)."""
        if self.symbolic:
            return 1.0
        return float(self.train.inputs.norm(dim=-1).max())

    def theorem_bound(self) -> tuple[float, str]:
        """Theorem 5's ``B`` (Assumption 1(a): ``||x_t|| <= B`` for *all* inputs) and what it rests on:
        the input domain's a-priori bound where the task has one; else the largest norm measured on the
        train and test sets, which checks the assumption only on that sample."""
        if self.symbolic:
            return 1.0, "input domain: one-hot symbols, ||x_t|| = 1"
        if self.domain_bound is not None:
            return self.domain_bound, f"input domain: {self.domain}"
        measured = max(float(split.inputs.norm(dim=-1).max()) for split in (self.train, self.test))
        return measured, ("measured on the train and test sets (no a-priori bound on this domain; "
                          "Assumption 1(a) is checked only on that sample)")


def check_positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def holdout(inputs: Tensor, targets: Tensor, fraction: float, seed: int) -> tuple[Split, Split]:
    """Split off ``fraction`` of the rows (at least one) at random, seeded: (train, held out)."""
    n = inputs.shape[0]
    k = max(1, int(math.floor(fraction * n + 0.5)))
    if k >= n:
        raise ValueError(f"cannot hold out {k} of {n} training examples for validation")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    held, kept = perm[:k].sort().values, perm[k:].sort().values
    return Split(inputs[kept], targets[kept]), Split(inputs[held], targets[held])
