"""Figures of an analysis report (``spectral-analysis analyze``): Jacobians, Lyapunov, trajectories."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from spectral_analysis.plotting.paper_figures import key_zero_marks, save_figure, semilogy_gradient, styled


def _finite(values: list[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _note_left_out(ax: plt.Axes, values: np.ndarray, what: str) -> None:
    """Say in the panel's title how many values it could not draw (the report's nulls), so an empty or gappy
    curve is not read as missing data."""
    left_out = int(np.isnan(values).sum())
    if left_out:
        ax.set_title(textwrap.fill(f"{left_out} of {values.size} not drawn: {what}", 48), fontsize=8)


@styled()
def plot_analysis(report: dict[str, Any], out: str | Path) -> list[Path]:
    """Write the report's figures into ``out``; returns their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    name = report["model"]["name"]
    paths = []
    norms = _finite(report["jacobian_log10_norms"])
    T = len(norms) - 1
    lag = T - np.arange(T + 1)
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    steps = np.arange(T + 1)
    for key, label in (("state_norm_max", "largest"), ("state_norm_median", "median")):
        sizes = _finite(report[key])
        axes[3].semilogy(steps, np.where(sizes > 0, sizes, np.nan), label=f"{label} over samples")
    _note_left_out(axes[3], _finite(report["state_norm_max"]), "the largest state overflowed float64")
    axes[3].set_xlabel("t (step)")
    axes[3].set_ylabel(r"$\|h^{(t)}\|$ (forward state)")
    axes[3].legend(fontsize=8)
    axes[0].plot(lag, norms, label=r"$\log_{10}\|\partial h^{(T)}/\partial h^{(t)}\|$")
    if report["jacobian_log10_bound"] is not None:
        axes[0].plot(lag, _finite(report["jacobian_log10_bound"]), "--", label=r"$\log_{10}\|W\|^{T-t}$")
    axes[0].set_xlabel("T - t (steps)")
    axes[0].set_ylabel("log10 spectral norm")
    axes[0].legend(fontsize=8)
    conditions = _finite(report["jacobian_log10_condition"])
    axes[1].plot(lag, conditions)
    _note_left_out(axes[1], conditions, "infinite (J(t) singular in a sample) or undefined (J(t) = 0)")
    axes[1].set_xlabel("T - t (steps)")
    axes[1].set_ylabel("log10 condition number")
    grads = _finite(report["grad_norms"])
    semilogy_gradient(axes[2], steps, grads)
    key_zero_marks(axes[2])
    axes[2].set_xlabel("t (step)")
    axes[2].set_ylabel(r"$\|\partial L/\partial h^{(t)}\|$")
    fig.suptitle(f"{name}: Jacobian products, gradient flow and state size ({report['task']}, T = {T})",
                 fontsize=11)
    paths.append(save_figure(fig, out / "jacobians.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    exponents = _finite(report["lyapunov_exponents"])
    ax.plot(np.arange(1, len(exponents) + 1), exponents, "o-", ms=3)
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xlabel("index i")
    ax.set_ylabel(r"Lyapunov exponent $\lambda_i$ (nats / step)")
    ax.set_title(f"{name}: Lyapunov spectrum ({report['task']})", fontsize=11)
    paths.append(save_figure(fig, out / "lyapunov.png"))

    trajectory = report.get("trajectory")
    if isinstance(trajectory, list) and trajectory:
        steps = np.array([row["step"] for row in trajectory])
        fig, axes = plt.subplots(1, 3, figsize=(14, 4))
        axes[0].plot(steps, [row["spectral_margin"] for row in trajectory])
        axes[0].set_ylabel(r"spectral margin $\max_i|\sigma_i - 1|$")
        axes[1].semilogy(steps, [row["condition_number"] for row in trajectory])
        axes[1].set_ylabel("condition number of W")
        semilogy_gradient(axes[2], steps, _finite([row["grad_h0_norm"] for row in trajectory]))
        key_zero_marks(axes[2])
        axes[2].set_ylabel(r"$\|\partial L/\partial h^{(0)}\|$")
        for ax in axes:
            ax.set_xlabel("training step")
        fig.suptitle(f"{name}: training trajectory", fontsize=11)
        paths.append(save_figure(fig, out / "trajectory.png"))
    return paths


@styled("white")
def plot_singular_value_heatmap(steps: np.ndarray, singular_values: np.ndarray, title: str,
                                ax: plt.Axes | None = None) -> plt.Axes:
    """Singular values of W (rows: index, columns: training step) as a heat map on ``ax`` (default: a new
    figure)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    fig = ax.figure
    first, last = float(steps[0]), float(steps[-1])
    if first == last:  # one recorded step: give it a visible width
        first, last = first - 0.5, last + 0.5
    image = ax.imshow(singular_values.T, aspect="auto", origin="upper", cmap="viridis",
                      extent=(first, last, singular_values.shape[1], 0))
    fig.colorbar(image, ax=ax, label=r"$\sigma_i$")
    ax.set_xlabel("training step")
    ax.set_ylabel("index i (descending)")
    ax.set_title(textwrap.fill(title, width=int(12 * fig.get_figwidth())), fontsize=11)
    return ax
