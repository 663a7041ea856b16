"""The synthetic memory tasks of Section 7.1 (and the KRU paper, Section 4.2), generated from a seed.

- Addition: channel 0 holds T values from U[0, 1], channel 1 two markers, one in each half; the
  target is the sum of the two marked values. Always predicting 1 scores an MSE of
  Var(U1 + U2) = 2/12 = 0.1667 (the paper's 0.167).
- Copy: symbols a_0..a_9 over T + 20 steps. Steps 1..10 hold x_1..x_10 drawn from a_0..a_7, step
  T + 10 holds the marker a_9, every other step the blank a_8. The target is a_8 everywhere
  except the last 10 steps, which must reproduce x_1..x_10. The memoryless strategy (a_8 for the
  first T + 10 steps, a uniform guess among a_0..a_7 for the last 10) scores a cross-entropy of
  10 ln 8 / (T + 20) per step and an accuracy of 1/8 on the last 10 steps. With ``recall_loss``
  (DizzyRNN, Section 6: "We modify the loss function in this problem to only quantify error on the
  copied portion of the output") the loss covers the last 10 steps only, where the memoryless
  strategy scores ln 8.
"""

from __future__ import annotations

import math

import torch

from spectral_analysis.data.base import Split, TaskData, check_positive

BLANK, MARKER, DATA_SYMBOLS, ALPHABET, COPY_LENGTH = 8, 9, 8, 10, 10


def addition_split(count: int, length: int, generator: torch.Generator) -> Split:
    values = torch.rand(count, length, generator=generator)
    half = length // 2
    first = torch.randint(0, half, (count,), generator=generator)
    second = torch.randint(half, length, (count,), generator=generator)
    markers = torch.zeros(count, length)
    rows = torch.arange(count)
    markers[rows, first] = 1.0
    markers[rows, second] = 1.0
    target = values[rows, first] + values[rows, second]
    return Split(torch.stack([values, markers], dim=-1), target.unsqueeze(-1))


def copy_split(count: int, length: int, generator: torch.Generator) -> Split:
    total = length + 2 * COPY_LENGTH
    data = torch.randint(0, DATA_SYMBOLS, (count, COPY_LENGTH), generator=generator)
    inputs = torch.full((count, total), BLANK, dtype=torch.long)
    inputs[:, :COPY_LENGTH] = data
    inputs[:, length + COPY_LENGTH - 1] = MARKER  # step T + 10 (1-based)
    targets = torch.full((count, total), BLANK, dtype=torch.long)
    targets[:, -COPY_LENGTH:] = data
    return Split(inputs, targets)


def _sizes(length: int, train_size: int, valid_size: int, test_size: int) -> None:
    for name, value in (("length", length), ("train_size", train_size), ("valid_size", valid_size),
                        ("test_size", test_size)):
        check_positive(name, value)


def addition_task(length: int = 100, train_size: int = 20000, valid_size: int = 1000,
                  test_size: int = 1000, seed: int = 0) -> TaskData:
    _sizes(length, train_size, valid_size, test_size)
    if length < 2:
        raise ValueError(f"the addition task needs length >= 2 (a marker in each half), got {length}")
    gen = torch.Generator().manual_seed(seed)
    splits = [addition_split(k, length, gen) for k in (train_size, valid_size, test_size)]
    options = {"length": length, "train_size": train_size, "valid_size": valid_size,
               "test_size": test_size, "seed": seed}
    return TaskData("addition", "regression-last", 2, 1, length, *splits, options=options,
                    domain_bound=math.sqrt(2.0), domain="a value in [0, 1] and a 0/1 marker per step",
                    baselines={"mse_predict_one": 2.0 / 12.0})


def copy_task(length: int = 100, train_size: int = 20000, valid_size: int = 1000,
              test_size: int = 1000, seed: int = 0, recall_loss: bool = False) -> TaskData:
    _sizes(length, train_size, valid_size, test_size)
    if not isinstance(recall_loss, bool):
        raise ValueError(f"recall_loss must be true or false, got {recall_loss!r}")
    gen = torch.Generator().manual_seed(seed)
    splits = [copy_split(k, length, gen) for k in (train_size, valid_size, test_size)]
    options = {"length": length, "train_size": train_size, "valid_size": valid_size,
               "test_size": test_size, "seed": seed, "recall_loss": recall_loss}
    total = length + 2 * COPY_LENGTH
    scored = COPY_LENGTH if recall_loss else total
    return TaskData("copy", "sequence", ALPHABET, ALPHABET, total, *splits, options=options,
                    baselines={"cross_entropy_memoryless": COPY_LENGTH * math.log(DATA_SYMBOLS) / scored,
                               "accuracy_recall_memoryless": 1.0 / DATA_SYMBOLS},
                    recall_steps=COPY_LENGTH, loss_steps=COPY_LENGTH if recall_loss else None)
