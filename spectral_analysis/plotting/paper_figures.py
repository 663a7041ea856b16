"""Figures regenerated from code (``scripts/make_figures.py``): one consistent seaborn style, labelled
axes with units, log scales where values span decades. Each function takes plain data (lists, arrays,
dicts by model name) and returns the matplotlib ``Axes`` (one panel; drawn on ``ax`` when given) or
``Figure`` (several panels); :func:`save_figure` writes one to a PNG. Nothing here picks a backend:
a notebook shows the figures inline, the command line writes files. The style is a context around each
drawing (:func:`styled`), never the session's global state."""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from cycler import cycler
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

if TYPE_CHECKING:
    from spectral_analysis.experiments.reading import KeptGrid

Drawn = dict[str, Any]
P = ParamSpec("P")
R = TypeVar("R")


def styled(style: str = "whitegrid") -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Draw inside seaborn's theme (``style``, the notebook context, the tab10 palette) as a matplotlib rc
    context, so that the caller's rcParams are as they were afterwards: a plot never restyles the session.

    >>> import matplotlib.pyplot as plt
    >>> before = dict(plt.rcParams)
    >>> @styled()
    ... def figure():
    ...     return plt.rcParams["axes.grid"]
    >>> figure(), dict(plt.rcParams) == before
    (True, True)
    """
    def wrap(draw: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(draw)
        def themed(*args: P.args, **kwargs: P.kwargs) -> R:
            rc = {**sns.axes_style(style), **sns.plotting_context("notebook"),
                  "axes.prop_cycle": cycler(color=sns.color_palette("tab10"))}
            with plt.rc_context(rc):
                return draw(*args, **kwargs)
        return themed
    return wrap


def _wrapped(title: str, fig: plt.Figure) -> str:
    """``title`` wrapped to the figure's width (about 12 characters an inch at fontsize 10)."""
    return textwrap.fill(title, width=int(12 * fig.get_figwidth()))


def save_figure(fig: plt.Figure, out: str | Path) -> Path:
    """Lay out, write ``fig`` as a PNG at ``out`` (110 dpi) and close it; returns the path."""
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return Path(out)


def drawn_record(path: Path, grid: KeptGrid, note: str = "") -> Drawn:
    """What ``figures`` reports of a file it drew from ``grid``: the path and the grid's experiment, scale
    and seeds."""
    return {"path": str(path), "experiment": grid.experiment, "scale": grid.scale, "seeds": grid.seeds,
            "note": note}


# solid, dashed, dotted, dash-dot, short dashes, dash-dot-dot, sparse dots, long dashes
DASHES = ("-", (0, (5, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2)), (0, (2, 1)), (0, (7, 2, 1, 2, 1, 2)),
          (0, (1, 3)), (0, (10, 3)))


