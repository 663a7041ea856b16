"""Paper check: the earlier version's Fig. 2(a) (row MNIST, 28 steps, n = 20), read from the kept
``svdrnn-fig2-r`` results (svdRNN at r = 0.01, 0.1, 0.5, 1 beside oRNN and RNN).

- "the svdRNN algorithms have the best performance": the best svdRNN (by mean test accuracy) against
  every other model by :func:`~spectral_analysis.paper.kept.beats` over seeds.
- "the choice of r ... does not have much influence on the final precision": the spread of the mean
  test accuracies over r. Holds when it is within :data:`MUCH` (one point of accuracy); differs when it
  passes both ``MUCH`` and the spread that seed noise alone reaches (:func:`seed_tolerance`, derived
  from the seeds); inconclusive otherwise (more than a point, but within what the seeds cannot resolve).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import studentized_range

from spectral_analysis.checks import CheckRecord
from spectral_analysis.experiments.reading import KeptGrid
from spectral_analysis.paper.kept import beats, every, judged, kept_grid, missing_record

SOURCE = "svdRNN (earlier version) Section 7.2 (Fig. 2(a))"
EXPERIMENT = "svdrnn-fig2-r"
BEST_QUOTE = "It can be seen that the svdRNN algorithms have the best performance"
R_QUOTE = ("the choice of r (the amount that singular values are allowed to deviate from 1) does not have "
           "much influence on the final precision")
MUCH = 0.01  # one point of test accuracy
CONFIDENCE = 0.95


def accuracies(grid: KeptGrid) -> dict[str, tuple[float, float, float]]:
    """Each variant's test accuracy: (mean, min, max) over seeds."""
    return {g.variant: (s.mean, s.low, s.high) for g in grid.groups for s in [g.final()]}


def best_verdict(accuracy: dict[str, tuple[float, float, float]]) -> str:
    svd = {k: v for k, v in accuracy.items() if k.startswith("spectral")}
    others = {k: v for k, v in accuracy.items() if not k.startswith("spectral")}
    if not svd or not others:
        return "unverified"
    _, low, high = max(svd.values())
    outcomes = [beats([low, high], [v[1], v[2]]) for v in others.values()]
    return every(outcomes)


def seed_tolerance(per_seed: dict[str, list[float]]) -> float:
    """The spread of the group means that seed noise alone stays under with probability
    :data:`CONFIDENCE` (Tukey's honest significant difference): the studentized range quantile
    q(CONFIDENCE; groups, df) times the pooled seed standard deviation over sqrt(seeds per group).

    >>> round(seed_tolerance({"a": [0.90, 0.91, 0.92], "b": [0.89, 0.90, 0.91]}), 4)
    0.0227
    """
    groups = [np.asarray(v, dtype=float) for v in per_seed.values()]
    df = sum(len(g) - 1 for g in groups)
    pooled = math.sqrt(sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / df)
    quantile = float(studentized_range.ppf(CONFIDENCE, len(groups), df))
    return quantile * pooled / math.sqrt(min(map(len, groups)))


def r_verdict(per_seed: dict[str, list[float]]) -> tuple[str, float, float]:
    """The r claim from each variant's per-seed test accuracies: (verdict, spread of the svdRNN means over
    r, :func:`seed_tolerance` of the svdRNNs)."""
    svd = {k: v for k, v in per_seed.items() if k.startswith("spectral")}
    if len(svd) < 2 or any(len(v) < 2 for v in svd.values()):
        return "unverified", math.nan, math.nan
    means = [float(np.mean(v)) for v in svd.values()]
    spread, tolerance = max(means) - min(means), seed_tolerance(svd)
    if spread <= MUCH:
        return "holds", spread, tolerance
    return ("differs" if spread > tolerance else "inconclusive"), spread, tolerance


def records_from_grid(grid: KeptGrid) -> list[CheckRecord]:
    accuracy = accuracies(grid)
    table = ", ".join(f"{m} {a[0]:.4f} [{a[1]:.4f}, {a[2]:.4f}]"
                      for m, a in sorted(accuracy.items(), key=lambda x: -x[1][0]))
    hidden = grid.groups[0].rows[0]["hidden"]
    evidence = f"row MNIST, T = 28, n = {hidden}: test accuracy (mean [min, max]), best first: {table}"
    per_seed = {g.variant: g.final_per_seed() for g in grid.groups}
    verdict, spread, tolerance = r_verdict(per_seed)
    svd = sum(m.startswith("spectral") for m in per_seed)
    numbers = {"test_accuracy": accuracy, "r_spread": spread, "seed_tolerance": tolerance}
    best = CheckRecord(SOURCE, "svdRNN has the best test accuracy (against the RNN and oRNN run here)",
                       best_verdict(accuracy), evidence, numbers, quote=BEST_QUOTE)
    r = CheckRecord(SOURCE, "the choice of r has little influence on the final accuracy", verdict,
                    f"{evidence}; spread of the svdRNN means over r: {spread:.4f}. Little: within {MUCH} "
                    f"(one point). What the seeds resolve: a spread above {tolerance:.4f}, Tukey's "
                    f"studentized range q({CONFIDENCE}; {svd} values of r) x the pooled seed standard "
                    "deviation / sqrt(seeds); a spread above a point but within that is inconclusive",
                    numbers, quote=R_QUOTE)
    return [judged(grid, best), judged(grid, r)]


def run(quick: bool = True) -> list[CheckRecord]:
    """Both claims from kept results (``quick`` is accepted for the common interface)."""
    grid = kept_grid(EXPERIMENT)
    if grid is None:
        return [missing_record(SOURCE, "svdRNN best; r has little influence", EXPERIMENT, R_QUOTE)]
    return records_from_grid(grid)
