"""Theorem 5 of the earlier version: "if sigma_min(W) >= e > 0, all critical points are global minima".

Its proof claims ``||grad R||_F^2 >= sigma_min(Sigma)^2 min_i {i^2 e^(2(i-1))} (R - R*)``
(:func:`inequality_ratios` measures both sides). The step that fails is
``||sum_i i E_i (W^T)^(i-1)||^2 >= sum_i i^2 e^(2(i-1)) ||E_i||^2``: it drops the cross terms, which can
cancel. :func:`identity_teacher_counterexample` builds such a cancellation: with ``Y = I``,
``Sigma = I`` and teacher ``W* = a I``, the risk restricted to ``W = z`` (a real multiple of I, or 2 x 2
blocks ``[[x, -y], [y, x]]`` standing for the complex ``z = x + iy``) is
``R - C = (n or 2 per block) * sum_i |z^i - a^i|^2``, whose spurious local minima (for even t at real
negative z, for odd t at complex z) have ``|z| >= e`` once ``a`` is large enough. These matrices commute
with every term of the gradient, so a critical point of the reduced function is one of R; the Hessian
in all ``n^2`` directions then says what kind it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.optimize
import torch
from torch import Tensor

from spectral_analysis.analysis.linear_rnn.critical_points import (
    CriticalPoint,
    describe_point,
    gradient_scale,
    newton_polish,
)
from spectral_analysis.analysis.linear_rnn.risk import (
    LinearRNNProblem,
    optimal_risk,
    population_risk,
    risk_gradient,
    stacked_powers,
    theorem5_constant,
)


def inequality_ratios(W: Tensor, problem: LinearRNNProblem, e: float) -> Tensor:
    """``||grad R||_F^2 / (constant (R - R*))`` for a batch of W; Theorem 5's proof claims >= 1 whenever
    ``sigma_min(W) >= e``. ``R*`` from :func:`optimal_risk` (so the problem must have a known R*)."""
    gap = population_risk(W, problem) - optimal_risk(problem)
    squared = risk_gradient(W, problem).square().sum(dim=(-2, -1))
    return squared / (theorem5_constant(problem, e) * gap)


def inequality_path(W: Tensor, problem: LinearRNNProblem, e: float,
                    points: int = 61) -> dict[str, list[float]]:
    """Both sides of the inequality along the segment ``(1 - s) W + s W_star``, s in [0, 1]."""
    if problem.W_star is None:
        raise ValueError("the path runs to the teacher W_star; give a realizable problem")
    s = torch.linspace(0.0, 1.0, points, dtype=torch.float64)
    path = (1 - s).view(-1, 1, 1) * W + s.view(-1, 1, 1) * problem.W_star
    gap = population_risk(path, problem) - optimal_risk(problem)
    return {"s": s.tolist(), "grad_sq": risk_gradient(path, problem).square().sum(dim=(-2, -1)).tolist(),
            "bound": (theorem5_constant(problem, e) * gap).tolist(),
            "sigma_min": torch.linalg.svdvals(path).min(dim=-1).values.tolist()}


def scalar_spurious_minima(a: float, t: int, starts: int = 24) -> list[complex]:
    """Local minima ``z`` (Im z >= 0) of ``f(z) = sum_{i<=t} |z^i - a^i|^2`` other than the global
    ``z = a`` (f = 0), by BFGS from a polar grid of starts; rounded duplicates merged."""
    powers = np.arange(1, t + 1)

    def value_and_gradient(xy: np.ndarray) -> tuple[float, np.ndarray]:
        z = complex(xy[0], xy[1])
        residual = z ** powers - a ** powers
        # (d/dx + i d/dy) f = 2 sum_i i conj(z)^(i-1) (z^i - a^i)
        g = 2 * np.sum(powers * np.conj(z) ** (powers - 1) * residual)
        return float(np.sum(np.abs(residual) ** 2)), np.array([g.real, g.imag])

    found: list[complex] = []
    for k in range(starts):
        radius = a * (0.6 + 0.6 * (k % 3) / 2)
        angle = np.pi * (k // 3 + 1) / (starts // 3 + 1)
        fit = scipy.optimize.minimize(value_and_gradient, [radius * np.cos(angle), radius * np.sin(angle)],
                                      jac=True, method="BFGS", options={"gtol": 1e-13})
        z = complex(fit.x[0], abs(fit.x[1]))
        spurious = fit.fun > 1e-10 * a ** (2 * t) and np.linalg.norm(fit.jac) < 1e-8 * a ** (2 * t)
        if spurious and all(abs(z - w) > 1e-6 * a for w in found):
            found.append(z)
    return sorted(found, key=lambda w: (abs(w.imag) > 1e-9, -abs(w)))


def lift(z: complex, a: float, n: int) -> Tensor | None:
    """``z I_n`` for real z; for complex z, 2 x 2 blocks ``[[x, -y], [y, x]]`` with ``a`` on the last
    diagonal entry when n is odd; ``None`` for complex z and n = 1."""
    if abs(z.imag) <= 1e-9 * max(1.0, abs(z)):
        return z.real * torch.eye(n, dtype=torch.float64)
    if n < 2:
        return None
    W = a * torch.eye(n, dtype=torch.float64)
    for b in range(0, n - 1, 2):
        W[b:b + 2, b:b + 2] = torch.tensor([[z.real, -z.imag], [z.imag, z.real]], dtype=torch.float64)
    return W


def identity_teacher(n: int, t: int, a: float, noise: float = 0.0) -> LinearRNNProblem:
    """``Y = I``, ``Sigma = I``, teacher ``W* = a I``."""
    eye = torch.eye(n, dtype=torch.float64)
    return LinearRNNProblem(eye, stacked_powers(a * eye, t), torch.eye(n * t, dtype=torch.float64), noise, t,
                            a * eye)


@dataclass
class Counterexample:
    """A critical point with ``sigma_min(W) >= e`` and ``R - R* > 0``; and, when it survives, the
    critical point Newton's method reaches from it after ``Y`` and ``Sigma`` are perturbed."""

    problem: LinearRNNProblem
    a: float
    z: complex
    point: CriticalPoint
    perturbed_problem: LinearRNNProblem
    perturbed_point: CriticalPoint | None
    tolerance: float