@styled()
def line_chart(series: dict[str, tuple[np.ndarray, np.ndarray]], xlabel: str, ylabel: str, title: str,
               ax: plt.Axes | None = None, style: str = "-", log_x: bool = False, zero_line: bool = False,
               symlog_y: float | None = None) -> plt.Axes:
    """One line per model from ``series[model] = (x, y)``, labelled, on ``ax`` (default: a new figure);
    ``style`` is ``"-"``, ``".-"`` or ``"o-"``. Each line has its own dash pattern as well as its colour
    (:data:`DASHES`) and is drawn thinner than the one before, so a line drawn over one it coincides with
    leaves that one seen in its gaps and at its edges."""
    if style not in ("-", ".-", "o-"):
        raise ValueError(f"style must be '-', '.-' or 'o-', got {style!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    fig = ax.figure
    for index, (model, (x, y)) in enumerate(series.items()):
        ax.plot(x, y, marker=style[:-1] or None, linestyle=DASHES[index % len(DASHES)],
                lw=max(2.4 - 0.2 * index, 1.2), ms=3 if style == ".-" else 6, label=model)
    if log_x:
        ax.set_xscale("log")
    if zero_line:
        ax.axhline(0.0, color="black", lw=0.8)
    if symlog_y is not None:  # linear within +-symlog_y, log beyond: one tail cannot hide the rest
        ax.set_yscale("symlog", linthresh=symlog_y)
        finite = np.concatenate([np.asarray(y, float).ravel() for _, y in series.values()])
        finite = finite[np.isfinite(finite)]
        if finite.size and finite.min() < finite.max():  # whole decades: float noise cannot move the ticks
            ax.set_ylim(_decade_floor(finite.min(), symlog_y), -_decade_floor(-finite.max(), symlog_y))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(_wrapped(title, fig), fontsize=10)
    ax.legend(fontsize=8)
    return ax


def _decade_floor(value: float, linthresh: float) -> float:
    """The largest of 0, +-linthresh and the signed powers of ten beyond it that is at most ``value``: a
    symlog axis's lower limit (its upper limit is ``-_decade_floor(-top)``)."""
    if value >= 0:
        return 0.0 if value < linthresh else float(10.0 ** np.floor(np.log10(value) + 1e-9))
    return -float(10.0 ** np.ceil(np.log10(max(-value, linthresh)) - 1e-9))


def plot_bound_growth(log10_G: dict[str, dict[int, float]], title: str,
                      ax: plt.Axes | None = None) -> plt.Axes:
    """log10 G(w) of Theorem 5 against the sequence length T, one line per model."""
    series = {m: (np.array(sorted(v)), np.array([v[t] for t in sorted(v)])) for m, v in log10_G.items()}
    return line_chart(series, "sequence length T (steps, log scale)", r"$\log_{10} G(w)$ (Theorem 5)", title,
                      ax, style="o-", log_x=True)


def plot_jacobian_decay(log10_norms: dict[str, np.ndarray], title: str,
                        ax: plt.Axes | None = None) -> plt.Axes:
    """Mean over samples of log10 ||dh^(T)/dh^(t)|| against T - t, one line per model."""
    series = {m: (v.shape[-1] - 1 - np.arange(v.shape[-1]), np.nanmean(v, axis=0))
              for m, v in log10_norms.items()}
    ylabel = r"$\log_{10} \|\partial h^{(T)} / \partial h^{(t)}\|_2$ (mean over samples)"
    return line_chart(series, "T - t (steps)", ylabel, title, ax)


def plot_lyapunov_spectra(exponents: dict[str, np.ndarray], title: str,
                          ax: plt.Axes | None = None) -> plt.Axes:
    """Lyapunov exponents (nats per step, mean over samples) against their index, one line per model;
    exponents of -inf (directions every step zeroes, e.g. ReLU units that never fire) are not drawn."""
    series = {m: (np.arange(1, v.shape[-1] + 1), np.mean(v, axis=0)) for m, v in exponents.items()}
    return line_chart(series, "index i (descending)", r"Lyapunov exponent $\lambda_i$ (nats / step, symlog)",
                      title, ax, style=".-", zero_line=True, symlog_y=0.1)


ZERO_NOTE = "on the floor: exactly 0 (underflowed)"


def semilogy_gradient(ax: plt.Axes, steps: np.ndarray, grad: np.ndarray, label: str = "_nolegend_",
                      color: tuple[float, float, float] | None = None) -> None:
    """``||dL/dh^(0)||`` against ``steps`` on a log axis. A gradient that vanished below float32 reads
    exactly 0, which a log axis cannot show: those steps are marked on the panel's floor in the line's
    colour, keyed in the legend by :data:`ZERO_NOTE`, so a vanished gradient is seen rather than left out."""
    grad = np.asarray(grad, dtype=float)
    line = ax.semilogy(steps, np.where(grad > 0, grad, np.nan), label=label, color=color)[0]
    zero = grad == 0
    if zero.any():
        row = sum(other.get_gid() == "zero-gradient" for other in ax.get_lines())  # one row per model
        ax.plot(np.asarray(steps)[zero], np.full(int(zero.sum()), 0.02 + 0.03 * row), "v",
                color=line.get_color(), ms=4, clip_on=False, transform=ax.get_xaxis_transform(),
                gid="zero-gradient")
        if row == 0:  # the legend's key to the marks
            ax.plot([], [], "v", color="gray", ms=4, label=ZERO_NOTE)


def log_band(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A min-max band drawable on a log axis: where a seed's value is exactly 0 (a vanished gradient) the
    band reaches down to the smallest positive value of the band, not left out; where every seed's is 0,
    none is drawn (those steps are marked, :func:`semilogy_gradient`)."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    positive = np.concatenate([low[low > 0], high[high > 0]])
    floor = positive.min() if positive.size else np.nan
    drawn = high > 0
    return np.where(drawn, np.where(low > 0, low, floor), np.nan), np.where(drawn, high, np.nan)


def key_zero_marks(ax: plt.Axes) -> None:
    """A legend holding only :func:`semilogy_gradient`'s key to the zero marks, on a panel that has them
    (where the models' colours are keyed elsewhere or there is one model)."""
    zero_key = [line for line in ax.get_lines() if line.get_label() == ZERO_NOTE]
    if zero_key:
        ax.legend(handles=zero_key, fontsize=7, loc="upper right")


@styled()
def plot_training_dynamics(steps: dict[str, np.ndarray], margins: dict[str, np.ndarray],
                           gradients: dict[str, np.ndarray], title: str) -> plt.Figure:
    """Fig. 4's two panels: the spectral margin max_i |sigma_i - 1| and ||dL/dh^(0)|| over training."""
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.2))
    for model in steps:
        axes[0].plot(steps[model], margins[model], label=model)
        semilogy_gradient(axes[1], steps[model], gradients[model], model)
    axes[0].set_ylabel(r"spectral margin $\max_i |\sigma_i - 1|$")
    axes[1].set_ylabel(r"$\|\partial L / \partial h^{(0)}\|_2$ (log scale)")
    for ax in axes:  # beside the panel, never over a curve
        ax.set_xlabel("training step")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(_wrapped(title, fig), fontsize=10)
    return fig


