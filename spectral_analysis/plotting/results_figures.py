"""The papers' figures and tables drawn from kept results (``results/``) only: no training here.

Each entry of :data:`FIGURES` reads one experiment of the catalog through
:func:`~spectral_analysis.experiments.reading.read_grid` (paper scale when kept, else smoke scale,
stamped in the title) and writes its PNG (and, for tables, Markdown) into the output directory; beside
a grid below paper scale, the learning-curve figures also draw the paper-scale models kept so far
(``<figure>_paper.png``, :func:`~spectral_analysis.experiments.reading.read_grids`).
Curves are the mean over seeds with the min-max band, on a log axis the median over seeds
(:func:`~spectral_analysis.experiments.groups.log_median`); the analyzer figures
(:mod:`~spectral_analysis.plotting.checkpoint_figures`) run the analyzers on the kept checkpoints (seed 0).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from spectral_analysis.experiments.fitness import diverged
from spectral_analysis.experiments.groups import Group
from spectral_analysis.experiments.reading import (
    KeptGrid,
    read_grid,
    read_grids,
    read_variants,
    seeds_text,
    unkept_trials,
)
from spectral_analysis.plotting.benchmarks import BENCHMARKS_DIR, plot_householder_benchmark
from spectral_analysis.plotting.bounds_figure import draw_kept_bounds_figures
from spectral_analysis.plotting.checkpoint_figures import analyzers, kru_amplitude
from spectral_analysis.plotting.paper_figures import (
    Drawn,
    drawn_record,
    plot_depth_sweep,
    plot_learning_curves,
    plot_training_dynamics,
    save_figure,
    styled,
)
from spectral_analysis.plotting.results_tables import TABLES


def _curves(group: Group, metric: str, phase: str = "valid") -> dict[str, np.ndarray]:
    steps, value = group.curve(phase, metric)
    grad_steps, grad = group.curve("train", "grad_h0_norm")
    return {
        "steps": steps,
        "metric": value.mean,
        "metric_low": value.low,
        "metric_high": value.high,
        "metric_median": value.log_median,
        "grad_steps": grad_steps,
        "grad": grad.mean,
        "grad_low": grad.low,
        "grad_high": grad.high,
        "grad_median": grad.log_median,
    }


def learning_panels(grid: KeptGrid, axis: str, metric: str,
                    phase: str = "valid") -> dict[Any, dict[str, dict[str, np.ndarray]]]:
    """One panel per value of ``axis`` (variant -> its seed-aggregated curves of ``metric``), including
    a value where every seed of every model diverged: its panel is empty, titled by :func:`diverged_notes`;
    ``axis`` "" (a grid without one): a single panel, keyed ""."""
    if not axis:
        return {"": {g.variant: _curves(g, metric, phase) for g in grid.groups}}
    return {
        value: {g.variant: _curves(g, metric, phase) for g in grid.groups if g.axes.get(axis) == value}
        for value in grid.values(axis, with_diverged=True)
    }


def copy_baseline(T: int) -> float:
    """The copy task's memoryless cross entropy, 10 log 8 / (T + 20) (KRU Section 4.1)."""
    return 10 * math.log(8) / (T + 20)


DATA_NAMES = {"valid": "validation", "train": "training", "test": "test"}  # a phase, in words


@dataclass(frozen=True)
class LearningFigure:
    """A Fig. 1-style figure: ``metric`` on the validation data (``phase`` "train": the training batches',
    for a grid validated only at epoch ends; "test": the test set, for a grid that scores it at each
    validation) and ||dL/dh0|| over training, one panel per value of ``axis``
    (none: one panel), with ``baseline`` (a level, or a function of the axis value)."""

    file: str
    axis: str
    metric: str
    baseline: Callable[[Any], float] | float | None
    title: str
    axis_name: str
    log_scale: bool | None = None
    phase: str = "valid"

    def draw(self, experiment: str, results: Path, out: Path) -> list[Drawn]:
        """The figure from the grid :func:`read_grids` draws and, beside a smaller grid, the paper-scale
        models kept so far as ``<file>_paper.png`` (their own axes: they train longer)."""
        grids = read_grids(results, experiment)
        _drop_stale_paper_file(out, self.file, grids)
        return [self._draw(grid, out, paper_so_far=i > 0) for i, grid in enumerate(grids)]

    def _draw(self, grid: KeptGrid, out: Path, paper_so_far: bool) -> Drawn:
        panels = learning_panels(grid, self.axis, self.metric, self.phase)
        levels = {k: self.baseline(k) for k in panels} if callable(self.baseline) else self.baseline
        size = ", ".join(sorted({f"n = {g.rows[0]['hidden']}" for g in grid.groups}))
        title = f"{self.title}{kept_so_far(grid) if paper_so_far else ''} ({size}; {grid.stamp()})"
        figure = plot_learning_curves(panels, self.metric.replace("_", " "), levels, title,
                                      length_name=self.axis_name, log_scale=self.log_scale,
                                      data_name=DATA_NAMES[self.phase],
                                      column_notes=panel_notes(grid, self.axis))
        file = _paper_file(self.file) if paper_so_far else self.file
        return drawn_record(save_figure(figure, out / file), grid)


