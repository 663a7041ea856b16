"""What is reproduced, in one table drawn from kept results: the paper's number beside ours.

One row per printed row of Tables 2-4 and of KRU's Table 4 (JSB Chorales): the paper's value, the
measured mean [min, max] over seeds, that mean against the paper's value (:func:`against_the_paper`), the
scale and seeds it comes from, how many of its trials trained to a plateau, the median training seconds
per trial (and the GPU, for trials run on one).
One row per figure's headline statement: the paper's words, the paper check's verdict on them, its
scale and seeds, how many of the grid's trials plateaued.
Written to ``figures/reproduction.md``; ``spectral-analysis figures --readme docs/figures.md --readme
README.md`` copies it between docs/figures.md's ``reproduction`` markers, and the headline rows
(:data:`SUMMARY_ROWS`) between the README's ``reproduction-summary`` markers, with every other block
:mod:`.docs_blocks` knows. Nothing trains here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from spectral_analysis.checks import CheckRecord
from spectral_analysis.experiments.catalog import printed_row
from spectral_analysis.experiments.groups import Group, Spread
from spectral_analysis.experiments.reading import KeptGrid, read_grid, read_grids
from spectral_analysis.experiments.row_status import plateau_count
from spectral_analysis.plotting.docs_blocks import (
    bounds_table_markdown,
    certificates_markdown,
    demo_markdown,
    figure_checks_markdown,
    fill_blocks,
    read_demo_record,
    training_seconds_text,
)
from spectral_analysis.plotting.results_tables import (
    KRU_TABLE2,
    KRU_TABLE3,
    KRU_TABLE4,
    TABLE2,
    TABLE2_FIELD,
    TABLE2_GRIDS,
    _spread,
    grid_point_text,
    table2_grid_points,
    table3_printed,
    table4_printed,
)

HEADER = ["source", "the paper", "ours (mean [min, max])", "ours against the paper", "scale, seeds",
          "plateaued", "s per trial"]
SCALE_COLUMN = HEADER.index("scale, seeds")


def against_the_paper(s: Spread, paper: float, scale: float = 1.0, digits: int = 1, unit: str = "",
                      ratio: bool = False) -> str:
    """Our mean over seeds (times ``scale``, in the row's unit) against the paper's printed value: how far
    above or below it, or with ``ratio`` (a perplexity, compared by ratio as the papers compare them) how
    many times it; ``-`` where no seed has a value. Unfit seeds count, as in the mean beside it.

    ```python
    >>> from spectral_analysis.experiments.groups import Spread
    >>> import numpy as np
    >>> against_the_paper(Spread.over_seeds(np.array([0.962, 0.972])), 97.7, 100, unit=" points")
    '1.0 points below'
    >>> against_the_paper(Spread.over_seeds(np.array([133.7, 136.3])), 130.2, ratio=True)
    "1.04x the paper's"

    ```
    """
    if s.seeds == 0:
        return "-"
    mean = s.mean * scale
    if ratio:
        return f"{mean / paper:.2f}x the paper's"
    gap = round(mean - paper, digits)
    if gap == 0:
        return "equal"
    return f"{abs(gap):.{digits}f}{unit} {'above' if gap > 0 else 'below'}"


def _scale_cell(scale: str | None, stale: str | None = None) -> str:
    """The scale in words, with ``stale`` (``k/n``) trials that the current catalog entry would retrain."""
    notes = {"paper": "", "budget": " (the paper's sizes, a stated CPU budget)", None: "",
             "paper sizes, another dataset": " (the paper's dataset does not ship)"}
    return f"{scale or '-'}{notes.get(scale, ' (not the paper scale)')}" + (
        f" ({stale} trials stale)" if stale else "")


def _unfit(group: Group) -> str:
    """`` (k/n unfit: why)`` where ``k`` of the group's trials are not fit evidence (at chance, collapsed,
    diverged: :mod:`~spectral_analysis.experiments.fitness`), else ``""``."""
    reasons = [(row.get("fitness") or {}).get("reasons") or ["unfit"] for row in group.rows
               if (row.get("fitness") or {}).get("fit") is False]
    if not reasons:
        return ""
    kinds = sorted({reason.split(":")[0].split(" (")[0] for why in reasons for reason in why})
    return f" ({len(reasons)}/{group.seeds} unfit: {', '.join(kinds)})"


def _where(grid: KeptGrid, group: Group) -> str:
    """The scale, its stale trials, the seeds, and how many of them are not fit evidence."""
    stale = sum(row["trial"] in grid.stale for row in group.rows)
    scale = _scale_cell(grid.reported_scale, f'{stale}/{group.seeds}' if stale else None)
    return f"{scale}, {group.seeds}{_unfit(group)}"


def _row(source: str, paper: str, ours: str, against: str, grid: KeptGrid, group: Group) -> list[str]:
    """A table row (:data:`HEADER`'s cells) of ``group`` in ``grid``."""
    return [source, paper, ours, against, _where(grid, group), plateau_count(group.rows),
            training_seconds_text(group)]


def _reading_text(experiment: str, variant: str) -> str:
    """`` (the reading in words)`` for a variant that trains its printed row by another reading than the
    paper states (the catalog's ``reading``), else ``""``."""
    reading = printed_row(experiment, variant)[1]
    return f" ({reading})" if reading else ""


def table_rows(results: Path) -> list[list[str]]:
    rows = []
    points = partial(against_the_paper, scale=100, unit=" points")
    for grid in read_grids(results, "table2-mnist"):
        for g in grid.groups:
            if g.variant in TABLE2:
                rows.append(_row(f"Table 2, {g.variant} (n_h = {g.rows[0]['hidden']})",
                                 f"{TABLE2[g.variant]:.1f}% test", _spread(g.final(), 100, 1) + "%",
                                 points(g.final(), TABLE2[g.variant]), grid, g))
    for experiment, (model, _) in TABLE2_GRIDS.items():
        for grid, g in table2_grid_points(results, read_grids(results, experiment), model):
            if grid.experiment != experiment:
                continue  # table2-mnist's own row is listed above
            rows.append(_row(f"Table 2, {model} (n_h = {g.rows[0]['hidden']}; {grid_point_text(g)})",
                             f"{TABLE2[model]:.1f}% test (the best of its grid)",
                             _spread(g.final(), 100, 1) + "%", points(g.final(), TABLE2[model]), grid, g))
    for grid in read_grids(results, TABLE2_FIELD):  # the same LSTM row by the field's recipe, beside
        for g in grid.groups:
            row, reading = printed_row(TABLE2_FIELD, g.variant)
            rows.append(_row(f"Table 2, {row} (n_h = {g.rows[0]['hidden']}; {reading})",
                             f"{TABLE2[row]:.1f}% test", _spread(g.final(), 100, 1) + "%",
                             points(g.final(), TABLE2[row]), grid, g))
    for grid in read_grids(results, "table3-ptb"):  # a row kept at paper scale on its own stands beside
        for g in grid.groups:
            printed_pair = table3_printed(g.variant)
            if printed_pair is not None:
                perplexity, printed = g.final("test_metrics", "perplexity"), printed_pair[1]
                rows.append(_row(f"Table 3, {g.variant}{_reading_text('table3-ptb', g.variant)}",
                                 f"{printed:.1f} test ppl", _spread(perplexity, 1, 1),
                                 against_the_paper(perplexity, printed, ratio=True), grid, g))
    for grid in read_grids(results, "kru-mnist"):
        for g in grid.groups:
            printed = KRU_TABLE2.get(g.variant, {}).get(g.axes.get("task"))
            if printed is not None:
                rows.append(_row(f"KRU Table 2, {g.axes['task']}, {g.variant} (n = {g.rows[0]['hidden']})",
                                 f"{printed:.1f}% test", _spread(g.final(), 100, 1) + "%",
                                 points(g.final(), printed), grid, g))
    for grid in read_grids(results, "kru-ptb"):
        for g in grid.groups:
            if g.variant in KRU_TABLE3:
                entropy, printed = g.final("test_metrics", "cross_entropy"), KRU_TABLE3[g.variant][1]
                rows.append(_row(f"KRU Table 3, character-level PTB, {g.variant}", f"{printed:.2f} test BPC",
                                 _spread(entropy, 1 / math.log(2), 2),
                                 against_the_paper(entropy, printed, 1 / math.log(2), 2, " BPC"), grid, g))
    grid = read_grid(results, "kru-music")
    for g in grid.groups if grid else []:
        if g.variant in KRU_TABLE4:
            nll, printed = g.final("test_metrics", "nll"), KRU_TABLE4[g.variant][1]
            rows.append(_row(f"KRU Table 4 (JSB Chorales), on music21's Bach chorales, {g.variant} "
                             f"(n = {g.rows[0]['hidden']})", f"{printed:.2f} test NLL", _spread(nll, 1, 2),
                             against_the_paper(nll, printed, digits=2), grid, g))
    grid = read_grid(results, "table4-ucr")
    for dataset in grid.values("dataset") if grid else []:
        for g in grid.groups:
            printed = table4_printed(dataset, g.variant)
            if g.axes.get("dataset") == dataset and printed is not None:
                accuracy = g.final("test_at_best_valid")
                rows.append(_row(f"Table 4, {dataset}, {g.variant}{_reading_text('table4-ucr', g.variant)}",
                                 f"{printed:.3f} test accuracy (at the best validation)", _spread(accuracy),
                                 against_the_paper(accuracy, printed, digits=3), grid, g))
    return rows


def figure_rows(records: list[CheckRecord]) -> list[list[str]]:
    rows = []
    for r in records:
        where = f"{_scale_cell(r.scale, r.stale)}, {r.seeds or '-'}"
        source = r.source if r.claim == r.quote else f"{r.source}: {r.claim}"
        rows.append([source, f'"{r.quote}"' if r.quote else r.claim, f"**{r.verdict}**", "-", where,
                     r.plateaued or "-", "-"])
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


KEPT_SCALES = ("paper", "budget")  # rows the README's table keeps: what was trained at the paper's sizes


def reproduction_markdown(results: Path, records: list[CheckRecord], kept_only: bool = False) -> str:
    """The table; ``kept_only``: only the rows drawn from the paper or budget scale (the README's). A row
    drawn at another scale (smoke: a few steps, no evidence) stands only where its result has no row at a
    kept scale, to show that it is not yet trained."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    rows = table_rows(results) + figure_rows(records)
    kept_sources = {row[0] for row in rows if row[SCALE_COLUMN].startswith(KEPT_SCALES)}
    rows = [row for row in rows if row[SCALE_COLUMN].startswith(KEPT_SCALES)
            or not (kept_only or row[0] in kept_sources)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# The README's headline rows: the headline row of each paper result, by its source cell in the full table
# (the paper-scale row where a result has rows at two scales). Tables first, then the figures' claims. A
# baseline the stated recipe leaves untrained stands beside the same network trained by the field's recipe.
SUMMARY_ROWS = (
    "Table 2, spectral (n_h = 128; lr 0.001, decay 0.9, batch 128, unit reflectors, input std 0.125)",
    "Table 2, spectral (n_h = 128)",
    "Table 2, lstm (n_h = 128)",
    "Table 2, lstm (n_h = 128; the field's recipe: RMSprop 1e-3, clipped at 1 (Cooijmans et al. 2016), not "
    "the paper's)",
    "Table 4, ArrowHead, spectral",
    "KRU Table 4 (JSB Chorales), on music21's Bach chorales, kru (n = 100)",
    "ICML Section 7.1 (Fig. 1): only ornn and spectral beat the baseline (L = 300)",
    "ICML Section 7.1 (Fig. 2): Spectral-RNN has the lowest test cross entropy at every time lag",
    "ICML Section 7.2 (Fig. 5): the SVD-based nets are resilient to increasing depth: they lose no more "
    "accuracy from L = 30 to L = 100 than MLP and ResNet (every layer SVD-parameterized)",
    "ICML Section 7.3 (Table 3, PTB): Spectral-RNN(1, 512) has a lower test perplexity than LSTM(1, 128), "
    "both trained by the paper's stated settings",
    "ICML Section 7.3 (Table 3, PTB): Spectral-RNN(1, 512) has a lower test perplexity than LSTM(1, 128), "
    "both trained by PyTorch's word_language_model recipe",
    "KRU Section 4.1 (Fig. 1, copy): KRU's test cross entropy ends near zero (below 0.05 x the memoryless "
    "baseline) at every lag",
    "KRU Section 4.2 (Fig. 2, adding): KRU and LSTM end below 0.05 x the 0.167 baseline at every T",
)
SUMMARY_HEADER = ["result", "the paper", "ours", "ours against the paper", "scale, seeds"]


def summary_markdown(results: Path, records: list[CheckRecord]) -> str:
    """The README's summary: the rows of :data:`SUMMARY_ROWS` from the full table, up to its scale
    column (without its plateau and time columns). A row the results no longer give is an error that
    names it."""
    rows = [row for row in table_rows(results) + figure_rows(records)
            if row[SCALE_COLUMN].startswith(KEPT_SCALES)]
    lines = ["| " + " | ".join(SUMMARY_HEADER) + " |", "|" + "---|" * len(SUMMARY_HEADER)]
    for source in SUMMARY_ROWS:
        matches = sorted((row for row in rows if row[0] == source),
                         key=lambda row: not row[SCALE_COLUMN].startswith("paper"))
        if not matches:
            raise ValueError(f"the README summary's row {source!r} is not in the reproduction table: "
                             "change SUMMARY_ROWS in spectral_analysis/plotting/reproduction.py")
        lines.append("| " + " | ".join(_cell(c) for c in matches[0][:SCALE_COLUMN + 1]) + " |")
    return "\n".join(lines)


def experimental_records() -> list[CheckRecord]:
    """The figures' headline checks (they read ``results/``, never train)."""
    from spectral_analysis.paper import (
        depth,
        dizzy_copy,
        experiments,
        kru_amplitude,
        kru_mnist,
        kru_music,
        kru_ptb,
        kru_synthetic,
        mnist_ranking,
        ptb,
        svdrnn_leak,
        svdrnn_r,
        synthetic_tasks,
        ucr,
    )

    return (experiments.run() + synthetic_tasks.run() + mnist_ranking.run() + depth.run() + svdrnn_r.run()
            + svdrnn_leak.run() + dizzy_copy.run() + kru_amplitude.run() + kru_music.run()
            + kru_synthetic.run() + kru_mnist.run() + kru_ptb.run() + ptb.run() + ucr.run())


def write_reproduction(results: Path, out: Path, readmes: Sequence[Path] = (),
                       records: list[CheckRecord] | None = None) -> Path:
    """``out/reproduction.md``, and in each of ``readmes`` every generated block it holds (see
    :mod:`.docs_blocks`): the full table, its kept rows, the README summary, the figures' checks, the
    demo's numbers. A file that holds none is an error. ``records``: the figures' checks where the
    caller has run them already."""
    records = experimental_records() if records is None else records
    table = reproduction_markdown(results, records)
    path = out / "reproduction.md"
    path.write_text("# Reproduction: the papers' numbers beside ours\n\nGenerated by `spectral-analysis "
                    "figures` from `results/`; figure rows are the paper checks' verdicts (a verdict needs "
                    "the paper's scale and 3 seeds).\n\n" + table + "\n")
    makers = {"reproduction": lambda: table,
              "reproduction-kept": lambda: reproduction_markdown(results, records, True),
              "reproduction-summary": lambda: summary_markdown(results, records),
              "demo": lambda: demo_markdown(read_demo_record(results)),
              "bounds-table-fig2r": lambda: bounds_table_markdown(out / "bounds_table_fig2r.csv"),
              "bounds-table-pixel": lambda: bounds_table_markdown(out / "bounds_table_pixel.csv"),
              "certificates": lambda: certificates_markdown(results)}
    for readme in readmes:
        text, filled = fill_blocks(readme.read_text(), makers, lambda f: figure_checks_markdown(records, f),
                                   results)
        if not filled:
            raise ValueError(f"{readme} has no generated block to regenerate (<!-- NAME:begin --> with NAME "
                             f"one of {sorted(makers)}, checks-FIGURE, grid=EXPERIMENT@SCALE, "
                             "calibration=EXPERIMENT@SCALE or benchmark=NAME)")
        readme.write_text(text)
    return path
