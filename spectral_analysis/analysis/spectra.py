"""Per-matrix spectra: one row for every weight matrix of a model, the recurrent ones included
(``spectral-analysis spectra``; WeightWatcher's table, which skips recurrent layers).

Matrices: each layer's transition ``W`` (dense, materialized from its factors; a gated model's stacked
gate blocks), its input weights and the read-out; for a feed-forward net each linear layer. Columns:
``N >= M`` the sizes; ``sigma_max`` (the spectral norm ``||W||``), ``sigma_min``, ``condition_number``
``sigma_max / sigma_min``, ``frobenius_norm``, ``spectral_margin`` ``max_i |sigma_i - 1|`` (the papers'),
and WeightWatcher's columns for the same quantities: ``spectral_norm`` (its lambda_max, the largest
eigenvalue of ``W^T W``, i.e. ``sigma_max^2``), ``stable_rank`` (``||W||_F^2 / lambda_max``),
``num_evals``, and the power-law fit of the eigenvalues ``sigma_i^2`` by the ``powerlaw`` package with
``xmax`` at the largest (``alpha``, ``xmin``, ``D`` the Kolmogorov-Smirnov distance), made only with at
least :data:`MIN_EVALS_FOR_ALPHA` eigenvalues.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

MIN_EVALS_FOR_ALPHA = 50  # fewer eigenvalues leave no tail to fit


def weight_matrices(model: nn.Module) -> list[tuple[str, str, Tensor]]:
    """``(name, kind, W)`` for every weight matrix (float64, detached), layer by layer."""
    with torch.no_grad():
        if hasattr(model, "transition_matrix") and hasattr(model, "input_weights"):
            found = []
            for layer in range(model.num_layers):
                found.append((f"transition[{layer}]", "transition", model.transition_matrix(layer)))
                found.append((f"input[{layer}]", "input", model.input_weights[layer]))
            found.append(("output", "output", model.output.weight))
        elif hasattr(model, "weight_matrices"):
            weights = model.weight_matrices()
            kinds = ["input", *["hidden"] * (len(weights) - 2), "output"]
            found = [(f"linear[{i}]", kind, w)
                     for i, (kind, w) in enumerate(zip(kinds, weights, strict=True))]
        else:
            raise ValueError(f"a {type(model).__name__} exposes neither transitions nor weight matrices")
        return [(name, kind, w.detach().to(torch.float64).cpu()) for name, kind, w in found]


def power_law_fit(evals: np.ndarray) -> dict[str, float | None]:
    """``alpha``, ``xmin`` and ``D`` of a power law fitted to the eigenvalues (``None`` when too few)."""
    if len(evals) < MIN_EVALS_FOR_ALPHA:
        return {"alpha": None, "xmin": None, "D": None}
    import powerlaw

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = powerlaw.Fit(evals, xmax=float(evals.max()), verbose=False)
    return {"alpha": float(fit.alpha), "xmin": float(fit.xmin), "D": float(fit.D)}


def matrix_row(name: str, kind: str, W: Tensor) -> dict[str, Any]:
    """The row of one matrix (module docstring)."""
    if W.dim() != 2 or 0 in W.shape:
        raise ValueError(f"{name}: expected a non-empty 2-D matrix, got shape {tuple(W.shape)}")
    if not bool(torch.isfinite(W).all()):
        raise ValueError(f"{name}: the matrix has non-finite entries")
    sigma = torch.linalg.svdvals(W).numpy()
    evals = np.sort(sigma ** 2)
    frobenius = float(np.sqrt(evals.sum()))
    top, bottom = float(sigma.max()), float(sigma.min())
    return {"name": name, "kind": kind, "N": max(W.shape), "M": min(W.shape), "sigma_max": top,
            "sigma_min": bottom, "condition_number": top / bottom if bottom > 0 else math.inf,
            "frobenius_norm": frobenius, "spectral_margin": float(np.abs(sigma - 1.0).max()),
            "spectral_norm": top ** 2, "stable_rank": frobenius ** 2 / top ** 2 if top > 0 else 0.0,
            "num_evals": len(evals), **power_law_fit(evals[evals > 0])}


def spectral_table(model: nn.Module) -> list[dict[str, Any]]:
    """One row per weight matrix of ``model``.

    ```python
    >>> from spectral_analysis.nn import build_model
    >>> rows = spectral_table(build_model("spectral", 2, 8, 3, r=0.1))
    >>> transition = rows[0]
    >>> [r.get("name") for r in rows], transition.get("sigma_max") <= 1.1 + 1e-6
    (['transition[0]', 'input[0]', 'output'], True)

    ```
    """
    return [matrix_row(name, kind, W) for name, kind, W in weight_matrices(model)]
