"""Blocked (compact-WY) products of Householder reflectors: level-3 BLAS instead of m rank-one updates.

For unit vectors ``Y_b = (y_1 ... y_b)`` the product ``H(y_1) ... H(y_b)`` equals ``I - Y_b T Y_b^T``
with ``T^{-1} = striu(Y_b^T Y_b) + I/2`` (Schreiber & Van Loan 1989; Puglisi 1992). A zero column is
an identity reflector and still fits the formula, so ``T^{-1}`` is always unit-diagonal (/2) and
invertible. The m reflectors are cut into blocks; all blocks' ``T^{-1}`` come from one batched
Gram product (built in parallel, as FastH does, Mathiasen et al. 2020), and the blocks are
applied last-first. Applied to the identity, block ``i`` only touches the trailing
``(n - s_i) x (n - s_i)`` submatrix (its vectors have ``s_i`` leading zeros), as in LAPACK's orgqr,
so materializing ``Q`` for ``m = n`` costs about ``4n^3/3`` flops, less than one matmul.
Backward is PyTorch autograd through these matmuls and triangular solves.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from spectral_analysis.linalg.householder import (
    check_vector_lengths,
    normalize_reflectors,
    pack_reflectors,
    packed_reflector_product_sequential,
    reflector,
)

DEFAULT_BLOCK_SIZE = 128


def _block_bounds(m: int, block_size: int) -> list[tuple[int, int]]:
    return [(s, min(s + block_size, m)) for s in range(0, m, block_size)]


def _block_t_inverses(Yn: Tensor, block_size: int) -> list[Tensor]:
    """``T^{-1} = striu(Y_b^T Y_b) + I/2`` for every block, from one batched Gram product."""
    m = Yn.shape[-1]
    n_blocks = -(-m // block_size)
    padded = torch.nn.functional.pad(Yn, (0, n_blocks * block_size - m))
    blocks = padded.unflatten(-1, (n_blocks, block_size)).movedim(-2, -3)  # (..., B, n, b)
    gram = blocks.mT @ blocks
    half = 0.5 * torch.eye(block_size, dtype=Yn.dtype, device=Yn.device)
    t_inv = torch.triu(gram, diagonal=1) + half
    return [t_inv[..., i, : e - s, : e - s] for i, (s, e) in
            enumerate(_block_bounds(m, block_size))]


def _prepare(Y: Tensor, block_size: int | None) -> tuple[Tensor, list[tuple[int, int]], list[Tensor]]:
    """Unit reflectors, block bounds and every block's ``T^{-1}`` (Y has m >= 1 columns)."""
    b = min(block_size or DEFAULT_BLOCK_SIZE, Y.shape[-1])
    Yn = normalize_reflectors(Y)
    return Yn, _block_bounds(Y.shape[-1], b), _block_t_inverses(Yn, b)


def _check_packed(Y: Tensor, what: str) -> None:
    if Y.dim() < 2:
        raise ValueError(f"{what}: expected packed reflectors of shape (..., n, m), got {tuple(Y.shape)}")
    n, m = Y.shape[-2], Y.shape[-1]
    if m > n:
        raise ValueError(f"{what}: {m} reflectors do not fit in dimension n={n} (need m <= n)")
    if not Y.is_floating_point():
        raise ValueError(f"{what}: reflectors must be a floating tensor, got {Y.dtype}")


def packed_reflector_product(Y: Tensor, block_size: int | None = None) -> Tensor:
    """``Q = H(y_0) ... H(y_{m-1})`` (Eq. 2) from packed ``(..., n, m)`` reflectors, blocked compact WY."""
    _check_packed(Y, "packed_reflector_product")
    n, m = Y.shape[-2], Y.shape[-1]
    batch = Y.shape[:-2]
    eye = torch.eye(n, dtype=Y.dtype, device=Y.device)
    if m == 0:
        return eye.expand(*batch, n, n).clone()
    Yn, bounds, t_invs = _prepare(Y, block_size)
    Q = None  # trailing (n - s) x (n - s) block of the partial product
    for (s, e), t_inv in zip(reversed(bounds), reversed(t_invs), strict=True):
        Yb = Yn[..., s:, s:e]
        t = n - s
        if Q is None:  # first block applied to the identity: I - Y T Y^T
            Z = torch.linalg.solve_triangular(t_inv, Yb.mT, upper=True)
            Q = eye[s:, s:] - Yb @ Z
            continue
        d = t - Q.shape[-1]
        # A = diag(I_d, Q); A - Y_b T (Y_b^T A)
        YtA = torch.cat([Yb[..., :d, :].mT, Yb[..., d:, :].mT @ Q], dim=-1)
        Z = torch.linalg.solve_triangular(t_inv, YtA, upper=True)
        A = torch.nn.functional.pad(Q, (d, 0, d, 0))
        A = A + torch.nn.functional.pad(eye[:d, :d], (0, t - d, 0, t - d))
        Q = A - Yb @ Z
    d = n - Q.shape[-1]
    if d:
        Q = torch.nn.functional.pad(Q, (d, 0, d, 0)) + torch.nn.functional.pad(
            eye[:d, :d], (0, n - d, 0, n - d))
    return Q


def apply_householder(Y: Tensor, X: Tensor, block_size: int | None = None) -> Tensor:
    """``Q X`` for ``Q = H(y_0) ... H(y_{m-1})`` without forming ``Q`` (~4 n m k flops, X n x k)."""
    _check_packed(Y, "apply_householder")
    n, m = Y.shape[-2], Y.shape[-1]
    if X.shape[-2] != n:
        raise ValueError(f"apply_householder: X has {X.shape[-2]} rows, reflectors have dimension {n}")
    if m == 0:
        return X
    Yn, bounds, t_invs = _prepare(Y, block_size)
    for (s, e), t_inv in zip(reversed(bounds), reversed(t_invs), strict=True):
        Yb = Yn[..., s:, s:e]
        tail = X[..., s:, :]
        Z = torch.linalg.solve_triangular(t_inv, Yb.mT @ tail, upper=True)
        new_tail = tail - Yb @ Z
        X = torch.cat([X[..., :s, :].expand(*new_tail.shape[:-2], s, X.shape[-1]), new_tail],
                      dim=-2) if s else new_tail
    return X


def reflector_product(vectors: Sequence[Tensor], n: int, *, method: str = "blocked",
                      block_size: int | None = None) -> Tensor:
    """``H_n(u_n) ... H_k(u_k)`` for ``vectors = [u_k, ..., u_n]`` (Eq. 2), an ``n x n`` orthogonal matrix.

    ``method="blocked"`` uses the compact-WY product (:func:`packed_reflector_product`);
    ``"sequential"`` the reference rank-one loop; ``"dense"`` multiplies the Eq. 1 matrices.
    """
    if method == "dense":
        check_vector_lengths(vectors, n, "reflector_product")
        if not vectors:
            return torch.eye(n, dtype=torch.get_default_dtype())
        Q = reflector(vectors[-1], n)
        for u in reversed(vectors[:-1]):
            Q = Q @ reflector(u, n)
        return Q
    Y = pack_reflectors(vectors, n)
    if method == "sequential":
        return packed_reflector_product_sequential(Y)
    if method == "blocked":
        return packed_reflector_product(Y, block_size=block_size)
    raise ValueError(f"reflector_product: unknown method {method!r} "
                     "(expected 'blocked', 'sequential' or 'dense')")
