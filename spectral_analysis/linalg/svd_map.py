"""The SVD map ``M_{k1,k2}^{r,c}`` of Eq. 3 (square) and Eq. 15 (rectangular).

``W = H_r(u_r) ... H_k1(u_k1) Sigma_hat H_k2(v_k2) ... H_c(v_c)`` with ``Sigma_hat = (diag(sigma) | 0)``
(r < c) or its transpose (r > c). With ``U = H_r ... H_k1`` and ``V = H_c ... H_k2`` this is
``U Sigma_hat V^T = U[:, :p] diag(sigma) V[:, :p]^T``, p = min(r, c).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from spectral_analysis.linalg.householder import check_vector_lengths, pack_reflectors, reflector
from spectral_analysis.linalg.triton_support import triton_unavailable
from spectral_analysis.linalg.wy import apply_householder, packed_reflector_product

FUSED_PRODUCT_MAX_SIZE = 128
"""The largest n whose reflector products the SVD map forms by the fused kernels on a GPU: two n x n tiles
on chip per program (the backward's), 128 KB in float32 at n = 128."""
FUSED_PRODUCT_DTYPES = (torch.float32, torch.float64)


def _packed_or_empty(vectors: Sequence[Tensor], n: int, like: Tensor) -> Tensor:
    if vectors:
        return pack_reflectors(vectors, n)
    return torch.zeros(*like.shape[:-1], n, 0, dtype=like.dtype, device=like.device)


def fused_product_unavailable(Y: Tensor) -> str | None:
    """Why the SVD map does not form ``Y``'s reflector product by the fused kernels
    (:mod:`~spectral_analysis.linalg.fused_householder`), or ``None`` when it does: a CUDA device, Triton,
    ``n <= 128``, float32 or float64.

    >>> fused_product_unavailable(torch.zeros(512, 16, device="cuda"))  # doctest: +SKIP
    'the fused product holds n x n on chip up to n = 128, not 512'
    """
    if Y.shape[-2] > FUSED_PRODUCT_MAX_SIZE:
        return f"the fused product holds n x n on chip up to n = {FUSED_PRODUCT_MAX_SIZE}, not {Y.shape[-2]}"
    if Y.dtype not in FUSED_PRODUCT_DTYPES:
        return f"the fused product runs in float32 or float64, not {Y.dtype}"
    if Y.device.type != "cuda":  # the interpreter runs them on the CPU in tests, never by default
        return f"the fused product runs on a CUDA device, not on {Y.device.type!r}"
    return triton_unavailable(Y.device)


def svd_compose_packed(Yu: Tensor, Yv: Tensor, sigma: Tensor,
                       block_size: int | None = None) -> Tensor:
    """``U Sigma_hat V^T`` from packed reflectors ``Yu (..., r, m1)``, ``Yv (..., c, m2)``, sigma (..., p).

    A square W on a GPU with ``n <= 128`` forms U and V by the fused kernels, in one launch when
    ``m1 = m2`` (:func:`fused_product_unavailable` says when not); elsewhere by the blocked compact-WY
    product, U applied to ``diag(sigma) V^T`` without being formed."""
    r, c = Yu.shape[-2], Yv.shape[-2]
    p = min(r, c)
    if sigma.shape[-1] != p:
        raise ValueError(f"svd_compose: sigma has length {sigma.shape[-1]}, expected min({r}, {c}) = {p}")
    if r == c and not (fused_product_unavailable(Yu) or fused_product_unavailable(Yv)):
        from spectral_analysis.linalg.fused_householder import fused_reflector_product  # Triton: optional

        U, V = (fused_reflector_product(torch.stack([Yu, Yv])).unbind(0) if Yu.shape == Yv.shape
                else (fused_reflector_product(Yu), fused_reflector_product(Yv)))
        return (U * sigma.unsqueeze(-2)) @ V.mT
    if p == c:
        V = packed_reflector_product(Yv, block_size)
    else:  # only the first p columns of V meet Sigma_hat
        V = apply_householder(Yv, torch.eye(c, p, dtype=Yv.dtype, device=Yv.device), block_size)
    X = sigma.unsqueeze(-1) * V.mT[..., :p, :]  # diag(sigma) V[:, :p]^T, (..., p, c)
    if r > p:
        X = torch.nn.functional.pad(X, (0, 0, 0, r - p))
    return apply_householder(Yu, X, block_size)


def svd_compose(u_vectors: Sequence[Tensor], v_vectors: Sequence[Tensor], sigma: Tensor,
                shape: tuple[int, int], block_size: int | None = None) -> Tensor:
    """Eq. 3 / Eq. 15: ``M_{k1,k2}^{r,c}(u_k1, ..., u_r, v_k2, ..., v_c, sigma)`` for ``shape = (r, c)``.

    ``u_vectors = [u_k1, ..., u_r]``, ``v_vectors = [v_k2, ..., v_c]`` (u_i of length i; empty lists
    mean no reflectors); all may carry the same leading batch dims as ``sigma``.
    """
    r, c = int(shape[0]), int(shape[1])
    if r < 1 or c < 1:
        raise ValueError(f"svd_compose: shape must be two positive sizes, got {shape}")
    check_vector_lengths(u_vectors, r, "svd_compose (u_vectors)")
    check_vector_lengths(v_vectors, c, "svd_compose (v_vectors)")
    Yu = _packed_or_empty(u_vectors, r, sigma)
    Yv = _packed_or_empty(v_vectors, c, sigma)
    return svd_compose_packed(Yu, Yv, sigma, block_size)


def svd_compose_reference(u_vectors: Sequence[Tensor], v_vectors: Sequence[Tensor], sigma: Tensor,
                          shape: tuple[int, int]) -> Tensor:
    """Eq. 15 literally, in float64: the dense product of Eq. 1 reflectors around ``Sigma_hat``."""
    r, c = shape
    p = min(r, c)
    check_vector_lengths(u_vectors, r, "svd_compose_reference (u_vectors)")
    check_vector_lengths(v_vectors, c, "svd_compose_reference (v_vectors)")
    W = torch.zeros(r, c, dtype=torch.float64)
    W[range(p), range(p)] = sigma.to(torch.float64)
    for u in u_vectors:  # H_k1 is innermost on the left: H_r ... H_k1 Sigma_hat
        W = reflector(u.to(torch.float64), r) @ W
    for v in v_vectors:  # Sigma_hat H_k2 ... H_c
        W = W @ reflector(v.to(torch.float64), c)
    return W