def diverged_notes(grid: KeptGrid, axis: str) -> dict[Any, str]:
    """Per value of ``axis`` (``""``: the one panel of a grid without it), the seeds that diverged and are
    left out of its curves, with the step each last recorded: ``"kru: 1 seed diverged (step 17800)"``."""
    steps: dict[Any, dict[str, list[str]]] = {}
    for row in filter(diverged, grid.failed):
        value = row["axes"].get(axis) if axis else ""
        steps.setdefault(value, {}).setdefault(row["variant"], []).append(str(row.get("last_recorded_step")))
    return {value: "; ".join(f"{variant}: {seeds_text([len(s)])} diverged (step {', '.join(s)})"
                             for variant, s in by_variant.items())
            for value, by_variant in steps.items()}


def unkept_notes(grid: KeptGrid, axis: str) -> dict[Any, str]:
    """Per value of ``axis`` (``""``: the one panel of a grid without it), the catalog trials its curves
    do not have yet, still to start or still training: ``"not kept yet: kru 3 seeds, lstm 1 seed"``."""
    notes = {}
    for value, trials in (unkept_trials(grid, axis) or {}).items():
        seeds = Counter(t.variant for t in trials)
        notes[value] = "not kept yet: " + ", ".join(f"{v} {seeds_text([n])}" for v, n in seeds.items())
    return notes


def panel_notes(grid: KeptGrid, axis: str) -> dict[Any, str]:
    """A panel's second title line: the seeds its curves leave out, diverged (:func:`diverged_notes`) or
    not kept yet (:func:`unkept_notes`, while a paper grid is under way)."""
    diverged_, unkept = diverged_notes(grid, axis), unkept_notes(grid, axis)
    return {value: "\n".join(n for n in (diverged_.get(value), unkept.get(value)) if n)
            for value in diverged_.keys() | unkept.keys()}


def _paper_file(file: str) -> str:
    """The file of a figure's paper-scale models kept so far, drawn beside the figure's smaller grid."""
    return file.replace(".png", "_paper.png")


def _drop_stale_paper_file(out: Path, file: str, grids: list[KeptGrid]) -> None:
    """Once a figure is drawn whole at one scale (its paper grid complete), the paper-so-far file an
    earlier draw left in ``out`` is stale: removed, so no gallery shows it."""
    if len(grids) < 2:
        (out / _paper_file(file)).unlink(missing_ok=True)


def kept_so_far(paper: KeptGrid) -> str:
    """A title's words for a paper-scale grid still under way (the stamp names the scale): the models kept."""
    models = ", ".join(dict.fromkeys(g.variant for g in paper.groups))
    return f", the models kept so far: {models}"