@styled()
def plot_learning_curves(curves: dict[int, dict[str, dict[str, np.ndarray]]], metric: str,
                         baseline: float | dict[int, float] | None, title: str,
                         length_name: str = "L", log_scale: bool | None = None,
                         data_name: str = "validation", column_notes: dict[Any, str] | None = None
                         ) -> plt.Figure:
    """Fig. 1-style grid: for each sequence length (columns), ``metric`` on the ``data_name`` data (top) and
    ``||dL/dh^(0)||`` (bottom) over training, one line per model. ``curves[L][model]`` holds arrays
    ``steps``, ``metric``, ``grad_steps``, ``grad``; columns in the order of ``curves``, titled
    ``"{length_name} = {L}"`` (just ``L`` when ``length_name`` is empty). With ``metric_low``/``metric_high``
    and ``grad_low``/``grad_high`` (the spread over seeds) a band is drawn; on a log axis the line is
    ``metric_median``/``grad_median`` where given (the median over seeds: a mean there is the largest seed's
    curve). ``log_scale`` for the metric's axis; by default log only when the values span more than a
    decade. A model keeps its colour in every column (one kept only at some lengths too), and the first
    column's legend keys them all; a column's two panels share their step axis. ``column_notes[L]``,
    where given, is a second line of column L's title (what its curves leave out, such as a seed that
    diverged)."""
    lengths = list(curves)
    models = list(dict.fromkeys(model for panel in curves.values() for model in panel))
    colour = dict(zip(models, sns.color_palette("tab10", len(models)), strict=True))
    if log_scale is None:
        values = np.concatenate([c["metric"] for v in curves.values() for c in v.values()])
        positive = values[values > 0]
        log_scale = bool(positive.size > 0 and positive.max() > 10 * positive.min())
    fig, axes = plt.subplots(2, len(lengths), figsize=(4.5 * len(lengths), 7), squeeze=False, sharex="col")
    for col, L in enumerate(lengths):
        for model, c in curves[L].items():
            centre = c["metric_median"] if log_scale and "metric_median" in c else c["metric"]
            draw = axes[0, col].semilogy if log_scale else axes[0, col].plot
            line = draw(c["steps"], centre, label=model, color=colour[model])[0]
            gradient = c.get("grad_median", c["grad"])
            semilogy_gradient(axes[1, col], c["grad_steps"], gradient, model, colour[model])
            if "metric_low" in c:  # the spread over seeds
                axes[0, col].fill_between(c["steps"], c["metric_low"], c["metric_high"], alpha=0.2,
                                          color=line.get_color(), lw=0)
                grad_band = log_band(c["grad_low"], c["grad_high"])
                axes[1, col].fill_between(c["grad_steps"], *grad_band, alpha=0.2, color=line.get_color(),
                                          lw=0)
        level = baseline.get(L) if isinstance(baseline, dict) else baseline
        if level is not None:
            axes[0, col].axhline(level, color="black", ls=":", lw=1, label=f"baseline {level:.3g}")
        heading, note = f"{length_name} = {L}" if length_name else str(L), (column_notes or {}).get(L)
        axes[0, col].set_title(heading + (f"\n{note}" if note else ""), fontsize=10)
        axes[0, col].set_ylabel(f"{data_name} {metric}{' (log scale)' if log_scale else ''}")
        axes[1, col].set_ylabel(r"$\|\partial L / \partial h^{(0)}\|_2$ (log scale)")
        axes[1, col].set_xlabel("training step")
        for ax in axes[:, col]:  # at most 5 step ticks: 5-digit labels collide in a 4.5-inch column
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
    baseline_key = [line for line in axes[0, 0].get_lines() if line.get_label().startswith("baseline")]
    axes[0, 0].legend(handles=[Line2D([], [], color=colour[m], label=m) for m in models] + baseline_key,
                      fontsize=8)
    for ax in axes[1]:  # the models' colours are keyed above
        key_zero_marks(ax)
    fig.suptitle(_wrapped(title, fig), fontsize=10)
    return fig


