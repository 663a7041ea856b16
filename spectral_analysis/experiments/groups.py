"""One configuration of a kept grid over its seeds (:class:`Group`) and the spread of its numbers over
seeds (:class:`Spread`): what the figures, tables and paper checks read from a grid
(:func:`~spectral_analysis.experiments.reading.read_grid`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spectral_analysis.experiments.results import read_curves, read_singular_values
from spectral_analysis.io.zoo import CHECKPOINT_NAME


def _on_steps(steps: np.ndarray, values: np.ndarray, grid: np.ndarray, held: bool = True) -> np.ndarray:
    """``values`` recorded at ``steps``, linearly interpolated onto ``grid`` from their first finite record,
    NaN before it. Past the run's last record its value is held (the run stopped there: its model no
    longer changes), unless that record is not finite or ``held`` is false (a diverged run): then NaN past
    the last finite one."""
    finite = np.isfinite(values)
    if not finite.any():
        return np.full(grid.shape, np.nan)
    known, at = steps[finite], values[finite]
    out = np.interp(grid, known, at)  # np.interp holds the end values outside the recorded range
    out[grid < known[0]] = np.nan
    if known[-1] < steps[-1] or not held:
        out[grid > known[-1]] = np.nan
    return out


ROW_NUMBERS = ("best_valid", "steps", "seconds")  # a summary row's own numbers, read by Group.final
END_RECORDS = 5  # a seed's end of training is its median over this many last records (Group.last_per_seed)


@dataclass
class Spread:
    """Mean, min-max and the median on a log axis over seeds (:func:`log_median`)."""

    mean: np.ndarray | float
    low: np.ndarray | float
    high: np.ndarray | float
    seeds: int
    log_median: np.ndarray | float

    @classmethod
    def over_seeds(cls, stack: np.ndarray) -> Spread:
        """The spread of ``stack``: one value per seed (floats out) or one curve per row (arrays out), NaN
        where a seed has no value; ``seeds`` counts those with any."""
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a step no seed has a value at stays NaN
            numbers = [np.nanmean(stack, 0), np.nanmin(stack, 0), np.nanmax(stack, 0), log_median(stack)]
        seeds = int(np.isfinite(stack.reshape(len(stack), -1)).any(1).sum())
        mean, low, high, median = numbers if stack.ndim > 1 else [float(v) for v in numbers]
        return cls(mean, low, high, seeds, median)


def log_median(stack: np.ndarray) -> np.ndarray:
    """The median over seeds (axis 0) read on a log axis, ``exp(median(log x))``: the middle seed for an odd
    count, the geometric mean of the middle two for an even one. Where seeds differ by orders of magnitude
    the arithmetic mean is the largest seed's curve on a log axis; this is not. A value <= 0 counts as below
    every positive one (a gradient that vanished to 0), NaN as missing."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns stay NaN
        logs = np.where(stack > 0, np.log(np.where(stack > 0, stack, 1.0)), -np.inf)
        return np.exp(np.nanmedian(np.where(np.isnan(stack), np.nan, logs), axis=0))


