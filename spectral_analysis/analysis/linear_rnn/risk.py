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
    """``Y (n_y, n)``, ``A (n_y, n t)``, ``Sigma (n t, n t)`` symmetric PSD, ``C >= 0``; float64.

    ``W_star``, when given, is a teacher with ``Y script-W_star = A`` (a realizable problem): then the
    global minimum is ``R* = C``, attained at ``W_star``."""

    Y: Tensor
    A: Tensor
    Sigma: Tensor
    C: float
    t: int
    W_star: Tensor | None = None

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
        if self.W_star is not None:
            if tuple(self.W_star.shape) != (n, n):
                raise ValueError(f"the teacher W_star must be ({n}, {n}), got {tuple(self.W_star.shape)}")
            residual = float((self.Y @ stacked_powers(self.W_star, self.t) - self.A).abs().max())
            if residual > 1e-9 * (1.0 + float(self.A.abs().max())):
                raise ValueError("the teacher does not realize A: max |Y script-W_star - A| = "
                                 f"{residual:.3g}")

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


def haar_orthogonal(n: int, count: int, generator: torch.Generator) -> Tensor:
    """``count`` Haar-random ``n x n`` orthogonal matrices (QR with the signs of R fixed; either det)."""
    Q, R = torch.linalg.qr(torch.randn(count, n, n, generator=generator, dtype=torch.float64))
    return Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1)).unsqueeze(-2)


def random_transitions(n: int, count: int, low: float, high: float, generator: torch.Generator) -> Tensor:
    """``count`` matrices ``U diag(s) V^T`` with Haar U, V and singular values uniform in ``[low, high]``."""
    if not 0 <= low <= high:
        raise ValueError(f"singular-value range must satisfy 0 <= low <= high, got [{low}, {high}]")
    s = low + (high - low) * torch.rand(count, n, generator=generator, dtype=torch.float64)
    U, V = haar_orthogonal(n, count, generator), haar_orthogonal(n, count, generator)
    return U @ torch.diag_embed(s) @ V.mT


def realizable_problem(n: int, t: int, ny: int | None = None, low: float = 1.0, high: float = 2.5,
                       noise: float = 0.1, generator: torch.Generator | None = None) -> LinearRNNProblem:
    """:func:`random_problem`'s Y and Sigma with ``A = Y script-W_star`` for a teacher whose singular
    values lie in ``[low, high]`` (so the teacher satisfies Theorem 5's ``sigma_min >= low``)."""
    gen = generator or torch.Generator().manual_seed(0)
    base = random_problem(n, t, ny, noise, gen)
    W_star = random_transitions(n, 1, low, high, gen)[0]
    return LinearRNNProblem(base.Y, base.Y @ stacked_powers(W_star, t), base.Sigma, noise, t, W_star)


def stacked_powers(W: Tensor, t: int) -> Tensor:
    """``script-W = (W | W^2 | ... | W^t)``, ``(..., n, n t)`` for ``W (..., n, n)``."""
    powers, P = [], W
    for _ in range(t):
        powers.append(P)
        P = P @ W
    return torch.cat(powers, dim=-1)


def _check_transition(W: Tensor, problem: LinearRNNProblem) -> None:
    n = problem.hidden
    if W.dim() < 2 or tuple(W.shape[-2:]) != (n, n):
        raise ValueError(f"W must be ({n}, {n}) (or a batch (..., {n}, {n})) to match Y's {n} columns, "
                         f"got {tuple(W.shape)}")


def population_risk(W: Tensor, problem: LinearRNNProblem) -> Tensor:
    """Claim 1: ``||(Y script-W - A) Sigma^(1/2)||_F^2 + C`` as ``tr(E Sigma E^T) + C`` (differentiable;
    a batch of W gives a batch of risks)."""
    _check_transition(W, problem)
    E = problem.Y @ stacked_powers(W, problem.t) - problem.A
    return torch.einsum("...ij,jk,...ik->...", E, problem.Sigma, E) + problem.C


def optimal_risk(problem: LinearRNNProblem) -> float:
    """The global minimum ``R* = min_W R[W]``: ``C`` for a realizable problem (teacher given); for
    ``t = 1`` the least-squares value ``C + ||(Y Y^+ - I) A Sigma^(1/2)||_F^2``. Otherwise R* has no
    closed form (``C`` is only a lower bound) and this raises ``ValueError``."""
    if problem.W_star is not None:
        return problem.C
    if problem.t == 1:
        Y = problem.Y
        W = torch.linalg.lstsq(Y, problem.A).solution  # Y^+ A minimizes every column's residual
        return float(population_risk(W, problem))
    raise ValueError("R* = min R[W] is known in closed form only for t = 1 or a realizable problem "
                     "(give the teacher W_star); C is merely a lower bound")


def theorem5_constant(problem: LinearRNNProblem, e: float) -> float:
    """``sigma_min(Sigma)^2 min_{1<=i<=t} i^2 e^(2(i-1))``, the constant of Theorem 5's inequality."""
    if not e > 0:
        raise ValueError(f"Theorem 5 needs sigma_min(W) >= e > 0; got e = {e}")
    sigma_min = float(torch.linalg.eigvalsh(problem.Sigma).min())
    return sigma_min ** 2 * min(i * i * e ** (2 * (i - 1)) for i in range(1, problem.t + 1))


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
    """The exact ``grad_W R`` (non-commuting products kept in order; see the module docstring);
    batched over leading dims of W."""
    _check_transition(W, problem)
    n, t = problem.hidden, problem.t
    G = (problem.Y @ stacked_powers(W, t) - problem.A) @ problem.Sigma
    powers = [torch.eye(n, dtype=W.dtype, device=W.device).expand_as(W)]
    for _ in range(t - 1):
        powers.append(powers[-1] @ W)
    grad = torch.zeros_like(W)
    for i in range(1, t + 1):
        YG = problem.Y.T @ G[..., (i - 1) * n:i * n]
        for j in range(i):
            grad = grad + powers[j].mT @ YG @ powers[i - 1 - j].mT
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
