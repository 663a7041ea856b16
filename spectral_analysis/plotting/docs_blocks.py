"""The numbers the documentation states, generated into its marked blocks so that each is written once.

A page holds ``<!-- NAME:begin -->`` ... ``<!-- NAME:end -->`` blocks; ``spectral-analysis figures
--readme PAGE`` rewrites every block it knows from ``results/``, and the tests fail when a page's block
is not what the results give. The blocks:

- ``reproduction``, ``reproduction-kept``, ``reproduction-summary``: the reproduction table, its paper-
  and budget-scale rows, and the README's ten headline rows (:mod:`.reproduction`);
- ``checks-FIGURE``: the verdicts and evidence of the paper checks that read one figure, in a fold
  beneath it on the Figures page (:data:`FIGURE_CHECKS` says which checks read which figure);
- ``demo``: the main job's numbers (``make demo``) from the run kept in ``results/demo/demo.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from spectral_analysis.checks import CheckRecord, replace_marked_block

# Which paper checks read which figure: the figure's stem -> the starts of the checks' sources.
FIGURE_CHECKS: dict[str, tuple[str, ...]] = {
    "fig1_addition": ("ICML Section 7.1 (Fig. 1",),
    "fig2_copy": ("ICML Section 7.1 (Fig. 2)",),
    "fig3_mnist": ("ICML Section 7.2 (Fig. 3)",),
    "fig4_mnist_dynamics": ("ICML Section 7.2 (Fig. 4)",),
    "fig5_depth": ("ICML Section 7.2 (Fig. 5)",),
    "fig6_ucr": ("ICML Appendix C (Table 4)",),
    "table3_ptb": ("ICML Section 7.3 (Table 3",),
    "fig2a_r": ("svdRNN (earlier version) Section 7.2 (Fig. 2(a))",),
    "fig2c_leak": ("svdRNN (earlier version) Section 7 (Fig. 2(c, f))",),
    "dizzy_copy": ("DizzyRNN Section 6 (Fig. 1)",),
    "kru_copy": ("KRU Section 4.1 (Fig. 1",),
    "kru_adding": ("KRU Section 4.2 (Fig. 2",),
    "kru_mnist": ("KRU Section 4.3 (Table 2",),
    "kru_ptb": ("KRU Section 4.4 (Table 3",),
    "kru_table4": ("KRU Section 4.5 (Table 4",),
    "kru_amplitude": ("KRU Section 4.7",),
}
CHECKS_PREFIX = "checks-"
DEMO_RECORD = Path("demo") / "demo.json"


def figure_records(records: list[CheckRecord], figure: str) -> list[CheckRecord]:
    """The checks that read ``figure`` (a key of :data:`FIGURE_CHECKS`), in the checks' order."""
    if figure not in FIGURE_CHECKS:
        raise ValueError(f"no paper check is mapped to the figure {figure!r}; known: {sorted(FIGURE_CHECKS)}")
    return [r for r in records if r.source.startswith(FIGURE_CHECKS[figure])]


def figure_checks_markdown(records: list[CheckRecord], figure: str) -> str:
    """One bullet per check of ``figure``: verdict, the claim as tested, scale and seeds, the paper's
    words and the evidence, all as the check wrote them.

    >>> from spectral_analysis.checks import CheckRecord
    >>> r = CheckRecord("DizzyRNN Section 6 (Fig. 1)", "a claim", "holds", "0.9", quote="q",
    ...                 scale="paper", seeds=3)
    >>> figure_checks_markdown([r], "dizzy_copy")
    '- **holds** (paper scale, 3 seeds): a claim. The paper: "q". Evidence: 0.9.'
    """
    chosen = figure_records(records, figure)
    if not chosen:
        raise ValueError(f"no paper check reads {figure!r} (sources starting {FIGURE_CHECKS[figure]})")
    lines = []
    for r in chosen:
        where = f" ({r.scale} scale, {r.seeds or '-'} seeds)" if r.scale else ""
        quote = f' The paper: "{r.quote}".' if r.quote and r.quote != r.claim else ""
        lines.append(f"- **{r.verdict}**{where}: {r.claim}.{quote} Evidence: {r.evidence}.")
    return "\n".join(lines)


def demo_markdown(record: Mapping[str, Any]) -> str:
    """The main job's run as the docs state it: where it ran, each model's test MSE, and log10 G(w) of
    Theorem 5 (Corollary 1 beside it for Spectral-RNN) at each length, from ``demo --record``'s file."""
    names = {"rnn": "RNN", "spectral": "Spectral-RNN (Theorem 5, measured `||W||`)"}
    runs = record["runs"]
    lengths = list(next(iter(runs.values()))["log10_G"])
    mse = ", ".join(f"{names[m].split(' (')[0]} test MSE {r['test_mse']:.4f}" for m, r in runs.items())
    lines = [f"`spectral-analysis demo` on {record['machine']} ({record['date']}, torch {record['torch']}): "
             f"addition T = {record['length']}, {record['steps']} steps each, n = 128; {mse} (always "
             f"predicting 1 scores {record['baseline_mse']:.3f}). log10 G(w) of the trained weights at "
             "each length, with gamma = 1 and B from the data:", "",
             "| model | `||W||` | " + " | ".join(f"T = {T}" for T in lengths) + " |",
             "|---|---|" + "---|" * len(lengths)]
    for model, r in runs.items():
        lines.append(f"| {names[model]} | {r['W_norm']:.3f} | "
                     + " | ".join(f"{r['log10_G'][T]:.2f}" for T in lengths) + " |")
        if r.get("corollary1_log10_G"):
            lines.append("| Spectral-RNN (Corollary 1, `||W|| <= 1 + r`) | | "
                         + " | ".join(f"{r['corollary1_log10_G'][T]:.2f}" for T in lengths) + " |")
    return "\n".join(lines)


def read_demo_record(results: Path) -> dict[str, Any]:
    path = results / DEMO_RECORD
    if not path.is_file():
        raise ValueError(f"no kept demo run at {path}: run `spectral-analysis demo --record {path}` first")
    return json.loads(path.read_text())


def fill_blocks(text: str, makers: Mapping[str, Callable[[], str]],
                figure_checks: Callable[[str], str] | None = None) -> tuple[str, list[str]]:
    """``text`` with every block it holds that ``makers`` names (or, with ``figure_checks``, every
    ``checks-FIGURE`` block) regenerated, and the names of the blocks filled."""
    filled = []
    names = list(makers)
    if figure_checks is not None:
        names += [CHECKS_PREFIX + figure for figure in FIGURE_CHECKS]
    for name in names:
        if f"<!-- {name}:begin -->" in text:
            body = makers[name]() if name in makers else figure_checks(name.removeprefix(CHECKS_PREFIX))
            text = replace_marked_block(text, name, body)
            filled.append(name)
    return text, filled
