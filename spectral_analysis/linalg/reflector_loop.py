"""Algorithm 1: the paper's local forward/backward pass ``h -> W h`` through the reflectors, one at a time.

This is the per-step reference (O((m1 + m2) n) flops per vector, Table 1), not the fast path: the
fast path materializes ``W`` once per sequence (:mod:`spectral_analysis.linalg.wy`).
Backward uses Hgrad (Algorithm 3, Eq. 12-13) instead of autograd.

Note on the printed Algorithm 1: its U-loop calls ``Hgrad(h_k^(u), u_k, g)`` with ``h_k^(u)`` the
*output* of ``H_k(u_k)``, while Algorithm 3 needs the reflector's *input* (its V-loop does pass
the input ``h_{k+1}^(v)``). Feeding the output flips the sign of alpha and gives a wrong
``dL/du``; we pass the inputs, which we store during the forward pass.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from spectral_analysis.linalg.householder import hgrad, hprod


def _columns(Y: Tensor) -> list[Tensor]:
    """Packed ``(n, m)`` -> reflector vectors ``[y_0 (length n), y_1 (length n-1), ...]``."""
    return [Y[j:, j] for j in range(Y.shape[-1])]


class _ReflectorLoop(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: Tensor, Yu: Tensor, sigma: Tensor, Yv: Tensor) -> Tensor:
        u_cols, v_cols = _columns(Yu), _columns(Yv)
        v_inputs = []
        for v in v_cols:  # k = n, n-1, ..., n-m2+1: V^T h
            v_inputs.append(h)
            h = hprod(h, v)
        h_sigma_in = h
        h = h * sigma
        u_inputs = []
        for u in reversed(u_cols):  # k = n-m1+1, ..., n: U (Sigma V^T h)
            u_inputs.append(h)
            h = hprod(h, u)
        ctx.save_for_backward(Yu, sigma, Yv, h_sigma_in, *v_inputs, *u_inputs)
        ctx.counts = (Yu.shape[-1], Yv.shape[-1])
        return h

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):
        m1, m2 = ctx.counts
        Yu, sigma, Yv, h_sigma_in, *rest = ctx.saved_tensors
        v_inputs, u_inputs = rest[:m2], rest[m2:]
        u_cols, v_cols = _columns(Yu), _columns(Yv)
        grad_Yu, grad_Yv = torch.zeros_like(Yu), torch.zeros_like(Yv)
        batch_dims = tuple(range(g.dim() - 1))
        for j, (u, h_in) in enumerate(zip(u_cols, reversed(u_inputs), strict=True)):
            g, gu = hgrad(h_in, u, g)  # k = n, n-1, ..., n-m1+1
            grad_Yu[j:, j] = gu.sum(dim=batch_dims) if batch_dims else gu
        grad_sigma = g * h_sigma_in
        grad_sigma = grad_sigma.sum(dim=batch_dims) if batch_dims else grad_sigma
        g = g * sigma
        for j in reversed(range(m2)):  # k = n-m2+1, ..., n
            g, gv = hgrad(v_inputs[j], v_cols[j], g)
            grad_Yv[j:, j] = gv.sum(dim=batch_dims) if batch_dims else gv
        return g, grad_Yu, grad_sigma, grad_Yv


def reflector_loop(h: Tensor, Yu: Tensor, sigma: Tensor, Yv: Tensor) -> Tensor:
    """``W h`` for ``W = H(Yu) diag(sigma) H(Yv)^T`` (Eq. 6) by Algorithm 1; ``h``: ``(..., n)``.

    ``Yu``, ``Yv``: packed ``(n, m1)``, ``(n, m2)`` reflectors; ``sigma``: ``(n,)``, already mapped.
    """
    n = h.shape[-1]
    for name, Y in (("Yu", Yu), ("Yv", Yv)):
        if Y.dim() != 2 or Y.shape[0] != n or Y.shape[1] > n:
            raise ValueError(f"reflector_loop: {name} must have shape (n={n}, m<=n), got {tuple(Y.shape)}")
    if sigma.shape != (n,):
        raise ValueError(f"reflector_loop: sigma must have shape ({n},), got {tuple(sigma.shape)}")
    return _ReflectorLoop.apply(h, Yu, sigma, Yv)
