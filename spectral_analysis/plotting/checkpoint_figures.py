"""The figures that run the analyzers on kept checkpoints (the zoo's seed) rather than reading curves:
Theorem 5's G(w) against T, Jacobian products, Lyapunov spectra and singular values over training
(``zoo-addition``), and KRU's Fig. 6 (``kru-amplitude``: ||W||_2 and rho(W) against the soft unitary
amplitude)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from spectral_analysis.analysis import bound_report, jacobian_products, lyapunov_exponents
from spectral_analysis.analysis.checkpoint_data import checkpoint_task, sample_batch, task_split
from spectral_analysis.experiments.reading import read_grid
from spectral_analysis.io import load
from spectral_analysis.plotting.analysis import plot_singular_value_heatmap
from spectral_analysis.plotting.paper_figures import (
    Drawn,
    drawn_record,
    line_chart,
    plot_bound_growth,
    plot_jacobian_decay,
    plot_lyapunov_spectra,
    save_figure,
)
from spectral_analysis.train import load_checkpoint

BOUND_LENGTHS = (10, 30, 100, 300, 1000)


def analyzers(results: Path, out: Path) -> list[Drawn]:
    """G(w) against T, Jacobian decay, Lyapunov spectra and singular values over training, from the
    kept checkpoints of zoo-addition (the zoo's seed; float64)."""
    grid = read_grid(results, "zoo-addition")
    if grid is None:
        return []
    log10_G, jacobians, lyapunov, seeds = {}, {}, {}, set()
    for g in grid.groups:
        path = g.checkpoint()
        if path is None:
            continue
        seeds.add(g.checkpoint_seed())
        checkpoint = load_checkpoint(path)
        task = checkpoint_task(checkpoint.metadata)
        x, _ = sample_batch(task, task_split(task, "test"), 8, seed=0)
        model64 = checkpoint.model.double()
        jacobians[g.variant] = jacobian_products(model64, x.double()).log10_norms
        lyapunov[g.variant] = lyapunov_exponents(model64, x.double())
        if g.variant != "lstm":
            subject = load(path)
            log10_G[g.variant] = {T: bound_report(subject, length=T)["log10_G"] for T in BOUND_LENGTHS}
    size = (f"n = {grid.groups[0].rows[0]['hidden']}, addition T = 100; {grid.stamp()} kept, "
            f"drawn: seed {', '.join(map(str, sorted(seeds)))}")
    drawn = [
        save_figure(plot_bound_growth(log10_G, f"Theorem 5's G(w) against T, trained weights "
                                              f"({size})").figure, out / "bound_vs_T.png"),
        save_figure(plot_jacobian_decay(jacobians, f"Jacobian products over time ({size})").figure,
                    out / "jacobian_decay.png"),
        save_figure(plot_lyapunov_spectra(lyapunov, f"Lyapunov spectra ({size})").figure,
                    out / "lyapunov_spectra.png"),
    ]
    for variant in ("irnn", "spectral"):
        group = grid.group(variant)
        kept = group.singular_values() if group else None
        if kept is not None:
            axes = plot_singular_value_heatmap(kept[0], kept[1][0],
                                               f"{variant}: singular values of W over training ({size})")
            drawn.append(save_figure(axes.figure, out / f"singular_values_{variant}.png"))
    return [drawn_record(p, grid) for p in drawn]


def kru_amplitude(results: Path, out: Path) -> list[Drawn]:
    """KRU Fig. 6: ||W||_2 and rho(W) of the kept checkpoints against the amplitude, with the validation
    metric (NLL on the chorales) in the title."""
    grid = read_grid(results, "kru-amplitude")
    if grid is None:
        return []
    amplitudes = sorted(grid.values("penalty"))
    norms, radii, validation, seeds = [], [], [], set()
    for a in amplitudes:
        group = grid.group("kru", penalty=a)
        seeds.add(group.checkpoint_seed())
        W = (
            load_checkpoint(group.checkpoint())
            .model.transitions[0]
            .complex_matrix()
            .detach()
            .to(torch.complex128)
        )
        norms.append(float(torch.linalg.matrix_norm(W, ord=2)))
        radii.append(float(torch.linalg.eigvals(W).abs().max()))
        validation.append(group.final("final_valid").mean)
    series = {
        "spectral norm ||W||_2": (np.array(amplitudes), np.array(norms)),
        "spectral radius rho(W)": (np.array(amplitudes), np.array(radii)),
    }
    row = grid.groups[0].rows[0]
    title = (
        f"KRU Fig. 6, its JSB Chorales column: n = {row['hidden']} "
        f"(seed {', '.join(map(str, sorted(seeds)))}; "
        f"final validation {row['metric']} "
        + ", ".join(f"{m:.3g}" for m in validation)
        + f"; {grid.stamp()})"
    )
    axes = line_chart(
        series,
        "amplitude of the soft unitary constraint (log scale)",
        "value (unitary W: 1)",
        title,
        style="o-",
        log_x=True,
    )
    return [drawn_record(save_figure(axes.figure, out / "kru_amplitude.png"), grid)]