LEARNING_FIGURES = {
    "fig1-addition": LearningFigure("fig1_addition.png", "length", "mse", 2 / 12, "Fig. 1: addition", "L"),
    "fig2-copy": LearningFigure(
        "fig2_copy.png", "length", "cross_entropy", copy_baseline, "Fig. 2: copy", "T"
    ),
    "svdrnn-fig2-leak": LearningFigure(
        "fig2c_leak.png",
        "leak",
        "accuracy",
        None,
        "Earlier version's Fig. 2(c, f): row-by-row MNIST",
        "leak",
        log_scale=False,
    ),
    "svdrnn-fig2-r": LearningFigure(
        "fig2a_r.png",
        "",
        "accuracy",
        None,
        "Earlier version's Fig. 2(a): row-by-row MNIST, svdRNN at r = 0.01-1 beside oRNN and RNN",
        "",
        log_scale=False,
    ),
    "kru-copy": LearningFigure(
        "kru_copy.png", "length", "cross_entropy", copy_baseline, "KRU Fig. 1: copy memory", "T"
    ),
    "kru-adding": LearningFigure("kru_adding.png", "length", "mse", 2 / 12, "KRU Fig. 2: adding", "T"),
    "kru-adding-amplitude": LearningFigure(
        "kru_adding_amplitude.png", "penalty", "mse", 2 / 12,
        "KRU's soft unitary constraint on adding at T = 100, per amplitude (the validation of kru-adding's)",
        "amplitude"),
    "kru-ptb": LearningFigure("kru_ptb.png", "", "cross_entropy", math.log(50),
                              "KRU Table 3: character-level PTB, cross entropy (BPC x ln 2) on the training "
                              "batches (validated only at epoch ends)", "", phase="train"),
    "kru-mnist": LearningFigure("kru_mnist.png", "task", "accuracy", 0.1,
                                "KRU Fig. 3: pixel and permuted MNIST, 784 steps", "task", log_scale=False),
    "table4-ucr": LearningFigure("fig6_ucr.png", "dataset", "cross_entropy", None,
                                 "Fig. 6: UCR, test cross entropy over training (the Table 4 datasets that "
                                 "ship offline)", "dataset", phase="test"),
    "dizzy-copy": LearningFigure(
        "dizzy_copy.png",
        "",
        "accuracy_recall",
        1 / 8,
        "DizzyRNN Fig. 1: copy, lag 90, accuracy on the copied symbols",
        "",
        log_scale=False,
    ),
}


FIG3_PANELS = {
    "pixel MNIST, 392 steps": ("mnist", 2),
    "pixel MNIST, 784 steps": ("mnist", 1),
    "permuted MNIST, 784 steps": ("permuted-mnist", 1),
}


def _fig3_panels(drawn_grids: list[tuple[KeptGrid, str]]) -> dict[str, dict[str, dict[str, np.ndarray]]]:
    """Fig. 3's three panels, each model of each grid a curve (its label suffixed by the grid's)."""
    return {
        label: {
            g.variant + suffix: _curves(g, "accuracy")
            for kept, suffix in drawn_grids
            for g in kept.groups
            if g.axes.get("task") == task and g.axes.get("pixels_per_step") == pixels
        }
        for label, (task, pixels) in FIG3_PANELS.items()
    }


def _fig3_drawn(drawn_grids: list[tuple[KeptGrid, str]], title: str, path: Path) -> Drawn:
    figure = plot_learning_curves(_fig3_panels(drawn_grids), "accuracy", 0.1, title, length_name="",
                                  log_scale=False)
    return drawn_record(save_figure(figure, path), drawn_grids[0][0])


def fig3_and_4(results: Path, out: Path) -> list[Drawn]:
    grids = read_grids(results, "fig3-mnist")
    _drop_stale_paper_file(out, "fig3_mnist.png", grids)
    if not grids:
        return []
    grid = grids[0]
    # Spectral-RNN and oRNN with the authors' code's settings beside them, once kept at the same scale
    authors = read_variants(results, "fig3-authors-code", {"spectral", "ornn"}, grid.scale)
    drawn_grids = [(grid, "")] + ([(authors, " (authors' code)")] if authors else [])
    size = f"n = {grid.groups[0].rows[0]['hidden']}" + (
        "; '(authors' code)': unit reflectors, input std 0.125" if authors else "")
    title = f"Fig. 3: pixel and permuted MNIST ({size}; {grid.stamp()}; chance 0.1)"
    drawn = [_fig3_drawn(drawn_grids, title, out / "fig3_mnist.png")]
    for paper in grids[1:]:  # the paper-scale models kept so far, on their own axes (20 epochs, not 2)
        drawn.append(_fig3_drawn([(paper, "")], f"Fig. 3{kept_so_far(paper)} "
                                 f"(n = {paper.groups[0].rows[0]['hidden']}; {paper.stamp()}; chance 0.1)",
                                 out / _paper_file("fig3_mnist.png")))
    steps, margins, gradients = {}, {}, {}
    drawn_groups = [g for g in grid.groups if g.axes.get("task") == "mnist"
                    and g.axes.get("pixels_per_step") == 1 and g.variant != "lstm"]
    for g in drawn_groups:  # a seed that diverged is drawn up to its divergence
        steps[g.variant], margin = g.curve("train", "spectral_margin", with_failed=True)
        margins[g.variant] = margin.mean
        gradients[g.variant] = g.curve("train", "grad_h0_norm", with_failed=True)[1].log_median
    diverged = "; ".join(
        f"{g.variant}: {len(g.failed_rows)} more diverged, drawn to step "
        + ", ".join(str(r.get("last_recorded_step")) for r in g.failed_rows)
        for g in drawn_groups if g.failed_rows
    )
    figure = plot_training_dynamics(
        steps,
        margins,
        gradients,
        "Fig. 4: spectral margin and gradient at the first "
        f"cell, pixel MNIST 784 steps ({size}; {grid.stamp(drawn_groups)}"
        + (f" ({diverged})" if diverged else "") + "; margin: mean over seeds, gradient: median)",
    )
    path = save_figure(figure, out / "fig4_mnist_dynamics.png")
    return drawn + [drawn_record(path, grid, "from the pixel-MNIST 784-step trials of fig3-mnist")]


