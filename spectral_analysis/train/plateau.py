"""The plateau criterion of paper-scale training: no improvement of the validation metric over the last
:data:`PLATEAU_FRACTION` of the steps, where an improvement is any (``plateau_min_delta`` 0) or one larger
than the run's ``plateau_min_delta`` (a solved task's loss shrinking by 1e-10 is no progress). The trainer
uses it to stop a run with ``max_steps``; the kept results report it per trial. Also the count of epochs
that brought no improvement, which cuts the learning rate under KRU's schedule (Section 4.4)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

PLATEAU_FRACTION = 0.2  # "no improvement over the last 20% of the steps"
LOWER_IS_BETTER = ("mse", "cross_entropy", "perplexity", "loss", "nll")


def _scored(valid: Iterable[dict[str, Any]], metric: str) -> Iterable[tuple[float, int]]:
    """``(value, step)`` of the validation lines that record ``metric`` as a number."""
    for line in valid:
        value = line.get(metric)
        if not isinstance(value, bool) and isinstance(value, int | float):
            yield value, line["step"]


def best_validation(valid: Iterable[dict[str, Any]], metric: str) -> tuple[float | None, int | None]:
    """``(value, step)`` of the best ``metric`` among validation lines (the earliest on a tie: a later
    equal value is no improvement), or ``(None, None)`` when none records it."""
    best: tuple[float | None, int | None] = (None, None)
    lower = metric in LOWER_IS_BETTER
    for value, step in _scored(valid, metric):
        if best[0] is None or (value < best[0] if lower else value > best[0]):
            best = (value, step)
    return best


def last_improvement_step(valid: Iterable[dict[str, Any]], metric: str, min_delta: float = 0.0) -> int | None:
    """The step of the last validation line that improved on the reference by more than ``min_delta``;
    the reference is the value at the last such line, so small gains count once together they pass
    ``min_delta`` (as Keras' ``EarlyStopping(min_delta=...)``). With ``min_delta`` 0 it is
    :func:`best_validation`'s step."""
    reference: float | None = None
    step: int | None = None
    sign = 1.0 if metric in LOWER_IS_BETTER else -1.0
    for value, at in _scored(valid, metric):
        if reference is None or sign * (reference - value) > min_delta:
            reference, step = value, at
    return step


def is_plateau(best_step: int, steps: int) -> bool:
    """Whether the best validation value, reached at ``best_step``, came no later than
    ``1 - PLATEAU_FRACTION`` of ``steps``: the last 20% of the steps did not improve on it."""
    return best_step <= (1 - PLATEAU_FRACTION) * steps


def epochs_without_improvement(valid: Iterable[dict[str, Any]], metric: str, steps_per_epoch: int,
                               until: int) -> int:
    """How many epoch ends up to step ``until`` (validation lines at multiples of ``steps_per_epoch``) did
    not improve ``metric`` on every earlier epoch end: KRU's "If we do not see an improvement in the
    validation BPC after each epoch then the learning rate is decreased" counts these."""
    ends = [line for line in valid if line["step"] % steps_per_epoch == 0 and line["step"] <= until
            and isinstance(line.get(metric), int | float)]
    return sum(best_validation(ends[:i + 1], metric)[1] != line["step"] for i, line in enumerate(ends)
               if i > 0)
