"""Paper check: the earlier version's Fig. 2(c, f) (row MNIST, 28 steps, n = 20, leaky ReLU with leak
0, 0.2, 0.5, 1), read from the kept ``svdrnn-fig2-leak`` results.

- "svdRNN ... converge faster and achieve higher accuracy invariant to the amount of the leak factor":
  at every leak, svdRNN against RNN by :func:`~spectral_analysis.paper.kept.beats` over seeds, on the
  test accuracy (higher accuracy) and on the validation accuracy of the first :data:`EARLY_EVALUATIONS`
  evaluations (converges faster).
- "svdRNN could eliminate the gradient vanishing problem on all circumstances, while RNN suffers from
  gradient vanishing when non-linearity is higher": each seed's ||dL/dh0|| (median over its training
  records) at a leak against the same model's linear network (leak 1, where the activation shrinks
  nothing). The gradient vanishes at a leak when it is below :data:`VANISHING_FACTOR` times the linear
  network's: by every seed against every seed (``vanishes``), by none (``kept``), else ``undecided``.
"""

from __future__ import annotations

import numpy as np

from spectral_analysis.checks import CheckRecord
from spectral_analysis.experiments.groups import Group
from spectral_analysis.experiments.reading import KeptGrid
from spectral_analysis.experiments.results import read_curves
from spectral_analysis.paper.kept import beats, every, judged, kept_grid, missing_record, spread_text

SOURCE = "svdRNN (earlier version) Section 7 (Fig. 2(c, f))"
EXPERIMENT = "svdrnn-fig2-leak"
ACCURACY_QUOTE = ("From the figures, we show that svdRNN is resistant to different amount of "
                  "non-linearity, namely converge faster and achieve higher accuracy invariant to the amount "
                  "of the leak factor.")
GRADIENT_QUOTE = ("svdRNN could eliminate the gradient vanishing problem on all circumstances, while RNN "
                  "suffers from gradient vanishing when non-linearity is higher.")
EARLY_EVALUATIONS = 3  # the first three validation points: epochs 1-3 of the 20
VANISHING_FACTOR = 0.1  # an order of magnitude below the linear network's gradient
LINEAR_LEAK = 1.0
SVD, RNN = "spectral", "rnn"


def final_accuracies(group: Group) -> list[float]:
    return [float(row["test_metrics"]["accuracy"]) for row in group.rows]


def early_accuracies(group: Group) -> list[float]:
    """Each seed's mean validation accuracy over its first :data:`EARLY_EVALUATIONS` evaluations."""
    return group.first_per_seed("valid", "accuracy", EARLY_EVALUATIONS)


def gradient_medians(group: Group) -> list[float]:
    """Each seed's median ||dL/dh0|| over its training records."""
    values = [read_curves(d)["train"]["grad_h0_norm"] for d in group.dirs]
    return [float(np.median(v[np.isfinite(v)])) for v in values]


def every_leak_beats(per_leak: dict[float, tuple[list[float], list[float]]]) -> str:
    """``holds`` when svdRNN's seeds beat RNN's at every leak, ``differs`` when RNN's beat svdRNN's at
    some leak, else ``inconclusive`` (``per_leak``: leak -> (svdRNN's seeds, RNN's seeds))."""
    return every([beats(svd, rnn) for svd, rnn in per_leak.values()])


def vanishing(gradients: list[float], linear: list[float]) -> str:
    """``vanishes`` / ``kept`` / ``undecided``: seeds' gradients against the linear network's seeds."""
    line = [VANISHING_FACTOR * g for g in linear]
    if max(gradients) < min(line):
        return "vanishes"
    if min(gradients) >= max(line):
        return "kept"
    return "undecided"


def gradient_verdict(outcomes: dict[str, dict[float, str]]) -> str:
    """The claim: svdRNN keeps its gradient at every leak, RNN's vanishes at the most non-linear (smallest)
    leak. ``outcomes``: model -> leak -> :func:`vanishing`."""
    svd, rnn = outcomes.get(SVD, {}), outcomes.get(RNN, {})
    if not svd or not rnn:
        return "unverified"
    rnn_most_nonlinear = rnn[min(rnn)]
    if "vanishes" in svd.values() or rnn_most_nonlinear == "kept":
        return "differs"
    return "holds" if set(svd.values()) == {"kept"} and rnn_most_nonlinear == "vanishes" else "inconclusive"



def records_from_grid(grid: KeptGrid | None) -> list[CheckRecord]:
    """The claims from a kept grid (``None``: nothing kept, every claim ``unverified``)."""
    leaks = sorted(grid.values("leak")) if grid else []
    groups = {(v, leak): grid.group(v, leak=leak) for v in (SVD, RNN) for leak in leaks}
    if not groups or any(g is None for g in groups.values()):
        return [missing_record(SOURCE, "svdRNN resists the leak; its gradient does not vanish", EXPERIMENT,
                               ACCURACY_QUOTE)]
    seeds = min(g.seeds for g in groups.values())
    setting = f"row MNIST, T = 28, n = {grid.groups[0].rows[0]['hidden']}"
    records = []
    for claim, read in (("achieves a higher test accuracy than RNN at every leak", final_accuracies),
                        (f"converges faster than RNN at every leak (validation accuracy over the first "
                         f"{EARLY_EVALUATIONS} evaluations)", early_accuracies)):
        per_leak = {leak: (read(groups[SVD, leak]), read(groups[RNN, leak])) for leak in leaks}
        evidence = f"{setting}, mean [min, max] over seeds, svdRNN against RNN: " + "; ".join(
            f"leak {leak}: {spread_text(s)} against {spread_text(r)} ({beats(s, r)})"
            for leak, (s, r) in per_leak.items())
        numbers = {str(leak): {SVD: s, RNN: r} for leak, (s, r) in per_leak.items()}
        record = CheckRecord(SOURCE, f"svdRNN {claim}", every_leak_beats(per_leak), evidence, numbers,
                             quote=ACCURACY_QUOTE)
        records.append(judged(grid, record, seeds))
    gradients = {(v, leak): gradient_medians(groups[v, leak]) for v, leak in groups}
    outcomes = {v: {leak: vanishing(gradients[v, leak], gradients[v, LINEAR_LEAK]) for leak in leaks
                    if leak != LINEAR_LEAK} for v in (SVD, RNN)}
    per_model = "; ".join(f"{v} " + ", ".join(
        f"leak {leak} {spread_text(gradients[v, leak])}"
        + (f" ({outcomes[v][leak]})" if leak in outcomes[v] else "") for leak in leaks) for v in (SVD, RNN))
    evidence = (f"{setting}, median ||dL/dh0|| over training, mean [min, max] over seeds; vanishing: below "
                f"{VANISHING_FACTOR} x the same model's linear network (leak {LINEAR_LEAK}) at every seed: "
                f"{per_model}")
    numbers = {v: {str(leak): gradients[v, leak] for leak in leaks} for v in (SVD, RNN)}
    record = CheckRecord(SOURCE, "svdRNN's gradient at the first cell does not vanish at any leak; RNN's "
                         "vanishes at the most non-linear one", gradient_verdict(outcomes), evidence, numbers,
                         quote=GRADIENT_QUOTE)
    return records + [judged(grid, record, seeds)]


def run(quick: bool = True) -> list[CheckRecord]:
    """The three claims from kept results (``quick`` is accepted for the common interface)."""
    return records_from_grid(kept_grid(EXPERIMENT))
