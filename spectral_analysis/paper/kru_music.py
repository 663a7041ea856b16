"""Paper check: KRU's Table 4, JSB Chorales column (Section 4.5), read from the kept ``kru-music``
results (music21's Bach chorales; KRU n = 100, RNN n = 100, LSTM n = 36).

"As we can in the table 4 both our models (KRU and KRU-LSTM) overfit less and generalizes better"
(KRU-LSTM is not in the toolkit), read as two claims about KRU against RNN and LSTM, each by
:func:`~spectral_analysis.paper.kept.beats` over seeds and :func:`~spectral_analysis.paper.kept.every`:

- generalizes better: a lower test NLL per frame;
- overfits less: a smaller gap between the test NLL and the training NLL at the end of training (each
  seed's median over its last :data:`END_RECORDS` training batches).
"""

from __future__ import annotations

from spectral_analysis.checks import CheckRecord
from spectral_analysis.experiments.groups import END_RECORDS, Group
from spectral_analysis.experiments.reading import KeptGrid
from spectral_analysis.paper.kept import (
    beats,
    every,
    judged,
    kept_grid,
    missing_record,
    overfitting_gaps,
    spread_text,
    unfit_trials,
)

SOURCE = "KRU Section 4.5 (Table 4, JSB Chorales)"
EXPERIMENT = "kru-music"
QUOTE = "both our models (KRU and KRU-LSTM) overfit less and generalizes better"
KRU = "kru"
NLL = ".3f"  # how evidence prints an NLL


def final_test_nlls(group: Group) -> list[float]:
    return [float(row["test_metrics"]["nll"]) for row in group.rows]


def nll_gaps(group: Group) -> list[float]:
    """Each seed's test NLL minus its median training NLL over the last :data:`END_RECORDS` records."""
    return overfitting_gaps(group, "nll", END_RECORDS)



def records_from_grid(grid: KeptGrid | None) -> list[CheckRecord]:
    """The claims from a kept grid (``None``: nothing kept, every claim ``unverified``)."""
    kru = grid and grid.group(KRU)
    others = [g for g in grid.groups if g.variant != KRU] if grid else []
    if kru is None or not others:
        return [missing_record(SOURCE, "KRU overfits less and generalizes better", EXPERIMENT, QUOTE)]
    seeds = min(g.seeds for g in grid.groups)
    setting = "music21's Bach chorales, NLL per frame, " + ", ".join(
        f"{g.variant} n = {g.rows[0]['hidden']}" for g in grid.groups)
    records = []
    claims = (("generalizes better: a lower test NLL than RNN and LSTM", final_test_nlls),
              ("overfits less: a smaller test - train NLL gap than RNN and LSTM", nll_gaps))
    for claim, read in claims:
        mine = read(kru)
        outcomes = {g.variant: beats(mine, read(g), higher_is_better=False) for g in others}
        evidence = (f"{setting}; mean [min, max] over seeds: kru {spread_text(mine, NLL)}; " + "; ".join(
            f"{g.variant} {spread_text(read(g), NLL)} ({outcomes[g.variant]})" for g in others))
        record = CheckRecord(SOURCE, f"KRU {claim}", every(list(outcomes.values())), evidence,
                             {g.variant: read(g) for g in grid.groups}, quote=QUOTE)
        # a comparison: an unfit trial of any of the three models leaves nothing to compare
        unfit = unfit_trials(grid, {g.variant: [g] for g in grid.groups})
        records.append(judged(grid, record, seeds, unfit=unfit))
    return records


def run(quick: bool = True) -> list[CheckRecord]:
    """Both claims from kept results (``quick`` is accepted for the common interface)."""
    return records_from_grid(kept_grid(EXPERIMENT))
