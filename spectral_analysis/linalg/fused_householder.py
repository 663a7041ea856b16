"""``Q = H(y_0) ... H(y_{m-1})`` (Eq. 2) in one Triton launch forward and one backward, for small n.

On a GPU the blocked compact-WY product (:mod:`spectral_analysis.linalg.wy`) at n = 128, m = 16 is a dozen
small kernels forward and more backward, and their launches, not their arithmetic, set its time. Here each
program holds one ``n x n`` product on chip and applies the reflectors as rank-one updates:

- forward: ``Q <- Q - 2 v (v^T Q)`` for ``v = y_{m-1}, ..., y_0`` (unit or zero columns), from ``Q = I``;
- backward (the Householder chain of the paper's Algorithm 3, walked front to back): with ``R_0 = Q`` and
  ``G_0 = dL/dQ``, for each k ``R_(k+1) = H_k R_k``, ``dL/dv_k = -2 (G_k R_(k+1)^T v_k + R_(k+1) G_k^T v_k)``
  and ``G_(k+1) = H_k G_k``: matrix-vector products only, O(m n^2).

The columns are normalized before the kernels under autograd
(:func:`~spectral_analysis.linalg.householder.normalize_reflectors`), so the kernels see
``H(v) = I - 2 v v^T``. Triton is optional and this module is imported
only where the fused product runs; with ``TRITON_INTERPRET=1`` the kernels run on the CPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.autograd.function import once_differentiable

from spectral_analysis.linalg.householder import normalize_reflectors


@triton.jit
def _product_kernel(y_ptr, q_ptr, n, m, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_N)
    inside = rows < n
    y_ptr += tl.program_id(0) * n * m
    Q = (rows[:, None] == rows[None, :]).to(q_ptr.dtype.element_ty)
    for i in range(m):
        v = tl.load(y_ptr + rows * m + (m - 1 - i), mask=inside, other=0.0)
        Q -= 2.0 * v[:, None] * tl.sum(v[:, None] * Q, axis=0)[None, :]
    offsets = tl.program_id(0) * n * n + rows[:, None] * n + rows[None, :]
    tl.store(q_ptr + offsets, Q, mask=inside[:, None] & inside[None, :])


@triton.jit
def _gradient_kernel(y_ptr, q_ptr, dq_ptr, dy_ptr, n, m, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_N)
    inside = rows < n
    square = inside[:, None] & inside[None, :]
    offsets = tl.program_id(0) * n * n + rows[:, None] * n + rows[None, :]
    R = tl.load(q_ptr + offsets, mask=square, other=0.0)
    G = tl.load(dq_ptr + offsets, mask=square, other=0.0)
    y_ptr += tl.program_id(0) * n * m
    dy_ptr += tl.program_id(0) * n * m
    for k in range(m):
        v = tl.load(y_ptr + rows * m + k, mask=inside, other=0.0)
        R -= 2.0 * v[:, None] * tl.sum(v[:, None] * R, axis=0)[None, :]  # R_(k+1) = H_k R_k
        Rtv = tl.sum(R * v[:, None], axis=0)  # R_(k+1)^T v
        Gtv = tl.sum(G * v[:, None], axis=0)  # G_k^T v
        grad = -2.0 * (tl.sum(G * Rtv[None, :], axis=1) + tl.sum(R * Gtv[None, :], axis=1))
        tl.store(dy_ptr + rows * m + k, grad, mask=inside)
        G -= 2.0 * v[:, None] * Gtv[None, :]  # G_(k+1) = H_k G_k


def _launch(n: int) -> dict[str, int]:
    """The tile and the warps holding it: at most 64 registers a thread per n x n tile (the only setting
    timed: on an H200 at n = 128 it formed U and V at 0.83-1.00x the blocked product's time,
    ``benchmarks/householder_fused_cuda_h200.json``)."""
    block = max(16, triton.next_power_of_2(n))
    return {"BLOCK_N": block, "num_warps": min(16, max(4, block * block // 2048))}


class _FusedProduct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, V: Tensor) -> Tensor:
        batch, n, m = V.shape
        V = V.contiguous()
        Q = V.new_empty((batch, n, n))
        _product_kernel[(batch,)](V, Q, n, m, **_launch(n))
        ctx.save_for_backward(V, Q)
        return Q

    @staticmethod
    @once_differentiable
    def backward(ctx, dQ: Tensor) -> Tensor:
        V, Q = ctx.saved_tensors
        batch, n, m = V.shape
        dV = torch.empty_like(V)
        _gradient_kernel[(batch,)](V, Q, dQ.contiguous(), dV, n, m, **_launch(n))
        return dV


def fused_reflector_product(Y: Tensor) -> Tensor:
    """``H(y_0) ... H(y_{m-1})`` from packed reflectors ``Y (..., n, m)``, as
    :func:`~spectral_analysis.linalg.wy.packed_reflector_product` computes it, by the fused kernels. Where
    it can run (a CUDA device or the interpreter, Triton) is the caller's to check
    (:func:`~spectral_analysis.linalg.svd_map.fused_product_unavailable`).

    >>> Q = fused_reflector_product(torch.randn(128, 16, device="cuda"))  # doctest: +SKIP
    """
    n, m = Y.shape[-2], Y.shape[-1]
    V = normalize_reflectors(Y).reshape(-1, n, m)
    return _FusedProduct.apply(V).reshape(*Y.shape[:-2], n, n)