def _verified(W: Tensor, problem: LinearRNNProblem, e: float) -> CriticalPoint | None:
    W = newton_polish(W, problem)
    point = describe_point(W, problem, optimal_risk(problem))
    ok = point.grad_norm <= 1e-9 * gradient_scale(problem) and point.gap > 1e-6 and point.sigma_min >= e
    return point if ok else None


def _perturbed(problem: LinearRNNProblem, size: float, gen: torch.Generator) -> LinearRNNProblem:
    n, t, teacher = problem.hidden, problem.t, problem.W_star
    Y = problem.Y + size * torch.randn(n, n, generator=gen, dtype=torch.float64)
    B = torch.randn(n * t, n * t, generator=gen, dtype=torch.float64)
    Sigma = problem.Sigma + size * B @ B.T / (n * t)
    return LinearRNNProblem(Y, Y @ stacked_powers(teacher, t), Sigma, problem.C, t, teacher)


def identity_teacher_counterexample(n: int, t: int, e: float, perturbation: float = 0.05,
                                    generator: torch.Generator | None = None) -> Counterexample | None:
    """A verified critical point of R with ``sigma_min >= e`` that is not a global minimum
    (``||grad R|| <= 1e-9 *`` scale, ``R - R* > 1e-6``), for the smallest ``a`` on the grid
    ``e * (1.05 ... 4)`` whose reduced function has a spurious minimum with ``|z| >= 1.1 e``. The point is
    then followed by Newton's method after perturbing ``Y`` and ``Sigma`` by ``perturbation`` (teacher
    kept); the first ``a`` whose point survives that is preferred. ``None`` when the family has no such
    point (t = 1, where R is convex; n = 1 with t odd)."""
    if not e > 0:
        raise ValueError(f"Theorem 5 needs e > 0; got e = {e}")
    if t < 2:
        return None
    gen = generator or torch.Generator().manual_seed(0)
    fallback = None
    for a in e * np.linspace(1.05, 4.0, 40):
        for z in scalar_spurious_minima(float(a), t):
            W = lift(z, float(a), n)
            if W is None or abs(z) < 1.1 * e:
                continue
            problem = identity_teacher(n, t, float(a))
            point = _verified(W, problem, e)
            if point is None:
                continue
            perturbed = _perturbed(problem, perturbation, gen)
            moved = _verified(point.W, perturbed, e)
            tolerance = 1e-9 * gradient_scale(problem)
            found = Counterexample(problem, float(a), z, point, perturbed, moved, tolerance)
            if moved is not None:
                return found
            fallback = fallback or found
    return fallback
