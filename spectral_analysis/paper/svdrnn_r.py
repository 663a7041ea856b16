"""Paper check: the earlier version's Fig. 2(a) (row MNIST, 28 steps, n = 20), read from the kept
``svdrnn-fig2-r`` results (svdRNN at r = 0.01, 0.1, 0.5, 1 beside oRNN and RNN).

- "the svdRNN algorithms have the best performance": the best svdRNN (by mean test accuracy) against
  every other model by :func:`~spectral_analysis.paper.kept.beats` over seeds.
- "the choice of r ... does not have much influence on the final precision": the spread of the mean
  test accuracies over r against :data:`MUCH` (one point of accuracy). Holds when the spread is within
  ``MUCH`` or within the largest seed-to-seed range of a single r (the noise); differs when the best r's
  worst seed beats the worst r's best seed by more than ``MUCH``; inconclusive otherwise.
"""

from __future__ import annotations

from spectral_analysis.checks import CheckRecord
from spectral_analysis.experiments.reading import KeptGrid
from spectral_analysis.paper.kept import beats, every, judged, kept_grid, missing_record

SOURCE = "svdRNN (earlier version) Section 7.2 (Fig. 2(a))"
EXPERIMENT = "svdrnn-fig2-r"
BEST_QUOTE = "It can be seen that the svdRNN algorithms have the best performance"
R_QUOTE = ("the choice of r (the amount that singular values are allowed to deviate from 1) does not have "
           "much influence on the final precision")
MUCH = 0.01  # one point of test accuracy


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


def r_verdict(accuracy: dict[str, tuple[float, float, float]]) -> str:
    svd = [v for k, v in accuracy.items() if k.startswith("spectral")]
    if len(svd) < 2:
        return "unverified"
    best, worst = max(svd), min(svd)
    noise = max(high - low for _, low, high in svd)
    if best[0] - worst[0] <= max(MUCH, noise):
        return "holds"
    return "differs" if best[1] - worst[2] > MUCH else "inconclusive"


def records_from_grid(grid: KeptGrid) -> list[CheckRecord]:
    accuracy = accuracies(grid)
    table = ", ".join(f"{m} {a[0]:.4f} [{a[1]:.4f}, {a[2]:.4f}]"
                      for m, a in sorted(accuracy.items(), key=lambda x: -x[1][0]))
    hidden = grid.groups[0].rows[0]["hidden"]
    evidence = f"row MNIST, T = 28, n = {hidden}: test accuracy (mean [min, max]), best first: {table}"
    svd = [a[0] for m, a in accuracy.items() if m.startswith("spectral")]
    spread = max(svd) - min(svd) if svd else float("nan")
    numbers = {"test_accuracy": accuracy, "r_spread": spread}
    best = CheckRecord(SOURCE, "svdRNN has the best test accuracy (against the RNN and oRNN run here)",
                       best_verdict(accuracy), evidence, numbers, quote=BEST_QUOTE)
    r = CheckRecord(SOURCE, "the choice of r has little influence on the final accuracy", r_verdict(accuracy),
                    f"{evidence}; spread of the svdRNN means over r: {spread:.4f} (little: within {MUCH} or "
                    "the seed-to-seed range)", numbers, quote=R_QUOTE)
    return [judged(grid, best), judged(grid, r)]


def run(quick: bool = True) -> list[CheckRecord]:
    """Both claims from kept results (``quick`` is accepted for the common interface)."""
    grid = kept_grid(EXPERIMENT)
    if grid is None:
        return [missing_record(SOURCE, "svdRNN best; r has little influence", EXPERIMENT, R_QUOTE)]
    return records_from_grid(grid)
