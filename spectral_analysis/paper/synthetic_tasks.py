"""Paper checks: Section 7.1's readings of Fig. 1 (addition) and Fig. 2 (copy) against the tasks'
baselines and against each other, from the kept ``fig1-addition`` and ``fig2-copy`` results.

A model beats a baseline when its test metric (MSE for addition, cross entropy for copy) is below
``(1 - BEAT_MARGIN)`` times the baseline; over seeds a model beats it when every seed does, fails to
when no seed does, and is undecided otherwise (an undecided model makes a claim ``inconclusive``).
A seed whose training diverged counts as a seed with an infinite loss: it beats nothing.
The baselines are the tasks' own (:mod:`spectral_analysis.paper.baselines` checks them): predicting 1
for addition, ``2/12`` (the paper's 0.167); the memoryless copy strategy, ``10 log 8 / (T + 20)``.
"""

from __future__ import annotations

import math
from collections import Counter

from spectral_analysis.checks import CheckRecord
from spectral_analysis.data.synthetic import COPY_LENGTH, DATA_SYMBOLS
from spectral_analysis.experiments.reading import KeptGrid
from spectral_analysis.paper.kept import beats, every, judged, records_from_readers

BEAT_MARGIN = 0.02
ADDITION_BASELINE = 2.0 / 12.0
FIG1, FIG2 = "ICML Section 7.1 (Fig. 1)", "ICML Section 7.1 (Fig. 2)"
SHALLOW_QUOTE = ("when the network is not deep (temporal dimension L=30 in (a)(d)), every model outperforms "
                 "the baseline of 0.167")
DEEP_QUOTE = ("If we further increase the sequence length (L=300 in (c)(f)), only Spectral-RNN and oRNN are "
              "able to beat the baseline within a reasonable number of iterations")
BEST_QUOTE = "Spectral-RNN consistently outperforms all other models"
LAG_QUOTE = "IRNN and LSTM models are not able to beat the baseline when the time lag is large"

Spread = tuple[float, float, float]  # mean, min, max over seeds (max infinite when a seed diverged)


def copy_baseline(lag: int) -> float:
    """The memoryless cross entropy of the copy task with time lag ``lag``: ``10 log 8 / (T + 20)``."""
    return COPY_LENGTH * math.log(DATA_SYMBOLS) / (lag + 2 * COPY_LENGTH)


def against_baseline(spread: Spread, baseline: float) -> str:
    """``beats`` (every seed below the margin), ``fails`` (no seed) or ``undecided``."""
    line = (1 - BEAT_MARGIN) * baseline
    _, low, high = spread
    if high < line:
        return "beats"
    return "fails" if low >= line else "undecided"


def only_these_beat(spreads: dict[str, Spread], baseline: float, winners: set[str]) -> str:
    """``holds`` when exactly ``winners`` beat the baseline (``winners`` = all models: every model does),
    ``differs`` when a winner fails or another model beats it, else ``inconclusive``."""
    outcome = {m: against_baseline(s, baseline) for m, s in spreads.items()}
    wrong = [m for m, o in outcome.items() if o == ("fails" if m in winners else "beats")]
    if wrong:
        return "differs"
    right = all(o == ("beats" if m in winners else "fails") for m, o in outcome.items())
    return "holds" if right else "inconclusive"


def best_everywhere(panels: dict[int, dict[str, Spread]], best: str = "spectral") -> str:
    """``best`` against every other model in every panel by :func:`beats` (lower is better)."""
    outcomes = [beats([s[best][1], s[best][2]], [v[1], v[2]], higher_is_better=False)
                for s in panels.values() if best in s for m, v in s.items() if m != best]
    if not outcomes:
        return "unverified"
    return every(outcomes)


def panels_of(grid: KeptGrid) -> tuple[dict[int, dict[str, Spread]], dict[int, dict[str, int]],
                                       dict[int, dict[str, int]]]:
    """``{length: {model: (mean, min, max)}}`` of the primary test metric over the finished seeds (max
    infinite where a seed diverged; all three where every seed did: it beats no baseline),
    ``{length: {model: seeds}}`` counting the diverged ones, and ``{length: {model: diverged seeds}}``."""
    panels: dict[int, dict[str, Spread]] = {}
    seeds: dict[int, dict[str, int]] = {}
    lost: dict[int, dict[str, int]] = {}
    diverged = Counter((r["variant"], int(r["axes"]["length"])) for r in grid.failed)
    for g in grid.groups:
        length, s = int(g.axes["length"]), g.final()
        lost_here = diverged.pop((g.variant, length), 0)
        panels.setdefault(length, {})[g.variant] = (s.mean, s.low, math.inf if lost_here else s.high)
        seeds.setdefault(length, {})[g.variant] = g.seeds + lost_here
        lost.setdefault(length, {})[g.variant] = lost_here
    for (variant, length), lost_here in diverged.items():  # no seed finished
        panels.setdefault(length, {})[variant] = (math.inf, math.inf, math.inf)
        seeds.setdefault(length, {})[variant] = lost.setdefault(length, {})[variant] = lost_here
    return dict(sorted(panels.items())), seeds, lost


