"""Critical points of the linear-RNN population risk (earlier version, Section 6).

- :func:`solve_gradient_zero`: a zero of ``grad R`` near a start, by minimizing ``||grad R||^2`` (this
  finds saddles and maxima too, which gradient descent avoids), then Newton polishing.
- :func:`classify_hessian`: minimum / saddle / maximum / degenerate from the Hessian's eigenvalues.
- :func:`search_critical_points`: many starts, duplicates merged, each point with its risk gap.
- :func:`gradient_descent`: batched gradient descent with a per-run Armijo step (one run per start);
  :func:`minimize_each`: L-BFGS per run, to see where descent ends regardless of its speed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.optimize
import torch
from torch import Tensor

from spectral_analysis.analysis.linear_rnn.risk import (
    LinearRNNProblem,
    population_risk,
    risk_gradient,
    risk_hessian,
)

KINDS = ("minimum", "saddle", "maximum", "degenerate")


@dataclass
class CriticalPoint:
    """A point with ``||grad R|| <= tol``: its risk gap ``R - R*`` and Hessian type."""

    W: Tensor
    gap: float
    grad_norm: float
    sigma_min: float
    kind: str
    hessian_min: float
    hessian_max: float
    starts: int  # how many starts converged here
    sources: list[str]  # the start sets that reached it


def classify_hessian(eigenvalues: Tensor, rtol: float = 1e-7) -> str:
    """``minimum`` (all > tol), ``maximum`` (all < -tol), ``saddle`` (both signs beyond tol),
    ``degenerate`` (some |lambda| <= tol and no sign change), tol = rtol * max |lambda|."""
    tol = rtol * max(float(eigenvalues.abs().max()), 1e-300)
    positive, negative = bool((eigenvalues > tol).any()), bool((eigenvalues < -tol).any())
    if positive and negative:
        return "saddle"
    if bool((eigenvalues.abs() <= tol).any()):
        return "degenerate"
    return "minimum" if positive else "maximum"


def solve_gradient_zero(W0: Tensor, problem: LinearRNNProblem, newton_steps: int = 5) -> Tensor:
    """Minimize ``||grad R(W)||^2`` from ``W0`` (BFGS; its gradient ``2 H grad R`` by double backward),
    then polish with Newton steps on ``grad R = 0`` (least-squares steps where H is singular).

    Unlike descent on R, this converges to saddles and maxima as readily as to minima; it can also stop
    at a local minimum of ``||grad R||^2`` that is not a zero (the caller checks the gradient)."""
    n = problem.hidden

    def squared_gradient(x: np.ndarray) -> tuple[float, np.ndarray]:
        W = torch.from_numpy(x).reshape(n, n).requires_grad_()
        value = risk_gradient(W, problem).square().sum()
        (grad,) = torch.autograd.grad(value, W)
        return float(value.detach()), grad.reshape(-1).numpy()

    fit = scipy.optimize.minimize(squared_gradient, W0.detach().reshape(-1).numpy(), jac=True, method="BFGS",
                                  options={"gtol": 1e-14, "maxiter": 3000})
    return newton_polish(torch.from_numpy(fit.x).reshape(n, n), problem, newton_steps)


def newton_polish(W: Tensor, problem: LinearRNNProblem, steps: int = 20) -> Tensor:
    """Newton steps on ``grad R = 0`` (least-squares steps where the Hessian is singular), while they
    reduce ``||grad R||``."""
    n = problem.hidden
    for _ in range(steps):
        g = risk_gradient(W, problem).reshape(-1, 1)
        step = torch.linalg.lstsq(risk_hessian(W, problem), g, driver="gelsd").solution
        candidate = W - step.reshape(n, n)
        if risk_gradient(candidate, problem).norm() >= g.norm():
            break
        W = candidate
    return W


def gradient_scale(problem: LinearRNNProblem) -> float:
    """``||grad R(0)||_F + ||A Sigma||_F``: the scale the critical-point tolerance is relative to."""
    n = problem.hidden
    zero = torch.zeros(n, n, dtype=problem.A.dtype)
    return float(risk_gradient(zero, problem).norm() + (problem.A @ problem.Sigma).norm())


def describe_point(W: Tensor, problem: LinearRNNProblem, r_star: float, source: str = "") -> CriticalPoint:
    eigenvalues = torch.linalg.eigvalsh(risk_hessian(W, problem))
    return CriticalPoint(W=W, gap=float(population_risk(W, problem)) - r_star,
                         grad_norm=float(risk_gradient(W, problem).norm()),
                         sigma_min=float(torch.linalg.svdvals(W).min()), kind=classify_hessian(eigenvalues),
                         hessian_min=float(eigenvalues.min()), hessian_max=float(eigenvalues.max()),
                         starts=1, sources=[source])


def catalogue(problem: LinearRNNProblem, candidates: Tensor, r_star: float,
              points: list[CriticalPoint] | None = None, source: str = "",
              rtol: float = 1e-9) -> tuple[list[CriticalPoint], int]:
    """Polish each candidate ``(K, n, n)`` by :func:`newton_polish`; add those with
    ``||grad R|| <= rtol * gradient_scale`` to ``points``, merging duplicates
    (``||W - W'||_F <= 1e-6 (1 + ||W||_F)``) and noting ``source`` among each point's sources; returns
    the points sorted by risk gap and how many candidates were not critical."""
    tol = rtol * gradient_scale(problem)
    points = [] if points is None else points
    missed = 0
    for W in candidates:
        W = newton_polish(W, problem)
        if float(risk_gradient(W, problem).norm()) > tol:
            missed += 1
            continue
        for point in points:
            if float((point.W - W).norm()) <= 1e-6 * (1.0 + float(W.norm())):
                point.starts += 1
                if source not in point.sources:
                    point.sources.append(source)
                break
        else:
            points.append(describe_point(W, problem, r_star, source))
    return sorted(points, key=lambda p: p.gap), missed


def search_critical_points(problem: LinearRNNProblem, starts: Tensor, r_star: float,
                           points: list[CriticalPoint] | None = None, source: str = "",
                           rtol: float = 1e-9) -> tuple[list[CriticalPoint], int]:
    """:func:`solve_gradient_zero` from each start ``(K, n, n)``, then :func:`catalogue`: the distinct
    critical points and the number of starts that ended at a local minimum of ``||grad R||^2`` that is
    not a zero."""
    solved = torch.stack([solve_gradient_zero(W0, problem, newton_steps=0) for W0 in starts])
    return catalogue(problem, solved, r_star, points, source, rtol)


def gradient_descent(objective: Callable[[list[Tensor]], Tensor], params: list[Tensor], iterations: int,
                     step: float = 1e-2) -> tuple[list[Tensor], Tensor]:
    """Batched gradient descent: ``objective(params)`` returns one value per run (dim 0 of every param).

    Each run keeps its own step, halved until Armijo's condition ``f(p - s g) <= f(p) - s ||g||^2 / 2``
    holds (at most 60 halvings; a run whose step underflows stays put) and doubled after a success.
    Returns the final parameters and the ``(iterations + 1, K)`` objective history."""
    runs = params[0].shape[0]
    steps = torch.full((runs,), step, dtype=params[0].dtype)
    params = [p.detach().clone() for p in params]
    history = []
    for _ in range(iterations):
        leaves = [p.requires_grad_() for p in params]
        value = objective(leaves)
        grads = torch.autograd.grad(value.sum(), leaves)
        value = value.detach()
        history.append(value)
        squared = sum(g.reshape(runs, -1).square().sum(dim=1) for g in grads)
        params = [p.detach() for p in leaves]
        pending = torch.ones(runs, dtype=torch.bool)
        for _ in range(60):
            shaped = [steps.view(-1, *[1] * (p.dim() - 1)) for p in params]
            trial = [p - s * g for p, s, g in zip(params, shaped, grads, strict=True)]
            with torch.no_grad():
                accepted = pending & (objective(trial) <= value - 0.5 * steps * squared)
            for p, q in zip(params, trial, strict=True):
                p[accepted] = q[accepted]
            pending &= ~accepted
            if not bool(pending.any()):
                break
            steps = torch.where(pending, steps / 2, steps)
        steps = torch.where(pending, steps, steps * 2)
    with torch.no_grad():
        history.append(objective(params))
    return params, torch.stack(history)


def minimize_each(objective: Callable[[list[Tensor]], Tensor], params: list[Tensor],
                  max_iterations: int = 3000) -> tuple[list[Tensor], list[int], list[bool]]:
    """Run L-BFGS separately on each run of a batched ``objective`` (as in :func:`gradient_descent`),
    to convergence or ``max_iterations``: where descent from there ends, regardless of its speed.
    Returns the final parameters, each run's iteration count and whether it converged."""
    shapes = [p.shape[1:] for p in params]
    sizes = [int(np.prod(shape)) for shape in shapes]
    finals, counts, converged = [], [], []
    for k in range(params[0].shape[0]):

        def value_and_gradient(x: np.ndarray) -> tuple[float, np.ndarray]:
            flat = torch.from_numpy(x).requires_grad_()
            parts = [c.reshape(1, *shape) for c, shape in zip(torch.split(flat, sizes), shapes, strict=True)]
            value = objective(parts).sum()
            (grad,) = torch.autograd.grad(value, flat)
            return float(value.detach()), grad.numpy()

        start = torch.cat([p[k].detach().reshape(-1) for p in params]).numpy()
        fit = scipy.optimize.minimize(value_and_gradient, start, jac=True, method="L-BFGS-B",
                                      options={"maxiter": max_iterations, "gtol": 1e-12, "ftol": 1e-15})
        finals.append(torch.from_numpy(fit.x))
        counts.append(int(fit.nit))
        converged.append(bool(fit.success))
    stacked = torch.stack(finals)
    split = torch.split(stacked, sizes, dim=1)
    return [c.reshape(-1, *shape) for c, shape in zip(split, shapes, strict=True)], counts, converged


def plain_objective(problem: LinearRNNProblem) -> Callable[[list[Tensor]], Tensor]:
    """``[W] -> R[W]`` per run, for :func:`gradient_descent` and :func:`minimize_each`."""
    return lambda params: population_risk(params[0], problem)
