"""Paper checks: Section 7.1's readings of Fig. 1 (addition) and Fig. 2 (copy) against the tasks'
baselines and against each other, from the kept ``fig1-addition`` and ``fig2-copy`` results.

A model beats a baseline when its test metric (MSE for addition, cross entropy for copy) is below
``(1 - BEAT_MARGIN)`` times the baseline; over seeds a model beats it when every seed does, fails to
when no seed does, and is undecided otherwise (an undecided model makes a claim ``inconclusive``).
A seed whose training diverged counts as a seed with an infinite loss: it beats nothing.
At L = 100 the check reads "IRNN fails" against the baseline and "LSTM converges much slower" from the
first validation step at which each seed's MSE falls below :data:`REACHED` x baseline (a seed that never
does, or diverged, reaches it at infinity); at L = 30 "the gradients w.r.t. first cell do not vanish for
all models" from each seed's ||dL/dh^(0)|| at the end of training against Fig. 1's :data:`VANISHED`.
The baselines are the tasks' own (:mod:`spectral_analysis.paper.baselines` checks them): predicting 1
for addition, ``2/12`` (the paper's 0.167); the memoryless copy strategy, ``10 log 8 / (T + 20)``.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from spectral_analysis.checks import CheckRecord
from spectral_analysis.data.synthetic import COPY_LENGTH, DATA_SYMBOLS
from spectral_analysis.experiments.fitness import diverged
from spectral_analysis.experiments.groups import Group
from spectral_analysis.experiments.reading import KeptGrid
from spectral_analysis.experiments.results import read_curves
from spectral_analysis.experiments.row_status import plateau_count
from spectral_analysis.paper.experiments import VANISHED
from spectral_analysis.paper.kept import beats, every, judged, records_from_readers, seed_by_seed

BEAT_MARGIN = 0.02
ADDITION_BASELINE = 2.0 / 12.0
FIG1, FIG2 = "ICML Section 7.1 (Fig. 1)", "ICML Section 7.1 (Fig. 2)"
SHALLOW_QUOTE = ("when the network is not deep (temporal dimension L=30 in (a)(d)), every model outperforms "
                 "the baseline of 0.167")
DEEP_QUOTE = ("If we further increase the sequence length (L=300 in (c)(f)), only Spectral-RNN and oRNN are "
              "able to beat the baseline within a reasonable number of iterations")
MIDDLE_QUOTE = ("on longer sequences (L=100 in (b)(e)), IRNN fails and LSTM converges much slower than "
                "Spectral-RNN and oRNN")
SHALLOW_GRADIENT_QUOTE = "Also, the gradients w.r.t. first cell do not vanish for all models"
MIDDLE_LENGTH = 100
REACHED = 0.05  # "converges": the validation MSE below this share of the baseline (0.0083)
MUCH_SLOWER = 2.0  # "much slower": every seed reaches it later than this factor x the others' slowest
BEST_QUOTE = "Spectral-RNN consistently outperforms all other models"
LAG_QUOTE = "IRNN and LSTM models are not able to beat the baseline when the time lag is large"
CLOSE_QUOTE = ("In fact, the test MSE for RNN/LSTM is very close to the baseline (memoryless strategy) "
               "indicating that they do not memorize any useful information throughout the larger time lag")
CLOSE = 0.05  # "very close to the baseline": a seed's test loss within this share of it, either side

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
    lost_seeds = Counter((r["variant"], int(r["axes"]["length"])) for r in filter(diverged, grid.failed))
    for g in grid.groups:
        length, s = int(g.axes["length"]), g.final()
        lost_here = lost_seeds.pop((g.variant, length), 0)
        panels.setdefault(length, {})[g.variant] = (s.mean, s.low, math.inf if lost_here else s.high)
        seeds.setdefault(length, {})[g.variant] = g.seeds + lost_here
        lost.setdefault(length, {})[g.variant] = lost_here
    for (variant, length), lost_here in lost_seeds.items():  # no seed finished
        panels.setdefault(length, {})[variant] = (math.inf, math.inf, math.inf)
        seeds.setdefault(length, {})[variant] = lost.setdefault(length, {})[variant] = lost_here
    return dict(sorted(panels.items())), seeds, lost


def spread_text(s: Spread, seeds: int, lost: int) -> str:
    """``mean [min, max]`` over seeds; a diverged seed is counted (``1 of 3 seeds diverged``) in place of
    the maximum it has not got, and ``all 3 seeds diverged`` where no seed finished."""
    if math.isinf(s[0]):
        return f"all {seeds} seeds diverged"
    high = f"{lost} of {seeds} seeds diverged" if math.isinf(s[2]) else f"{s[2]:.4g}"
    return f"{s[0]:.4g} [{s[1]:.4g}, {high}]"


def listing(spreads: dict[str, Spread], baseline: float, seeds: dict[str, int], lost: dict[str, int]) -> str:
    """Each model's :func:`spread_text` against ``baseline``, lowest first."""
    return ", ".join(f"{m} {spread_text(s, seeds[m], lost[m])} ({against_baseline(s, baseline)})"
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
    return [*records, *middle_records(grid, panels, seeds, lost), shallow_gradient_record(grid, seeds)]


def slower(slow: list[float], fast: list[float], factor: float = MUCH_SLOWER) -> str:
    """"``slow`` converges much slower than ``fast``" over seeds' steps to convergence: ``holds`` when its
    fastest seed is later than ``factor`` x the other's slowest, ``differs`` when its slowest is no later
    than the other's fastest (not slower at all), else ``inconclusive``."""
    if min(slow) > factor * max(fast):
        return "holds"
    return "differs" if max(slow) <= min(fast) else "inconclusive"


def steps_to_reach(group: Group | None, lost: int, level: float) -> list[float]:
    """Each finished seed's first validation step with MSE below ``level`` (infinite when it never is), and
    infinity for each of the ``lost`` seeds that diverged (:func:`panels_of`; ``group`` is ``None`` where
    no seed finished)."""
    reached = []
    for d in group.dirs if group is not None else []:
        valid = read_curves(d)["valid"]
        below = np.flatnonzero(valid["mse"] < level)
        reached.append(float(valid["step"][below[0]]) if len(below) else math.inf)
    return reached + [math.inf] * lost


def middle_records(grid: KeptGrid, panels: dict[int, dict[str, Spread]], seeds: dict[int, dict[str, int]],
                   lost: dict[int, dict[str, int]]) -> list[CheckRecord]:
    """L = 100: "IRNN fails" (it does not beat the baseline) and "LSTM converges much slower than
    Spectral-RNN and oRNN" (:func:`slower` on :func:`steps_to_reach`)."""
    length = MIDDLE_LENGTH
    if length not in panels or not {"irnn", "lstm", "spectral", "ornn"} <= set(panels[length]):
        return []
    irnn = against_baseline(panels[length]["irnn"], ADDITION_BASELINE)
    fails = judged(grid, CheckRecord(
        FIG1, f"IRNN does not beat the baseline (L = {length})",
        {"fails": "holds", "beats": "differs"}.get(irnn, "inconclusive"),
        f"addition L = {length}: test MSE against the baseline {ADDITION_BASELINE:.4f} (beats: every seed "
        f"below {1 - BEAT_MARGIN:g} x baseline): " + listing({"irnn": panels[length]["irnn"]},
                                                              ADDITION_BASELINE, seeds[length], lost[length]),
        {"test_mse": panels[length]["irnn"], "baseline": ADDITION_BASELINE}, quote=MIDDLE_QUOTE),
        seeds[length]["irnn"])
    level = REACHED * ADDITION_BASELINE
    reach = {m: steps_to_reach(grid.group(m, length=length), lost[length][m], level)
             for m in ("lstm", "spectral", "ornn")}
    verdict = every([slower(reach["lstm"], reach[m]) for m in ("spectral", "ornn")])
    shown = "; ".join(f"{m} " + ", ".join("never" if math.isinf(v) else f"{v:.0f}" for v in steps)
                      for m, steps in reach.items())
    converges = judged(grid, CheckRecord(
        FIG1, f"LSTM converges much slower than Spectral-RNN and oRNN (L = {length}): each LSTM seed reaches "
              f"a validation MSE below {REACHED:g} x baseline later than {MUCH_SLOWER:g} x their slowest",
        verdict, f"addition L = {length}: first validation step below {level:.4g} per seed: {shown}",
        {"steps_to_reach": reach, "level": level}, quote=MIDDLE_QUOTE),
        min(seeds[length][m] for m in reach))
    return [fails, converges]


def shallow_gradient_record(grid: KeptGrid, seeds: dict[int, dict[str, int]]) -> CheckRecord:
    """L = 30: every model's gradient at the first cell stays alive (each seed's median ||dL/dh0|| over
    its last 5 records at or above :data:`VANISHED`): ``holds`` when every seed's does, ``differs`` when
    every seed of some model vanished, else ``inconclusive``."""
    length = min(seeds)
    gradients = {g.variant: g.last_per_seed("train", "grad_h0_norm")
                 for g in grid.groups if int(g.axes["length"]) == length}
    alive = {m: [v >= VANISHED for v in values] for m, values in gradients.items()}
    verdict = seed_by_seed(alive)
    shown = "; ".join(f"{m} " + ", ".join(f"{v:.2e}" for v in values) for m, values in gradients.items())
    return judged(grid, CheckRecord(
        FIG1, f"the gradient at the first cell does not vanish for any model (L = {length})", verdict,
        f"addition L = {length}: ||dL/dh^(0)|| per seed at the end of training (median of its last 5 "
        f"records; vanished: < {VANISHED:g}): {shown}",
        {"grad_h0_norm": gradients, "vanished_below": VANISHED},
        quote=SHALLOW_GRADIENT_QUOTE), min(seeds[length].values()))


def lag_readings(grid: KeptGrid, panels: dict[int, dict[str, Spread]]) -> tuple[dict[int, str], str]:
    """Fig. 2's "consistently outperforms" lag by lag: each lag's :func:`best_everywhere`, and a sentence
    saying which lags carry a ``differs`` and how many of their trials trained to a plateau. The paper's
    lags are in its figure only, which the text lost, so every lag here is this project's choice."""
    per_lag = {lag: best_everywhere({lag: panel}) for lag, panel in panels.items()}
    plateaued = {lag: plateau_count([r for g in grid.groups if int(g.axes["length"]) == lag for r in g.rows])
                 for lag in panels}
    readings = ", ".join(f"T = {lag} {v} ({plateaued[lag]} trials plateaued)" for lag, v in per_lag.items())
    against = [lag for lag, v in per_lag.items() if v == "differs"]
    carried = (f"; the verdict rests on T = {', '.join(map(str, against))} alone, lags this project chose "
               "(the paper's lags are in its figure, which the text does not give)" if against else "")
    return per_lag, f"lag by lag: {readings}{carried}"


def copy_records(grid: KeptGrid) -> list[CheckRecord]:
    panels, seeds, lost = panels_of(grid)
    ranking = "; ".join(f"T = {lag}: " + listing(s, copy_baseline(lag), seeds[lag], lost[lag])
                        for lag, s in panels.items())
    per_lag, readings = lag_readings(grid, panels)
    best = judged(grid, CheckRecord(
        FIG2, "Spectral-RNN has the lowest test cross entropy at every time lag", best_everywhere(panels),
        f"{readings}. Copy, test cross entropy (mean [min, max]), lowest first, against the memoryless "
        "baseline: " + ranking, {"test_cross_entropy": panels, "per_lag": per_lag}, quote=BEST_QUOTE),
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
    near = {m: [abs(v / copy_baseline(lag) - 1) <= CLOSE for v in grid.group(m, length=lag).final_per_seed()]
            + [False] * lost[lag][m] for m in ("rnn", "lstm") if grid.group(m, length=lag) is not None}
    near_verdict = seed_by_seed(near)
    close = judged(grid, CheckRecord(
        FIG2, f"the RNN's and the LSTM's test cross entropy is within {CLOSE:.0%} of the memoryless baseline "
              f"at the largest lag (T = {lag}), every seed", near_verdict,
        f"copy T = {lag}, baseline {copy_baseline(lag):.4f}: "
        + listing({m: panels[lag][m] for m in near}, copy_baseline(lag), seeds[lag], lost[lag])
        + "; seeds within " + ", ".join(f"{m} {sum(v)} of {len(v)}" for m, v in near.items()),
        {"within": near, "baseline": copy_baseline(lag)}, quote=CLOSE_QUOTE),
        min((seeds[lag][m] for m in near), default=0))
    return [best, stuck, close]


def run(quick: bool = True) -> list[CheckRecord]:
    """The claims from kept results (``quick`` is accepted for the common interface)."""
    return records_from_readers((("fig1-addition", FIG1, (SHALLOW_QUOTE, DEEP_QUOTE, MIDDLE_QUOTE,
                                                           SHALLOW_GRADIENT_QUOTE), addition_records),
                                 ("fig2-copy", FIG2, (BEST_QUOTE, LAG_QUOTE, CLOSE_QUOTE), copy_records)))