def listing(spreads: dict[str, Spread], baseline: float, seeds: dict[str, int], lost: dict[str, int]) -> str:
    """Each model's ``mean [min, max]`` against ``baseline``, lowest first; a diverged seed is counted
    (``1 of 3 seeds diverged``) in place of the maximum it has not got."""
    def spread(model: str, s: Spread) -> str:
        if math.isinf(s[0]):
            return f"all {seeds[model]} seeds diverged"
        high = f"{lost[model]} of {seeds[model]} seeds diverged" if math.isinf(s[2]) else f"{s[2]:.4g}"
        return f"{s[0]:.4g} [{s[1]:.4g}, {high}]"

    return ", ".join(f"{m} {spread(m, s)} ({against_baseline(s, baseline)})"
                     for m, s in sorted(spreads.items(), key=lambda x: x[1][0]))


def addition_records(grid: KeptGrid) -> list[CheckRecord]:
    (panels, seeds, lost), records = panels_of(grid), []
    claims = ((min(panels), SHALLOW_QUOTE, set(panels[min(panels)])),
              (max(panels), DEEP_QUOTE, {"spectral", "ornn"}))
    for length, quote, winners in claims:
        spreads = panels[length]
        evidence = (f"addition L = {length}: test MSE (mean [min, max]) against the baseline "
                    f"{ADDITION_BASELINE:.4f} (beats: every seed below {1 - BEAT_MARGIN:g} x baseline): "
                    + listing(spreads, ADDITION_BASELINE, seeds[length], lost[length]))
        claim = ("every model beats the baseline" if winners == set(spreads)
                 else "only " + " and ".join(sorted(winners)) + " beat the baseline") + f" (L = {length})"
        record = CheckRecord(FIG1, claim, only_these_beat(spreads, ADDITION_BASELINE, winners), evidence,
                             {"test_mse": spreads, "baseline": ADDITION_BASELINE}, quote=quote)
        records.append(judged(grid, record, min(seeds[length].values())))
    return records


def copy_records(grid: KeptGrid) -> list[CheckRecord]:
    panels, seeds, lost = panels_of(grid)
    ranking = "; ".join(f"T = {lag}: " + listing(s, copy_baseline(lag), seeds[lag], lost[lag])
                        for lag, s in panels.items())
    best = judged(grid, CheckRecord(
        FIG2, "Spectral-RNN has the lowest test cross entropy at every time lag", best_everywhere(panels),
        "copy, test cross entropy (mean [min, max]), lowest first, against the memoryless baseline: "
        + ranking, {"test_cross_entropy": panels}, quote=BEST_QUOTE),
        min(n for s in seeds.values() for n in s.values()))
    lag = max(panels)
    named = {m: s for m, s in panels[lag].items() if m in ("irnn", "lstm")}
    outcome = {m: against_baseline(s, copy_baseline(lag)) for m, s in named.items()}
    verdict = ("differs" if "beats" in outcome.values() else
               "holds" if named and all(o == "fails" for o in outcome.values()) else "inconclusive")
    stuck = judged(grid, CheckRecord(
        FIG2, f"IRNN and LSTM do not beat the memoryless baseline at the largest lag (T = {lag})", verdict,
        f"copy T = {lag}, baseline {copy_baseline(lag):.4f}: "
        + listing(named, copy_baseline(lag), seeds[lag], lost[lag]),
        {"test_cross_entropy": named, "baseline": copy_baseline(lag)}, quote=LAG_QUOTE),
        min((seeds[lag][m] for m in named), default=0))
    return [best, stuck]


def run(quick: bool = True) -> list[CheckRecord]:
    """The four claims from kept results (``quick`` is accepted for the common interface)."""
    return records_from_readers((("fig1-addition", FIG1, (SHALLOW_QUOTE, DEEP_QUOTE), addition_records),
                                 ("fig2-copy", FIG2, (BEST_QUOTE, LAG_QUOTE), copy_records)))