@dataclass
class Group:
    """One configuration of a grid: the finished trials of every seed, and the kept record of its failed
    ones (``failed_rows``, ``failed_dirs``: diverged runs, up to their divergence)."""

    variant: str
    axes: dict[str, Any]
    rows: list[dict[str, Any]]
    dirs: list[Path]
    failed_rows: list[dict[str, Any]] = field(default_factory=list)
    failed_dirs: list[Path] = field(default_factory=list)

    @property
    def seeds(self) -> int:
        return len(self.rows)

    def curve(self, phase: str, column: str, with_failed: bool = False) -> tuple[np.ndarray, Spread]:
        """``column`` of the ``phase`` curves over seeds (:class:`Spread`). Seeds may record different
        steps (a run trained until plateau stops when it plateaus; kept curves are thinned evenly): the
        curve is read on the union of their steps, each seed interpolated linearly inside its own range
        and held at its last record past it, since a stopped run's model is final. Every seed counts to
        the end, so the mean does not jump where a seed stops (as it would if the mean were taken over
        the seeds still training). ``with_failed`` adds the failed seeds' records, each up to its
        failure only (a diverged run has no model past it), so from there the others' mean goes on."""
        sources = [(d, True) for d in self.dirs] + [(d, False) for d in self.failed_dirs if with_failed]
        curves = [(read_curves(d)[phase], held) for d, held in sources]
        usable = [(c, held) for c, held in curves if column in c and len(c["step"])]
        if not usable:
            return np.array([]), Spread(np.array([]), np.array([]), np.array([]), 0, np.array([]))
        steps = np.unique(np.concatenate([c["step"] for c, _ in usable]))
        stack = np.stack([_on_steps(c["step"], c[column], steps, held) for c, held in usable])
        return steps, Spread.over_seeds(stack)

    def last_per_seed(self, phase: str, column: str, records: int = END_RECORDS) -> list[float]:
        """The end of training: each seed's median of ``column`` over its own last ``records`` records of
        ``phase`` (seeds trained until plateau end at different steps); NaN for a seed without any."""
        values = []
        for d in self.dirs:
            column_values = read_curves(d)[phase].get(column, np.array([]))
            finite = column_values[np.isfinite(column_values)]
            values.append(float(np.median(finite[-records:])) if len(finite) else np.nan)
        return values

    def first_per_seed(self, phase: str, column: str, records: int) -> list[float]:
        """The start of training: each seed's mean of ``column`` over its first ``records`` records of
        ``phase`` (how fast it converges); NaN for a seed without any."""
        values = []
        for d in self.dirs:
            first = read_curves(d)[phase].get(column, np.array([]))[:records]
            values.append(float(np.mean(first)) if len(first) else np.nan)
        return values

    def last(self, phase: str, column: str, records: int = 5) -> Spread:
        """:meth:`last_per_seed` over seeds (:class:`Spread`)."""
        return Spread.over_seeds(np.array(self.last_per_seed(phase, column, records)))

    def final_per_seed(self, source: str = "test_metrics", metric: str | None = None) -> list[float]:
        """A final value of each seed's row: ``source`` is a metrics field (``test_metrics``, ``final_valid``,
        ``final_train``; default metric: the primary one) or a number of the row itself (``best_valid``,
        ``steps``, ``seconds``); NaN for a row without it."""

        def value(row: dict[str, Any]) -> float:
            got = (
                row.get(source)
                if source in ROW_NUMBERS
                else (row.get(source) or {}).get(metric or row["metric"])
            )
            return np.nan if got is None else float(got)

        return [value(r) for r in self.rows]

    def final(self, source: str = "test_metrics", metric: str | None = None) -> Spread:
        """:meth:`final_per_seed` over seeds (:class:`Spread`)."""
        return Spread.over_seeds(np.array(self.final_per_seed(source, metric)))

    def checkpoint(self) -> Path | None:
        """The kept checkpoint (of the zoo's seed, :func:`~spectral_analysis.experiments.results.zoo_seed`),
        or ``None`` when the zoo did not keep one."""
        kept = self._checkpoint_row()
        return None if kept is None else kept[0] / CHECKPOINT_NAME

    def checkpoint_seed(self) -> int | None:
        """The seed of :meth:`checkpoint` (seed 0 unless it failed), or ``None`` without one."""
        kept = self._checkpoint_row()
        return None if kept is None else kept[1]["seed"]

    def _checkpoint_row(self) -> tuple[Path, dict[str, Any]] | None:
        kept = zip(self.dirs, self.rows, strict=True)
        return next(((d, r) for d, r in kept if (d / CHECKPOINT_NAME).is_file()), None)

    def singular_values(self) -> tuple[np.ndarray, list[np.ndarray]] | None:
        for d in self.dirs:
            kept = read_singular_values(d)
            if kept is not None:
                return kept
        return None
