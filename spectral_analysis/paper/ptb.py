"""Paper check: ICML Table 3 (Section 7.3, Penn Treebank word level), read from the kept ``table3-ptb``
results. "As seen in Table 3, Spectral-RNN achieves better performance than LSTM with about half the number
of parameters. Note that 2-layered Spectral-RNN achieves lower test perplexity with higher training
perplexity, which shows its generalization ability." Two claims, each by
:func:`~spectral_analysis.paper.kept.beats` over seeds:

- better than the LSTM: a lower test perplexity than the LSTM of the same depth, at both depths
  (:func:`~spectral_analysis.paper.kept.every`); the parameter counts are the ``parameter-counts`` check's;
- 2 layers: Spectral-RNN(2, 512) has a lower test perplexity *and* a higher training perplexity than
  LSTM(2, 128). The training perplexity is each seed's median over its last :data:`END_RECORDS` training
  records (running batches, as the trainer records them, not a pass over the training set).

The first claim is read again at 1 layer alone, at paper scale, under each recipe of
:data:`ONE_LAYER_PAIRS`: the paper's stated settings, and PyTorch's word_language_model recipe, under which
the same two networks reach the paper's perplexities where the stated settings leave both far above them.
The 2-layer rows cost the most to train, so the 1-layer comparisons are verdicts before the first claim's
whole reading is. Each claim is read from its own rows once they are kept at paper scale (:func:`run`), not
from the whole grid, whose other readings of the recipe are not the claims' subject.
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
    kept_variants,
    missing_record,
    spread_text,
    unfit_trials,
)

SOURCE = "ICML Section 7.3 (Table 3, PTB)"
EXPERIMENT = "table3-ptb"
BETTER_QUOTE = "Spectral-RNN achieves better performance than LSTM with about half the number of parameters"
TWO_LAYER_QUOTE = "2-layered Spectral-RNN achieves lower test perplexity with higher training perplexity"
DEPTHS = {1: ("spectral-1x512", "lstm-1x128"), 2: ("spectral-2x512", "lstm-2x128")}
# As printed: Table 3's (train, test) perplexity of each row
TABLE3_PERPLEXITY = {
    "rnn-1x128": (68.1, 144.7),
    "lstm-1x128": (69.1, 130.7),
    "spectral-1x512": (65.4, 130.2),
    "rnn-2x128": (62.6, 142.5),
    "lstm-2x128": (26.1, 122.7),
    "spectral-2x512": (36.0, 121.3),
}
PPL = ".1f"  # how evidence prints a perplexity
NO_DROPOUT = "the kept 2-layer rows trained without dropout (the paper: \"80% dropout\")"
# the 1-layer pairs (Spectral-RNN, LSTM) by the recipe both trained by: the stated rows (SGD 0.1
# on the window's summed loss, decay 0.8), and the -field rows (SGD lr 20 on the per-word mean, clip 0.25,
# windows of 35 words)
ONE_LAYER_PAIRS = {"the paper's stated settings": DEPTHS[1],
                   "PyTorch's word_language_model recipe": ("spectral-1x512-field", "lstm-1x128-field")}


def one_layer_claim(recipe: str) -> str:
    """The first claim at 1 layer, both networks trained by ``recipe`` (a key of :data:`ONE_LAYER_PAIRS`)."""
    return f"Spectral-RNN(1, 512) has a lower test perplexity than LSTM(1, 128), both trained by {recipe}"


def dropout_text(two_layer: list[Group]) -> str:
    """The dropout the 2-layer rows ``two_layer`` trained with, read off their kept configurations."""
    rates = sorted({((row.get("config") or {}).get("model_options") or {}).get("dropout", 0.0)
                    for g in two_layer for row in g.rows})
    if rates in ([], [0.0]):
        return NO_DROPOUT
    return f"the 2-layer rows' dropout: {', '.join(f'{r:g}' for r in rates)} (the paper's \"80% dropout\")"


def ppl_on_test(group: Group) -> list[float]:
    """Each seed's test perplexity."""
    return group.final_per_seed("test_metrics", "perplexity")


def ppl_in_training(group: Group) -> list[float]:
    """Each seed's training perplexity: its median over its last :data:`END_RECORDS` records."""
    return group.last_per_seed("train", "perplexity", END_RECORDS)


def better_than_lstm(grid: KeptGrid, pairs: dict[int, tuple[Group, Group]]) -> CheckRecord:
    """Spectral-RNN's test perplexity against the LSTM's of the same depth, at both depths."""
    outcomes = {d: beats(ppl_on_test(s), ppl_on_test(lstm), higher_is_better=False)
                for d, (s, lstm) in pairs.items()}
    evidence = "test perplexity, mean [min, max] over seeds: " + "; ".join(
        f"{d} layer{'s' if d > 1 else ''}: {s.variant} {spread_text(ppl_on_test(s), PPL)}, "
        f"{lstm.variant} {spread_text(ppl_on_test(lstm), PPL)} ({outcomes[d]})"
        for d, (s, lstm) in pairs.items())
    groups = [g for pair in pairs.values() for g in pair]
    record = CheckRecord(SOURCE, "Spectral-RNN has a lower test perplexity than the LSTM at 1 and 2 layers",
                         every(list(outcomes.values())), f"{evidence}; {dropout_text(list(pairs[2]))}",
                         {g.variant: ppl_on_test(g) for g in groups}, quote=BETTER_QUOTE)
    return judged(grid, record, min(g.seeds for g in groups))


