"""Kronecker-factored matrices (KRU, Jose et al., Eq. 4): ``W = W_0 (x) W_1 (x) ... (x) W_(F-1)``.

Index convention (that of ``torch.kron``): row ``(i_0, ..., i_(F-1))`` of W is ``i_0 p_1...p_(F-1) + ...``,
so ``W_0`` acts on the most significant digit. :func:`kron_matvec` applies W to a batch of vectors
without forming it: the vector is reshaped to ``(q_0, ..., q_(F-1))`` and each factor contracts its own
axis (the paper's Algorithm 1), ``sum_f p_f q_f prod_(g != f) ...`` flops, O(n log n) for 2 x 2
factors. :func:`kron_matrix` forms W (the reference, and on request). Real or complex factors.
"""

from __future__ import annotations

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
    F = len(factors)
    x = h.reshape(*batch, *[W.shape[1] for W in factors])
    offset = len(batch)
    for f, W in enumerate(factors):
        # contract axis offset + f of x with the columns of W_f; the new axis comes last, move it back
        x = torch.movedim(torch.tensordot(x, W, dims=([offset + f], [1])), -1, offset + f)
    return x.reshape(*batch, P) if F else x
