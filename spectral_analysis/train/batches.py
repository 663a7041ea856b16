"""Deterministic mini-batches: batch ``k`` depends only on (seed, k), so a resumed run sees the
same data as an uninterrupted one without saving any random state.

- :class:`ShuffledBatches`: epoch e visits the training set in the order of a permutation drawn
  from a generator seeded with ``(seed, e)``; the incomplete last batch of an epoch is dropped.
- :class:`StreamBatches`: successive windows of ``length`` steps over parallel token streams;
  window 0 of every epoch starts from a zero state, later windows carry the state (Section 7.3).
"""

from __future__ import annotations

import torch
from torch import Tensor

from spectral_analysis.data import Split


class ShuffledBatches:
    def __init__(self, split: Split, batch_size: int, seed: int) -> None:
        if batch_size < 1:
            raise ValueError(f"batch size must be >= 1, got {batch_size}")
        if batch_size > len(split):
            raise ValueError(f"batch size {batch_size} exceeds the {len(split)} training examples")
        self.split, self.batch_size, self.seed = split, batch_size, seed
        self.steps_per_epoch = len(split) // batch_size
        self._epoch, self._order = -1, torch.empty(0, dtype=torch.long)

    def get(self, index: int) -> tuple[Tensor, Tensor, bool]:
        """``(inputs, targets, starts_epoch)`` of batch ``index`` (0-based, over all epochs)."""
        epoch, position = divmod(index, self.steps_per_epoch)
        if epoch != self._epoch:
            gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._epoch, self._order = epoch, torch.randperm(len(self.split), generator=gen)
        rows = self._order[position * self.batch_size:(position + 1) * self.batch_size]
        return self.split.inputs[rows], self.split.targets[rows], position == 0

    def epoch_of(self, index: int) -> int:
        return index // self.steps_per_epoch


class StreamBatches:
    def __init__(self, split: Split, length: int) -> None:
        self.split, self.length = split, length
        self.steps_per_epoch = -(-split.inputs.shape[1] // length)

    def get(self, index: int) -> tuple[Tensor, Tensor, bool]:
        position = index % self.steps_per_epoch
        window = slice(position * self.length, (position + 1) * self.length)
        return self.split.inputs[:, window], self.split.targets[:, window], position == 0

    def epoch_of(self, index: int) -> int:
        return index // self.steps_per_epoch
