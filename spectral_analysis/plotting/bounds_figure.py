"""The bounds-table figure: every generalization bound of a checkpoint against its test error (faces
layer; rows from :func:`spectral_analysis.analysis.bounds_table.bounds_row`, or read back from a kept
``bounds-table --out`` CSV by :func:`draw_kept_bounds_figures`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from spectral_analysis.analysis.bounds_table import read_bounds_table
from spectral_analysis.plotting.paper_figures import Drawn, save_figure, styled

# One colour a quantity, the same in both panels: a bound of Q and Q's own test error share one (filled:
# the bound; hollow: the test error), and the trained network's test error is black.
COLOURS = {"log10_G": "tab:blue", "log10_G_corollary1": "tab:cyan", "log10_unrolled_bound": "tab:olive",
           "explicit_bound": "tab:brown", "certified_error_init": "tab:orange",
           "q_test_error_init": "tab:orange", "certified_error_learned": "tab:red",
           "q_test_error_learned": "tab:red", "derandomized_init": "tab:purple",
           "derandomized_learned": "tab:pink", "held_out_bound": "tab:green", "test_error": "black"}
# (column, label, is log10 of the value)
BOUND_SERIES = (("log10_G", "Theorem 5: G(w) (O-form)", True),
                ("log10_G_corollary1", "Corollary 1: G(w) at the structural sigma bound", True),
                ("log10_unrolled_bound", "Bartlett et al., unrolled", True),
                ("explicit_bound", "Appendix A.6, explicit", False),
                ("certified_error_init", "certificate of Q (centred on w), prior at init", False),
                ("certified_error_learned", "certificate of Q (centred on w), learned prior", False),
                ("derandomized_init", "certificate of w, derandomized through margins, prior at init", False),
                ("derandomized_learned", "certificate of w, derandomized through margins, learned prior",
                 False),
                ("held_out_bound", "the validation split alone (test-set bound of w)", False))
# (column, label, a test error rather than a bound: drawn hollow)
ERROR_SERIES = (("test_error", "test error (trained network w)", True),
                ("held_out_bound", "w certified by the validation split alone", False),
                ("derandomized_init", "w certified, derandomized (prior at init)", False),
                ("derandomized_learned", "w certified, derandomized (learned prior)", False),
                ("q_test_error_init", "test error of Q (prior at init)", True),
                ("certified_error_init", "Q certified (prior at init)", False),
                ("q_test_error_learned", "test error of Q (learned prior)", True),
                ("certified_error_learned", "Q certified (learned prior)", False))
MARKERS = {"rnn": "o", "ornn": "s", "spectral": "D", "irnn": "^", "lstm": "v", "gru": "P"}


def _group(row: dict[str, Any]) -> tuple[float, str]:
    """Sort key and label of a checkpoint's model: by the singular values its W may take."""
    bound = row.get("sigma_bound")
    if bound is None:
        return (float("inf"), f"{row['model']}\nW free")
    return (bound, f"{row['model']}\nsigma <= {bound:g}")