def fig5(results: Path, out: Path) -> list[Drawn]:
    grid = read_grid(results, "fig5-depth")
    if grid is None:
        return []
    names = {v: v.replace("-plain-ends", " (plain ends)") for v in grid.variants()}
    depths = sorted(grid.values("num_layers"))
    accuracy = {
        names[v]: {d: g.final_per_seed() for d in depths if (g := grid.group(v, num_layers=d))}
        for v in grid.variants()
    }
    curves = {}
    for v in grid.variants():
        steps, value = grid.group(v, num_layers=depths[-1]).curve("valid", "accuracy")
        curves[names[v]] = (steps, value.mean)
    title = (
        f"Fig. 5: flattened MNIST, width {grid.groups[0].rows[0]['hidden']}, test accuracy against depth "
        f"(line: mean over seeds, dots: each seed; {grid.stamp()}); dashed: plain input and output layers"
    )
    path = save_figure(plot_depth_sweep(accuracy, curves, depths[-1], title), out / "fig5_depth.png")
    return [drawn_record(path, grid)]


def householder_speed(results: Path, out: Path) -> list[Drawn]:
    """The Householder speed figure from the kept benchmark report (``benchmarks/householder_cpu.json``)."""
    report = BENCHMARKS_DIR / "householder_cpu.json"
    if not report.is_file():
        return []
    path = save_figure(plot_householder_benchmark(report).figure, out / "householder_speed_cpu.png")
    return [{"path": str(path), "experiment": "benchmarks", "scale": "benchmark", "seeds": 0,
             "note": "from benchmarks/householder_cpu.json"}]


# Figures drawn from a kept file rather than an experiment's grid, under names that are no experiment's.
KEPT_FILE_FIGURES: dict[str, Callable[[Path, Path], list[Drawn]]] = {
    "benchmarks": householder_speed,  # benchmarks/householder_cpu.json
    "bounds-table": draw_kept_bounds_figures,  # figures/bounds_table_*.csv
}
FIGURES: dict[str, Callable[[Path, Path], list[Drawn]]] = {
    **{name: partial(figure.draw, name) for name, figure in LEARNING_FIGURES.items()},
    "fig3-mnist": fig3_and_4,
    "fig5-depth": fig5,
    "kru-amplitude": kru_amplitude,
    "zoo-addition": analyzers,
    **KEPT_FILE_FIGURES,
}


def _figure_and_table(name: str) -> Callable[[Path, Path], list[Drawn]]:
    """What ``name``'s figure and table readers draw, the figure first (an experiment may have both)."""
    readers = [r[name] for r in (FIGURES, TABLES) if name in r]
    return lambda results, out: [d for read in readers for d in read(results, out)]


READERS = {name: _figure_and_table(name) for name in {**FIGURES, **TABLES}}


@styled()
def draw_figures(results: str | Path, out: str | Path, experiments: list[str] | None = None,
                 progress: bool = False) -> list[Drawn]:
    """Every figure and table (or those of ``experiments``) from ``results`` into ``out``; ``progress``:
    a bar on stderr, one step per experiment."""
    from tqdm import tqdm

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    drawn: list[Drawn] = []
    for name, draw in tqdm(READERS.items(), desc="figures", disable=not progress, leave=False):
        if experiments is None or name in experiments:
            drawn += draw(Path(results), out)
    return drawn