@styled()
def plot_depth_sweep(accuracy: dict[str, dict[int, list[float]]],
                     curves: dict[str, tuple[np.ndarray, np.ndarray]], deepest: int,
                     title: str) -> plt.Figure:
    """Fig. 5: test accuracy against the number of hidden layers L (left: the mean over seeds as a line,
    each seed as a dot, nudged sideways per model so that seeds at the same accuracy stay apart) and the
    validation accuracy over training at the deepest L (right), one line per model. A variant
    ``"name (...)"`` is drawn dashed in the colour of ``name``."""
    bases = list(dict.fromkeys(model.split(" (")[0] for model in accuracy))
    colour = dict(zip(bases, sns.color_palette("tab10", len(bases)), strict=True))
    fig, axes = plt.subplots(1, 2, figsize=(13.5, 4.6))
    for rank, (model, by_depth) in enumerate(accuracy.items()):
        depths = sorted(by_depth)
        style = {"color": colour[model.split(" (")[0]], "ls": "--" if " (" in model else "-", "label": model}
        axes[0].plot(depths, [np.nanmean(by_depth[d]) for d in depths], **style)
        nudge = (rank - (len(accuracy) - 1) / 2) * 0.6
        for d in depths:
            axes[0].plot([d + nudge] * len(by_depth[d]), by_depth[d], ls="none", marker="o", ms=4,
                         mfc="white" if " (" in model else style["color"], mec=style["color"], alpha=0.8)
        axes[1].plot(*curves[model], **style)
    axes[0].set_xlabel("hidden layers L")
    axes[0].set_ylabel("test accuracy (fraction)")
    axes[1].set_xlabel("training step")
    axes[1].set_ylabel(f"validation accuracy at L = {deepest} (fraction)")
    for ax in axes:
        ax.axhline(0.1, color="black", ls=":", lw=1, label="chance 0.1")
        ax.set_ylim(0, 1)
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside: no curve is covered
    fig.suptitle(_wrapped(title, fig), fontsize=10)
    return fig
