"""Figures of a landscape report (``spectral-analysis landscape``): Theorem 5's inequality, the
critical points found, and gradient descent in the two parameterizations (Corollary 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter

from spectral_analysis.plotting.paper_figures import save_figure, styled

KIND_COLORS = {"minimum": "tab:green", "saddle": "tab:orange", "maximum": "tab:red",
               "degenerate": "tab:purple"}


def _inequality_figure(report: dict[str, Any], out: Path) -> Path:
    p, e = report["problem"], report["config"]["e"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    ax = axes[0]
    labels = {"outside": r"random W, $\sigma_{\min}(W) < e$",
              "inside": r"random W, $\sigma_{\min}(W) \geq e$"}
    for name, color in (("outside", "0.6"), ("inside", "tab:blue")):
        gap = np.array(report["samples"][name]["gap"])
        grad = np.array(report["samples"][name]["grad_sq"])
        ax.loglog(gap, grad, ".", ms=3, color=color, alpha=0.6, label=labels[name])
    gaps = np.array(report["samples"]["inside"]["gap"] + report["samples"]["outside"]["gap"])
    line = np.geomspace(gaps.min(), gaps.max(), 50)
    ax.loglog(line, p["theorem5_constant"] * line, "k--", label=r"Theorem 5: $c\,(R - R^*)$")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(r"risk gap $R(W) - R^*$")
    ax.set_ylabel(r"$\|\nabla_W R\|_F^2$")
    ax.set_title(f"Theorem 5's inequality, random problem (n = {p['n']}, t = {p['t']}, e = {e})", fontsize=10)
    ax.legend(fontsize=8)
    ax = axes[1]
    found = report["counterexample"]
    if found is None:
        ax.text(0.5, 0.5, "no counterexample in the identity-teacher family\n(t = 1, or n = 1 with t odd)",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        path = found["path"]
        ax.semilogy(path["s"], np.maximum(path["grad_sq"], 1e-30), label=r"$\|\nabla_W R\|_F^2$")
        ax.semilogy(path["s"], np.maximum(path["bound"], 1e-30), "--", label=r"$c\,(R - R^*)$")
        ax.set_xlabel(r"s along $W(s) = (1 - s)\,W_c + s\,W^*$")
        ax.set_ylabel("value (floored at 1e-30)")
        ax.set_title(f"counterexample: Y = I, Sigma = I, W* = {found['a']:.3g} I "
                     f"(n = {found['n']}, t = {found['t']});\n"
                     f"at s = 0 the gradient vanishes, R - R* = {found['point']['gap']:.3g}, "
                     rf"$\sigma_{{\min}}$ = {found['point']['sigma_min']:.3f}", fontsize=9)
        ax.legend(fontsize=8)
    return save_figure(fig, out / "landscape_inequality.png")


def _critical_points_figure(report: dict[str, Any], out: Path) -> Path:
    p, e = report["problem"], report["config"]["e"]
    fig, ax = plt.subplots(figsize=(8.5, 4.5))
    markers = {"inside": "o", "outside": "s", "plain descent": "^"}
    for point in report["critical_points"]:
        ax.scatter(point["sigma_min"], max(point["gap"], 0.0), s=45, marker=markers[point["sources"][0]],
                   color=KIND_COLORS[point["kind"]], edgecolor="black", linewidth=0.5)
    ax.axvline(e, color="black", ls="--", lw=1)
    ax.set_yscale("symlog", linthresh=1e-3)
    top = max([q["gap"] for q in report["critical_points"]] + [1.0])
    ax.set_ylim(-5e-4, top * 5)
    handles = [plt.Line2D([], [], ls="", marker="o", color=c, label=k) for k, c in KIND_COLORS.items()]
    handles += [plt.Line2D([], [], ls="", marker=m, color="0.4", label=f"from {k}")
                for k, m in markers.items()]
    handles.append(plt.Line2D([], [], ls="--", color="black", label=f"e = {e}"))
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xlabel(r"$\sigma_{\min}(W)$ at the critical point")
    ax.set_ylabel(r"risk gap $R(W) - R^*$ (symlog)")
    ax.set_title(f"critical points found (n = {p['n']}, t = {p['t']}, n_y = {p['n_y']})", fontsize=10)
    return save_figure(fig, out / "landscape_critical_points.png")


def _descent_figure(report: dict[str, Any], out: Path) -> Path:
    descent = report["descent"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, color in (("plain", "tab:blue"), ("svd", "tab:orange")):
        run = descent[name]
        for k, history in enumerate(run["gap_history"]):
            steps = np.arange(len(history)) * run["history_stride"]
            ax.semilogy(steps, np.maximum(history, 1e-16), color=color, lw=0.8, alpha=0.7,
                        label=("plain W" if name == "plain" else "SVD, Eq. 8") if k == 0 else None)
            ax.plot(steps[-1] * 1.04, max(run["final_gap"][k], 1e-16), marker="<", color=color, ms=5)
    ax.axhline(descent["tolerance"], color="black", ls=":", lw=1, label="reached tolerance")
    ax.set_xlabel("gradient-descent iteration (markers: after L-BFGS)")
    ax.set_ylabel(r"risk gap $R(W) - R^*$")
    ax.set_title("Corollary 1: descent from the same starts", fontsize=10)
    ax.legend(fontsize=8)
    return save_figure(fig, out / "landscape_descent.png")


@styled()
def plot_landscape(report: dict[str, Any], out: str | Path) -> list[Path]:
    """Write ``landscape_inequality.png``, ``landscape_critical_points.png``, ``landscape_descent.png``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return [_inequality_figure(report, out), _critical_points_figure(report, out),
            _descent_figure(report, out)]
