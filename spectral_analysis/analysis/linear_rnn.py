"""The linear-RNN population risk of the earlier version of the paper (Section 6, Claim 1, A.6).

Setting: ``h^(0) = 0``, no activation, ``o(X) = Y script-W vec(X)`` with
``script-W = (W | W^2 | ... | W^t)`` (``n x nt``) and ``X = (x^(0) | ... | x^(t-1))``.
**Index order** (the paper's pairing, fixed here): column block ``i`` of ``X`` (i = 1..t) is
multiplied by ``W^i``, so ``x^(i-1)`` is the input seen ``i`` steps before the output (the paper's
``x^(0)`` is the most recent input). ``vec`` stacks these blocks: ``vec(X) = (x^(0); ...; x^(t-1))``.
Targets ``y = A vec(X) + eta`` with ``E[eta | X] = 0``, ``Sigma = E[vec X vec X^T]``, ``C = E||eta||^2``.

- Claim 1 (risk): ``R[W] = ||(Y script-W - A) Sigma^(1/2)||_F^2 + C`` (:func:`population_risk`).
- The exact gradient (:func:`risk_gradient`): with ``G = (Y script-W - A) Sigma`` cut into blocks
  ``G_i`` (``n_y x n``), ``grad R = 2 sum_i sum_{j<i} (W^j)^T Y^T G_i (W^(i-1-j))^T``, since
  ``d(W^i) = sum_j W^j dW W^(i-1-j)``.
- Claim 1's gradient as printed (:func:`printed_gradient`):
  ``(Y script-W - A) Sigma (I | 2W | ... | t W^(t-1))^T``. It drops the factor 2 and ``Y^T``, and
  treats ``W`` and ``dW`` as commuting (which A.6's remark admits).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class LinearRNNProblem:
    """``Y (n_y, n)``, ``A (n_y, n t)``, ``Sigma (n t, n t)`` symmetric PSD, ``C >= 0``; float64."""

    Y: Tensor
    A: Tensor
    Sigma: Tensor
    C: float
    t: int

    def __post_init__(self) -> None:
        ny, n = self.Y.shape
        if self.t < 1:
            raise ValueError(f"the length t must be >= 1, got {self.t}")
        if tuple(self.A.shape) != (ny, n * self.t):
            raise ValueError(f"A must have shape ({ny}, {n * self.t}) = (n_y, n t), "
                             f"got {tuple(self.A.shape)}")
        if tuple(self.Sigma.shape) != (n * self.t, n * self.t):
            raise ValueError(f"Sigma must be ({n * self.t}, {n * self.t}), got {tuple(self.Sigma.shape)}")
        if not torch.allclose(self.Sigma, self.Sigma.T, atol=1e-12):
            raise ValueError("Sigma must be symmetric")
        if float(torch.linalg.eigvalsh(self.Sigma).min()) < -1e-10:
            raise ValueError("Sigma must be positive semi-definite (it is a second moment)")
        if self.C < 0:
            raise ValueError(f"C = E||eta||^2 must be >= 0, got {self.C}")

    @property
    def hidden(self) -> int:
        return self.Y.shape[1]


def random_problem(n: int, t: int, ny: int | None = None, noise: float = 0.1,
                   generator: torch.Generator | None = None) -> LinearRNNProblem:
    """A well-conditioned random problem: Gaussian Y and A, ``Sigma = I + B B^T / (n t)``."""
    ny = n if ny is None else ny
    gen = generator or torch.Generator().manual_seed(0)
    Y = torch.randn(ny, n, generator=gen, dtype=torch.float64) / n ** 0.5
    A = torch.randn(ny, n * t, generator=gen, dtype=torch.float64) / (n * t) ** 0.5
    B = torch.randn(n * t, n * t, generator=gen, dtype=torch.float64)
    return LinearRNNProblem(Y, A, torch.eye(n * t, dtype=torch.float64) + B @ B.T / (n * t), noise, t)


def stacked_powers(W: Tensor, t: int) -> Tensor:
    """``script-W = (W | W^2 | ... | W^t)``, ``(n, n t)``."""
    powers, P = [], W
    for _ in range(t):
        powers.append(P)
        P = P @ W
    return torch.cat(powers, dim=1)


def _check_transition(W: Tensor, problem: LinearRNNProblem) -> None:
    n = problem.hidden
    if tuple(W.shape) != (n, n):
        raise ValueError(f"W must be ({n}, {n}) to match Y's {n} columns, got {tuple(W.shape)}")


def population_risk(W: Tensor, problem: LinearRNNProblem) -> Tensor:
    """Claim 1: ``||(Y script-W - A) Sigma^(1/2)||_F^2 + C`` as ``tr(E Sigma E^T) + C`` (differentiable)."""
    _check_transition(W, problem)
    E = problem.Y @ stacked_powers(W, problem.t) - problem.A
    return torch.einsum("ij,jk,ik->", E, problem.Sigma, E) + problem.C


def optimal_risk(problem: LinearRNNProblem) -> float:
    """``R* = C``: the risk when ``Y script-W = A`` is reachable; a lower bound otherwise."""
    return problem.C


def monte_carlo_risk(W: Tensor, problem: LinearRNNProblem, samples: int,
                     generator: torch.Generator | None = None) -> tuple[float, float]:
    """Mean and standard error of ``||Y script-W vec X - y||^2`` over Gaussian samples
    ``vec X ~ N(0, Sigma)``, ``eta ~ N(0, C / n_y I)`` (any law with these moments has the same risk)."""
    _check_transition(W, problem)
    gen = generator or torch.Generator().manual_seed(0)
    ny, d = problem.A.shape
    L = torch.linalg.cholesky(problem.Sigma + 1e-12 * torch.eye(d, dtype=problem.Sigma.dtype))
    x = torch.randn(samples, d, generator=gen, dtype=torch.float64) @ L.T
    eta = torch.randn(samples, ny, generator=gen, dtype=torch.float64) * (problem.C / ny) ** 0.5
    y = x @ problem.A.T + eta
    with torch.no_grad():
        losses = ((x @ (problem.Y @ stacked_powers(W, problem.t)).T - y) ** 2).sum(dim=1)
    return float(losses.mean()), float(losses.std() / samples ** 0.5)


def risk_gradient(W: Tensor, problem: LinearRNNProblem) -> Tensor:
    """The exact ``grad_W R`` (non-commuting products kept in order; see the module docstring)."""
    _check_transition(W, problem)
    n, t = problem.hidden, problem.t
    G = (problem.Y @ stacked_powers(W, t) - problem.A) @ problem.Sigma
    powers = [torch.eye(n, dtype=W.dtype, device=W.device)]
    for _ in range(t - 1):
        powers.append(powers[-1] @ W)
    grad = torch.zeros_like(W)
    for i in range(1, t + 1):
        YG = problem.Y.T @ G[:, (i - 1) * n:i * n]
        for j in range(i):
            grad = grad + powers[j].T @ YG @ powers[i - 1 - j].T
    return 2 * grad


def printed_gradient(W: Tensor, problem: LinearRNNProblem) -> Tensor:
    """Claim 1's gradient exactly as printed: ``(Y script-W - A) Sigma (I | 2W | ... | t W^(t-1))^T``.

    Only defined when ``n_y = n`` (the product is ``n_y x n``, compared with the ``n x n`` gradient)."""
    _check_transition(W, problem)
    n, t = problem.hidden, problem.t
    if problem.Y.shape[0] != n:
        raise ValueError("the printed gradient has shape (n_y, n); it is comparable with grad_W R only "
                         "when n_y = n")
    factors, P = [], torch.eye(n, dtype=W.dtype, device=W.device)
    for i in range(1, t + 1):
        factors.append(i * P)
        P = P @ W
    return (problem.Y @ stacked_powers(W, t) - problem.A) @ problem.Sigma @ torch.cat(factors, dim=1).T


def risk_hessian(W: Tensor, problem: LinearRNNProblem) -> Tensor:
    """The Hessian of R with respect to ``vec(W)`` (row-major), ``(n^2, n^2)``: the Jacobian of the
    closed-form gradient, by autograd."""
    n = problem.hidden

    def gradient_of(flat: Tensor) -> Tensor:
        return risk_gradient(flat.reshape(n, n), problem).reshape(-1)

    return torch.autograd.functional.jacobian(gradient_of, W.detach().reshape(-1))
