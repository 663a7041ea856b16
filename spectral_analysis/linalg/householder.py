"""Householder reflectors: Eq. 1, 2, 8, 12, 13 and Algorithms 2-3 of the ICML paper.

Packed form. The m reflectors of a product ``H_n(u_n) ... H_{n-m+1}(u_{n-m+1})`` are stored as
the columns of one ``(..., n, m)`` matrix ``Y``: column ``j`` is ``u_{n-j}`` padded with ``j``
leading zeros (the ``u-hat`` of Eq. 8), so ``Y`` is lower trapezoidal and the product is
``H(Y[:, 0]) H(Y[:, 1]) ... H(Y[:, m-1])``. This is the matrix ``U = (u_n ... u_{n-m1+1})`` of
Algorithm 1. Entries above the trapezoid are ignored (masked to zero) everywhere.

A zero vector stands for the identity (Eq. 1). The map u -> H(u) is discontinuous at 0, so its
derivative there does not exist; we return the finite value 0 (the derivative of the constant
branch), which keeps gradient descent well defined when a reflector is switched off.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def trapezoid_mask(n: int, m: int, *, dtype: torch.dtype = torch.bool,
                   device: torch.device | str | None = None) -> Tensor:
    """``(n, m)`` mask of the entries a packed reflector matrix may use: row i >= column j."""
    rows = torch.arange(n, device=device).unsqueeze(1)
    cols = torch.arange(m, device=device).unsqueeze(0)
    return (rows >= cols).to(dtype)


def safe_squared_norm(u: Tensor, dim: int = -1) -> tuple[Tensor, Tensor]:
    """``(||u||^2 with zeros replaced by 1, mask of nonzero vectors)``, gradient-safe at u = 0."""
    sq = (u * u).sum(dim=dim, keepdim=True)
    nonzero = sq > 0
    return torch.where(nonzero, sq, torch.ones_like(sq)), nonzero


def normalize_reflectors(Y: Tensor) -> Tensor:
    """Columns of packed ``Y`` scaled to unit length; zero columns stay zero (identity)."""
    Y = Y * trapezoid_mask(Y.shape[-2], Y.shape[-1], dtype=Y.dtype, device=Y.device)
    sq, nonzero = safe_squared_norm(Y, dim=-2)
    return torch.where(nonzero, Y / sq.sqrt(), torch.zeros_like(Y))


def reflector(u: Tensor, n: int) -> Tensor:
    """The ``n x n`` reflector ``H_k^n(u)`` of Eq. 1 (k = len(u)), dense; batched over ``u[..., :]``.

    ``diag(I_{n-k}, I_k - 2 u u^T / ||u||^2)``, and ``I_n`` when ``u == 0``.
    """
    k = u.shape[-1]
    if not 1 <= k <= n:
        raise ValueError(f"reflector: vector length k={k} must satisfy 1 <= k <= n={n}")
    sq, nonzero = safe_squared_norm(u)
    tau = torch.where(nonzero, 2.0 / sq, torch.zeros_like(sq))
    block = torch.eye(k, dtype=u.dtype, device=u.device) - tau.unsqueeze(-1) * (
        u.unsqueeze(-1) * u.unsqueeze(-2))
    eye = torch.eye(n, dtype=u.dtype, device=u.device).expand(*u.shape[:-1], n, n).clone()
    eye[..., n - k:, n - k:] = block
    return eye


def check_vector_lengths(vectors: Sequence[Tensor], n: int, what: str) -> None:
    lengths = [int(v.shape[-1]) for v in vectors]
    expected = list(range(n - len(vectors) + 1, n + 1))
    if lengths != expected:
        raise ValueError(
            f"{what}: expected vectors [u_k, ..., u_n] of lengths {expected} (u_i of length i, "
            f"n={n}), got lengths {lengths}")


def pack_reflectors(vectors: Sequence[Tensor], n: int) -> Tensor:
    """``[u_k, ..., u_n]`` (u_i of length i, optional common batch dims) -> packed ``(..., n, m)``."""
    if n < 1:
        raise ValueError(f"pack_reflectors: n must be >= 1, got {n}")
    check_vector_lengths(vectors, n, "pack_reflectors")
    if not vectors:
        return torch.zeros(n, 0, dtype=torch.get_default_dtype())
    columns = [torch.nn.functional.pad(u, (n - u.shape[-1], 0)) for u in reversed(vectors)]
    return torch.stack(columns, dim=-1)


def unpack_reflectors(Y: Tensor) -> list[Tensor]:
    """Packed ``(..., n, m)`` -> ``[u_{n-m+1}, ..., u_n]``, the inverse of :func:`pack_reflectors`."""
    n, m = Y.shape[-2], Y.shape[-1]
    if m > n:
        raise ValueError(f"unpack_reflectors: {m} reflectors do not fit in dimension {n}")
    return [Y[..., j:, j] for j in reversed(range(m))]


def packed_reflector_product_sequential(Y: Tensor) -> Tensor:
    """Reference product ``H(y_0) ... H(y_{m-1})`` by m rank-one updates (level-2 BLAS), Eq. 2."""
    n, m = Y.shape[-2], Y.shape[-1]
    Yn = normalize_reflectors(Y)
    Q = torch.eye(n, dtype=Y.dtype, device=Y.device).expand(*Y.shape[:-2], n, n)
    for j in reversed(range(m)):
        y = Yn[..., :, j:j + 1]
        Q = Q - 2.0 * y @ (y.mT @ Q)
    return Q


def hprod(h: Tensor, u: Tensor) -> Tensor:
    """Algorithm 2 / Eq. 8: ``H_k(u) h = h - alpha u_hat`` with ``alpha = 2 u^T h / ||u||^2``.

    ``h``: ``(..., n)``; ``u``: ``(..., k)`` acting on the last k coordinates (broadcast).
    """
    k = u.shape[-1]
    sq, nonzero = safe_squared_norm(u)
    tail = h[..., -k:]
    alpha = torch.where(nonzero, 2.0 * (u * tail).sum(-1, keepdim=True) / sq,
                        torch.zeros_like(sq))
    return torch.cat([h[..., :-k], tail - alpha * u], dim=-1) if k < h.shape[-1] \
        else tail - alpha * u


def hgrad(h: Tensor, u: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    """Algorithm 3 (Eq. 12, 13): gradients through ``h_out = H_k(u) h`` given ``g = dL/dh_out``.

    Returns ``(dL/dh, dL/du)`` with ``dL/dh = g - beta u_hat`` and
    ``dL/du = -alpha g - beta h + alpha beta u`` on the last k coordinates, where
    ``alpha = 2 u^T h / ||u||^2`` and ``beta = 2 u^T g / ||u||^2``; ``h`` is the *input* of the
    reflector. ``dL/du`` has the broadcast batch shape; sum it over batch dims yourself.
    """
    k = u.shape[-1]
    sq, nonzero = safe_squared_norm(u)
    h_tail, g_tail = h[..., -k:], g[..., -k:]
    zero = torch.zeros_like(sq)
    alpha = torch.where(nonzero, 2.0 * (u * h_tail).sum(-1, keepdim=True) / sq, zero)
    beta = torch.where(nonzero, 2.0 * (u * g_tail).sum(-1, keepdim=True) / sq, zero)
    grad_tail = g_tail - beta * u
    grad_h = torch.cat([g[..., :-k], grad_tail], dim=-1) if k < g.shape[-1] else grad_tail
    grad_u = torch.where(nonzero, -alpha * g_tail - beta * h_tail + alpha * beta * u,
                         torch.zeros_like(g_tail))
    return grad_h, grad_u
