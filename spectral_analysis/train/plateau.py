"""The plateau criterion of paper-scale training: no improvement of the validation metric over the last
:data:`PLATEAU_FRACTION` of the steps. The trainer uses it to stop a run with ``max_steps``; the kept
results report it per trial."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

PLATEAU_FRACTION = 0.2  # "no improvement over the last 20% of the steps"
LOWER_IS_BETTER = ("mse", "cross_entropy", "perplexity", "loss", "nll")


def best_validation(valid: Iterable[dict[str, Any]], metric: str) -> tuple[float | None, int | None]:
    """``(value, step)`` of the best ``metric`` among validation lines (the earliest on a tie: a later
    equal value is no improvement), or ``(None, None)`` when none records it."""
    best: tuple[float | None, int | None] = (None, None)
    lower = metric in LOWER_IS_BETTER
    for line in valid:
        value = line.get(metric)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if best[0] is None or (value < best[0] if lower else value > best[0]):
            best = (value, line["step"])
    return best


def is_plateau(best_step: int, steps: int) -> bool:
    """Whether the best validation value, reached at ``best_step``, came no later than
    ``1 - PLATEAU_FRACTION`` of ``steps``: the last 20% of the steps did not improve on it."""
    return best_step <= (1 - PLATEAU_FRACTION) * steps
