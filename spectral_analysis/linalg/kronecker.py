"""Kronecker-factored matrices (KRU, Jose et al., Eq. 4): ``W = W_0 (x) W_1 (x) ... (x) W_(F-1)``.

Index convention (that of ``torch.kron``): row ``(i_0, ..., i_(F-1))`` of W is ``i_0 p_1...p_(F-1) + ...``,
so ``W_0`` acts on the most significant digit. :func:`kron_matvec` applies W to a batch of vectors
without forming it: each factor contracts its own digit of the index (the paper's Algorithm 1) as one
batched matmul on a reshaped view, ``sum_f p_f q_f prod_(g != f) size_g`` flops, O(n log n) for 2 x 2
factors. :func:`kron_matrix` forms W (the reference, and on request). Real or complex factors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor


def check_factors(factors: Sequence[Tensor]) -> tuple[int, int]:
    """``(P, Q)``, the shape of W; ``ValueError`` for no factor or a factor that is not a matrix."""
    if not factors:
        raise ValueError("a Kronecker product needs at least one factor")
    P = Q = 1
    for f, W in enumerate(factors):
        if W.dim() != 2:
            raise ValueError(f"Kronecker factor {f} must be a matrix, got shape {tuple(W.shape)}")
        P, Q = P * W.shape[0], Q * W.shape[1]
    return P, Q


def kron_matrix(factors: Sequence[Tensor]) -> Tensor:
    """The dense ``W = W_0 (x) ... (x) W_(F-1)`` (differentiable)."""
    check_factors(factors)
    W = factors[0]
    for factor in factors[1:]:
        W = torch.kron(W, factor)
    return W


def kron_matvec(factors: Sequence[Tensor], h: Tensor) -> Tensor:
    """``W h`` for ``h (..., Q)`` without forming W; differentiable (autograd through the contractions)."""
    P, Q = check_factors(factors)
    if h.shape[-1] != Q:
        raise ValueError(f"kron_matvec: the factors make a {P} x {Q} matrix, but h has length {h.shape[-1]}")
    batch = h.shape[:-1]
    lead = math.prod(batch)
    x, done, rest = h, 1, Q  # done: product of the p's already applied; rest: of the q's still to apply
    for W in factors:
        p, q = W.shape
        rest //= q
        # axis order (batch, p_0..p_(f-1), q_f, q_(f+1)...): contract the middle axis with W_f by one matmul
        x = torch.matmul(W, x.reshape(lead * done, q, rest))
        done *= p
    return x.reshape(*batch, P)
