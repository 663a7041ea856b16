"""Gradient descent on the linear-RNN risk in the SVD parameterization (earlier version, Corollary 1).

``W = U diag(sigma) V^T`` with ``U = H_n(u_n) ... H_1(u_1)`` and ``V`` likewise (Eq. 6-7, m1 = m2 = n)
and ``sigma = 2 r (f(sigma_hat) - 0.5) + sigma*`` (Eq. 8), so every singular value stays in
``[sigma* - r, sigma* + r] = [low, high]``.

A property that decides what this descent can reach: each nonzero reflector has determinant -1 and a
zero one is the identity with zero gradient (it never turns on), so ``det U`` and ``det V`` never change
along the descent, and with ``sigma > 0`` neither does ``sign det W``. A target with the other sign is
out of reach from that start (:func:`determinant_signs` reports the sign at every start).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from spectral_analysis.analysis.linear_rnn.critical_points import gradient_descent, minimize_each
from spectral_analysis.analysis.linear_rnn.risk import LinearRNNProblem, optimal_risk, population_risk
from spectral_analysis.linalg import orthogonal_to_reflectors
from spectral_analysis.linalg.householder import trapezoid_mask
from spectral_analysis.linalg.sigma_maps import SigmaMap
from spectral_analysis.linalg.svd_map import svd_compose_packed


def svd_sigma_map(low: float, high: float) -> SigmaMap:
    """Eq. 8's map onto ``[low, high]``: ``sigma* = (low + high) / 2``, ``r = (high - low) / 2``."""
    if not 0 < low < high:
        raise ValueError(f"the singular-value range must satisfy 0 < low < high, got [{low}, {high}]")
    return SigmaMap("sigmoid", (low + high) / 2, (high - low) / 2)


def svd_parameters(starts: Tensor, sigma_map: SigmaMap) -> list[Tensor]:
    """Packed reflectors ``Yu, Yv (K, n, n)`` and raw ``sigma_hat (K, n)`` with ``W = U diag(sigma) V^T``
    equal to each start; singular values outside the map's range are clamped just inside it first."""
    U, S, Vh = torch.linalg.svd(starts)
    low, high = sigma_map.bounds
    margin = 1e-3 * (high - low)
    S = S.clamp(low + margin, high - margin)
    Yu = torch.stack([orthogonal_to_reflectors(u) for u in U])
    Yv = torch.stack([orthogonal_to_reflectors(v) for v in Vh.mT])
    return [Yu, sigma_map.inverse(S), Yv]


def svd_transition(params: list[Tensor], sigma_map: SigmaMap) -> Tensor:
    """``W = U diag(sigma(sigma_hat)) V^T`` from ``[Yu, sigma_hat, Yv]`` (batched)."""
    Yu, sigma_hat, Yv = params
    mask = trapezoid_mask(Yu.shape[-2], Yu.shape[-1], dtype=Yu.dtype)
    return svd_compose_packed(Yu * mask, Yv * mask, sigma_map(sigma_hat))


def svd_objective(problem: LinearRNNProblem, sigma_map: SigmaMap) -> Callable[[list[Tensor]], Tensor]:
    """``[Yu, sigma_hat, Yv] -> R[W]`` per run, for :func:`gradient_descent` and :func:`minimize_each`."""
    return lambda params: population_risk(svd_transition(params, sigma_map), problem)


def determinant_signs(W: Tensor) -> Tensor:
    """``sign det W`` for a batch ``(K, n, n)``."""
    return torch.sign(torch.linalg.det(W))


Objective = Callable[[list[Tensor]], Tensor]


def descend_and_finish(problem: LinearRNNProblem, objective: Objective, params: list[Tensor],
                       to_W: Callable[[list[Tensor]], Tensor], tol: float,
                       iterations: int) -> tuple[dict[str, Any], Tensor]:
    """Gradient descent (how fast it reaches R*), then L-BFGS from where it stopped (where descent ends):
    per-run numbers (JSON-ready) and the final W."""
    r_star = optimal_risk(problem)
    clock = time.perf_counter()
    params, history = gradient_descent(objective, params, iterations)
    seconds = time.perf_counter() - clock
    gaps = history - r_star
    first = [int(torch.nonzero(col)[0]) if bool(col.any()) else None for col in (gaps <= tol).T]
    final, lbfgs_iterations, converged = minimize_each(objective, params)
    with torch.no_grad():
        W = to_W(final)
        final_gap = population_risk(W, problem) - r_star
    stride = max(1, iterations // 150)
    run = {"iterations_to_reach": first, "descent_gap": gaps[-1].tolist(),
           "seconds_per_iteration": seconds / iterations, "final_gap": final_gap.tolist(),
           "reached": (final_gap <= tol).tolist(), "lbfgs_iterations": lbfgs_iterations,
           "lbfgs_converged": converged,
           "singular_values": torch.linalg.svdvals(W).tolist(), "det_sign": determinant_signs(W).tolist(),
           "gap_history": gaps[::stride].T.tolist(), "history_stride": stride}
    return run, W