def two_layers(grid: KeptGrid, spectral: Group, lstm: Group) -> CheckRecord:
    """Spectral-RNN(2, 512) against LSTM(2, 128): a lower test and a higher training perplexity."""
    mine, theirs = ((ppl_on_test(g), ppl_in_training(g)) for g in (spectral, lstm))
    test = beats(mine[0], theirs[0], higher_is_better=False)
    train = beats(mine[1], theirs[1], higher_is_better=True)
    evidence = (
        f"{spectral.variant} against {lstm.variant}, mean [min, max] over seeds: test perplexity "
        f"{spread_text(mine[0], PPL)} against {spread_text(theirs[0], PPL)} (lower: {test}); training "
        f"perplexity (median of the last {END_RECORDS} records) {spread_text(mine[1], PPL)} against "
        f"{spread_text(theirs[1], PPL)} (higher: {train}); {dropout_text([spectral, lstm])}")
    numbers = {"test_perplexity": {spectral.variant: mine[0], lstm.variant: theirs[0]},
               "train_perplexity": {spectral.variant: mine[1], lstm.variant: theirs[1]}}
    record = CheckRecord(SOURCE, "2-layer Spectral-RNN: lower test and higher training perplexity than the "
                         "2-layer LSTM", every([test, train]), evidence, numbers, quote=TWO_LAYER_QUOTE)
    return judged(grid, record, min(spectral.seeds, lstm.seeds))


def records_from_grid(grid: KeptGrid | None) -> list[CheckRecord]:
    """Both claims from a kept grid (``None``, or a row not kept: that claim ``unverified``)."""
    if grid is None:
        return [missing_record(SOURCE, quote, EXPERIMENT, quote) for quote in (BETTER_QUOTE, TWO_LAYER_QUOTE)]
    pairs = {depth: (grid.group(s), grid.group(lstm)) for depth, (s, lstm) in DEPTHS.items()}
    complete = all(None not in pair for pair in pairs.values())
    return [better_than_lstm(grid, pairs) if complete else missing_record(SOURCE, BETTER_QUOTE, EXPERIMENT,
                                                                          BETTER_QUOTE),
            missing_record(SOURCE, TWO_LAYER_QUOTE, EXPERIMENT, TWO_LAYER_QUOTE) if None in pairs[2]
            else two_layers(grid, *pairs[2])]


def one_layer_record(recipe: str, grid: KeptGrid | None) -> CheckRecord:
    """The first claim at 1 layer on the paper-scale pair that ``recipe`` trains (:data:`ONE_LAYER_PAIRS`;
    ``grid``: the paper grid cut to the pair, ``None`` until both are kept), each seed's test perplexity."""
    pair = ONE_LAYER_PAIRS[recipe]
    if grid is None:
        command = f"spectral-analysis run {EXPERIMENT} --scale paper --only variant={{}}"
        runs = " and ".join(command.format(variant) for variant in pair)
        return CheckRecord(SOURCE, one_layer_claim(recipe), "unverified",
                           f"the two rows are not both kept at paper scale ({runs} keep them)", {},
                           quote=BETTER_QUOTE)
    spectral, lstm = (grid.group(variant) for variant in pair)
    mine, theirs = ppl_on_test(spectral), ppl_on_test(lstm)
    outcome = beats(mine, theirs, higher_is_better=False)
    against = ", ".join(f"{g.variant} {sum(v) / len(v) / TABLE3_PERPLEXITY[row][1]:.2f}x"
                        for g, v, row in zip((spectral, lstm), (mine, theirs), DEPTHS[1], strict=True))
    evidence = (f"test perplexity, mean [min, max] over seeds: {spectral.variant} {spread_text(mine, PPL)}, "
                f"{lstm.variant} {spread_text(theirs, PPL)} ({outcome}); the means against Table 3's printed "
                f"test perplexities: {against}")
    numbers = {spectral.variant: mine, lstm.variant: theirs}
    record = CheckRecord(SOURCE, one_layer_claim(recipe), outcome, evidence, numbers, quote=BETTER_QUOTE)
    unfit = unfit_trials(grid, {g.variant: [g] for g in (spectral, lstm)})
    return judged(grid, record, min(spectral.seeds, lstm.seeds), unfit=unfit)


def run(quick: bool = True) -> list[CheckRecord]:
    """Both claims from kept results, and the first again at 1 layer under each recipe of
    :data:`ONE_LAYER_PAIRS` (``quick`` is accepted for the common interface). Each claim reads its own rows
    at paper scale once they are kept (the four of :data:`DEPTHS`, the 2-layer pair), while the grid's
    other readings (``-mean``, ``-onehot``, ...) may still train; before that, the grid as it stands."""
    grid = kept_grid(EXPERIMENT)
    both_depths = kept_variants(EXPERIMENT, {variant for pair in DEPTHS.values() for variant in pair})
    two_layer = kept_variants(EXPERIMENT, set(DEPTHS[2]))
    return [records_from_grid(both_depths or grid)[0], records_from_grid(two_layer or grid)[1],
            *(one_layer_record(recipe, kept_variants(EXPERIMENT, set(pair)))
              for recipe, pair in ONE_LAYER_PAIRS.items())]
