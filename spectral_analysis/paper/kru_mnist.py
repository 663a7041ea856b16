"""Paper checks: KRU's pixel-MNIST claims (Section 4.3, Table 2), from the kept ``kru-mnist`` results.

KRU's Table 2 quotes its baselines from their papers; the toolkit trains KRU (N = 512) and, by KRU's
recipe, the LSTM (n = 128), so both claims are read as KRU against that LSTM, over seeds
(:func:`~spectral_analysis.paper.kept.beats`):
- "KRU achieves state of the art performance on pixel by pixel permuted MNIST": KRU's permuted-MNIST test
  accuracy above the LSTM's;
- "On the unpermuted task LSTM achieve the state of the art performance": the LSTM's pixel-MNIST test
  accuracy above KRU's.
"""

from __future__ import annotations

from spectral_analysis.checks import CheckRecord
from spectral_analysis.experiments.reading import KeptGrid
from spectral_analysis.paper.kept import beats, judged, missing_record, records_from_readers, spread_text

SOURCE = "KRU Section 4.3 (Table 2, pixel MNIST)"
PERMUTED_QUOTE = "KRU achieves state of the art performance on pixel by pixel permuted MNIST"
UNPERMUTED_QUOTE = "On the unpermuted task LSTM achieve the state of the art performance"
CLAIMS = (  # (quote, task, the claimed winner, the other model)
    (PERMUTED_QUOTE, "permuted-mnist", "kru", "lstm"),
    (UNPERMUTED_QUOTE, "mnist", "lstm", "kru"),
)


def records(grid: KeptGrid) -> list[CheckRecord]:
    """One record per claim; a claim whose two configurations are not both kept is ``unverified``."""
    accuracy = {(g.variant, g.axes.get("task")): g.final_per_seed() for g in grid.groups}
    seeds = {(g.variant, g.axes.get("task")): g.seeds for g in grid.groups}
    out = []
    for quote, task, winner, other in CLAIMS:
        if (winner, task) not in accuracy or (other, task) not in accuracy:
            out.append(missing_record(SOURCE, quote, "kru-mnist", quote))
            continue
        won, lost = accuracy[(winner, task)], accuracy[(other, task)]
        record = CheckRecord(
            SOURCE, f"{winner} has a higher {task} test accuracy than {other} (both trained by KRU's recipe)",
            beats(won, lost), f"{task}, test accuracy mean [min, max] over seeds: {winner} "
            f"{spread_text(won, '.3f')}, {other} {spread_text(lost, '.3f')}",
            {"test_accuracy": {winner: won, other: lost}}, quote=quote)
        out.append(judged(grid, record, min(seeds[(winner, task)], seeds[(other, task)])))
    return out


def run(quick: bool = True) -> list[CheckRecord]:
    """The two claims from kept results (``quick`` is accepted for the common interface)."""
    return records_from_readers((("kru-mnist", SOURCE, (PERMUTED_QUOTE, UNPERMUTED_QUOTE), records),))