@styled()
def plot_bounds_against_error(rows: list[dict[str, Any]], title: str) -> plt.Figure:
    """Left: each bound (colour) of each checkpoint (marker: model) against its test error, in log10; the
    line at 0 (a bound of 1) separates vacuous bounds, the dotted curve is the test error itself. Right:
    per model, ordered by the largest singular value its structure allows, the certificates of Q and of
    the trained network w itself and the test errors (mean and range over the checkpoints)."""
    fig, (ax, right) = plt.subplots(1, 2, figsize=(14, 7.5), gridspec_kw={"width_ratios": [1.2, 1]})
    models: set[str] = set()
    for column, label, is_log in BOUND_SERIES:
        colour = COLOURS[column]
        # drawn as log10: the unrolled bound at T = 784 is past a float's range (10^445)
        points = [(r["test_error"], r[column] if is_log else np.log10(r[column]), r["model"])
                  for r in rows if r.get(column) is not None]
        if not points:
            continue
        ax.scatter([], [], color=colour, marker="o", label=label)
        for x, y, model in points:
            ax.scatter(x, y, color=colour, marker=MARKERS.get(model, "x"), s=28, alpha=0.8)
            models.add(model)
    errors = np.array([r["test_error"] for r in rows])
    if len(errors):
        span = np.linspace(errors.min() * 0.9, errors.max() * 1.1, 2)
        ax.plot(span, np.log10(span), color="black", lw=0.8, ls=":", label="the test error itself")
    ax.axhline(0.0, color="black", lw=1.0, label="1 (above: vacuous)")
    ax.set_xlabel("test error of the trained network")
    ax.set_ylabel("log10 of the bound on the expected 0-1 error")
    ax.add_artist(ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2,
                            title="bound"))
    ax.legend(handles=[plt.Line2D([], [], color="grey", marker=MARKERS.get(m, "x"), ls="", label=m)
                       for m in sorted(models)], fontsize=7, loc="lower right", title="model")

    groups = sorted({_group(r) for r in rows})
    positions = {label: i for i, (_, label) in enumerate(groups)}
    for k, (column, label, hollow) in enumerate(ERROR_SERIES):
        xs, means, lows, highs = [], [], [], []
        for _, group in groups:
            values = [r[column] for r in rows if _group(r)[1] == group and r.get(column) is not None]
            if values:
                xs.append(positions[group] + (k - (len(ERROR_SERIES) - 1) / 2) * 0.09)
                means.append(np.mean(values))
                lows.append(np.mean(values) - min(values))
                highs.append(max(values) - np.mean(values))
        if xs:
            right.errorbar(xs, means, yerr=[lows, highs], fmt="o", ms=5, capsize=3, label=label,
                           color=COLOURS[column], mfc="white" if hollow else COLOURS[column])
    right.set_xticks(range(len(groups)), [label for _, label in groups], fontsize=8)
    right.set_ylabel("0-1 error (mean and range over the checkpoints)")
    right.set_xlabel("model, by the largest singular value of W its structure allows")
    right.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    fig.suptitle(title, fontsize=10)
    return fig




def bounds_figure_title(rows: list[dict[str, Any]]) -> str:
    """The figure's title: the tasks and the number of checkpoints of ``rows``."""
    tasks = sorted({r["task"] for r in rows})
    return f"Generalization bounds against test error ({', '.join(tasks)}; {len(rows)} checkpoints)"


def draw_kept_bounds_figures(results: Path, out: Path) -> list[Drawn]:
    """Each kept bounds table ``out/bounds_table_NAME.csv`` (a ``bounds-table --out``) drawn again as
    ``out/bounds_NAME.png``, without computing a bound (``results`` is not read: the tables are the
    record).

    ```python
    >>> drawn = draw_kept_bounds_figures(Path("results"), Path("figures"))  # doctest: +SKIP
    >>> drawn[0]["path"]  # doctest: +SKIP
    'figures/bounds_fig2r.png'

    ```
    """
    drawn = []
    for table in sorted(Path(out).glob("bounds_table_*.csv")):
        rows = read_bounds_table(table)
        path = save_figure(plot_bounds_against_error(rows, bounds_figure_title(rows)),
                           Path(out) / f"bounds_{table.stem.removeprefix('bounds_table_')}.png")
        zoo = [r["checkpoint"].removeprefix("zoo:").split("/") for r in rows
               if r["checkpoint"].startswith("zoo:")]
        files = ["checkpoint files"] if len(zoo) < len(rows) else []
        drawn.append({"path": str(path), "experiment": ", ".join(sorted({n[0] for n in zoo}) + files),
                      "scale": ", ".join(sorted({n[1] for n in zoo}) + files), "seeds": len(rows),
                      "note": f"{len(rows)} checkpoints, from {table.name}"})
    return drawn
