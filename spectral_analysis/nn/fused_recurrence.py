"""Eq. 4's time loop as one persistent Triton kernel per direction (after Diamos et al., "Persistent
RNNs", ICML 2016).

Each program owns ``BLOCK_B`` rows of the batch and loads all of ``W`` (padded to a power of two) once,
then keeps it on chip across the T steps (up to n = 128; past it W is streamed from L2 each step, below):

- forward: ``h_t = phi(W h_{t-1} + xp_t)``, with ``xp_t = M x_t + b`` one batched GEMM before the loop;
- backward: ``dL/dz_t = (g_t + dL/dz_(t+1) W) * phi'_t``, with ``phi'`` read off the stored ``h_t`` (off
  ``z_t`` for ``abs``); ``dL/dW = sum_t dL/dz_t h_(t-1)^T`` is one GEMM after the loop, as in the scan
  (:mod:`spectral_analysis.nn.time_loop`), which is this route's reference.

Past n = 128 W does not fit on chip beside the states (at n = 256 a program would ask for 278,528 bytes
of shared memory where an H200 has 232,448). There the same programs read W ``BLOCK_K`` rows at a time
each step (1 MB a step at n = 512 in float32, from L2, where it stays) and read their previous state back
from the slice they stored; a program still owns whole rows of the batch, so no program waits for another.

Two kernel launches a pass instead of a few launches a step. Triton is optional (``pip install
spectral-analysis[kernels]``); this module imports it and is imported only when the ``fused`` route runs.
With ``TRITON_INTERPRET=1`` set before the import, the same kernels run on the CPU through Triton's
interpreter (the test suite does so where there is no GPU).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.autograd.function import once_differentiable

from spectral_analysis.nn.time_loop import FUSED_RESIDENT_SIZE, fused_in_tf32

ACTIVATION_CODES = {"identity": 0, "relu": 1, "leaky_relu": 1, "tanh": 2, "abs": 3}
"""relu is leaky ReLU with leak 0: one code, the leak passed as a number."""


@triton.jit
def _activate(z, leak, ACTIVATION: tl.constexpr):
    if ACTIVATION == 1:
        return tl.where(z > 0, z, z * leak)
    if ACTIVATION == 2:
        return 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)  # tanh; saturates to +-1 where exp over/underflows
    if ACTIVATION == 3:
        return tl.abs(z)
    return z


@triton.jit
def _derivative(h, z, leak, ACTIVATION: tl.constexpr):
    """``phi'`` from the output ``h`` (from ``z`` for abs), with autograd's values at the kinks."""
    if ACTIVATION == 1:
        return tl.where(h > 0, 1.0, leak)
    if ACTIVATION == 2:
        return 1.0 - h * h
    if ACTIVATION == 3:
        return tl.where(z > 0, 1.0, tl.where(z < 0, -1.0, 0.0)).to(h.dtype)  # one dtype for every branch
    return tl.full(h.shape, 1.0, h.dtype)


@triton.jit
def _streamed_product(acc, a_ptr, a_live, rows, w_ptr, w_step_k, w_step_j, n,
                      BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    """``acc + a @ M`` with ``a`` (this program's rows of a state it stored, ``n`` a row) read back from
    memory and ``M[k, j] = w_ptr[k * w_step_k + j * w_step_j]`` read ``BLOCK_K`` rows at a time (from L2,
    every step): the product for a W too large to keep on chip. ``a_live`` masks the rows to read."""
    cols = tl.arange(0, BLOCK_N)
    for start in tl.static_range(0, BLOCK_N, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * n + ks[None, :], mask=a_live[:, None] & (ks < n)[None, :],
                    other=0.0)
        m = tl.load(w_ptr + ks[:, None] * w_step_k + cols[None, :] * w_step_j,
                    mask=(ks < n)[:, None] & (cols < n)[None, :], other=0.0)
        acc += tl.dot(a, m, input_precision=PRECISION)
    return acc


@triton.jit
def _forward_kernel(xp_ptr, w_ptr, h_ptr, z_ptr, leak_ptr, T, B, n,
                    ACTIVATION: tl.constexpr, KEEP_Z: tl.constexpr, BLOCK_B: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    """``h_ptr`` holds ``(T + 1, B, n)`` with ``h_0`` in its first slice; the rest is written. The leak is
    read from memory in the states' dtype (a float argument would be rounded to float32). With
    ``BLOCK_K == BLOCK_N`` W stays on chip; with a smaller ``BLOCK_K`` it is streamed each step and
    ``h_(t-1)`` read back from the slice this program wrote."""
    leak = tl.load(leak_ptr)
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.arange(0, BLOCK_N)
    inside = (rows < B)[:, None] & (cols < n)[None, :]
    if BLOCK_K == BLOCK_N:
        square = (cols < n)[:, None] & (cols < n)[None, :]
        Wt = tl.load(w_ptr + cols[None, :] * n + cols[:, None], mask=square, other=0.0)  # Wt[k, j] = W[j, k]
    offsets = rows[:, None] * n + cols[None, :]
    h = tl.load(h_ptr + offsets, mask=inside, other=0.0)
    xp = tl.load(xp_ptr + offsets, mask=inside, other=0.0)
    for t in range(T):
        xp_ptr += B * n  # the next step's projection is read before this step's product (its load overlaps)
        xp_next = tl.load(xp_ptr + offsets, mask=inside & (t + 1 < T), other=0.0)
        if BLOCK_K == BLOCK_N:
            z = tl.dot(h, Wt, input_precision=PRECISION) + xp
        else:
            z = _streamed_product(xp, h_ptr, rows < B, rows, w_ptr, 1, n, n, BLOCK_K, BLOCK_N, PRECISION)
        h = _activate(z, leak, ACTIVATION)
        h_ptr += B * n
        tl.store(h_ptr + offsets, h, mask=inside)
        if BLOCK_K != BLOCK_N:
            tl.debug_barrier()  # every thread's share of h_t stored before any thread reads it back
        if KEEP_Z:
            tl.store(z_ptr + offsets, z, mask=inside)
            z_ptr += B * n
        xp = xp_next


@triton.jit
def _backward_kernel(g_ptr, w_ptr, h_ptr, z_ptr, gz_ptr, leak_ptr, T, B, n,
                     ACTIVATION: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    """``gz_t = (g_t + gz_(t+1) W) * phi'_t`` from ``t = T - 1`` down; ``h_ptr`` is ``h_1`` .. ``h_T``.
    W on chip or streamed as in the forward kernel, ``gz_(t+1)`` then read back from ``gz_ptr``."""
    leak = tl.load(leak_ptr)
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.arange(0, BLOCK_N)
    inside = (rows < B)[:, None] & (cols < n)[None, :]
    if BLOCK_K == BLOCK_N:
        square = (cols < n)[:, None] & (cols < n)[None, :]
        W = tl.load(w_ptr + cols[:, None] * n + cols[None, :], mask=square, other=0.0)
    offsets = rows[:, None] * n + cols[None, :] + (T - 1) * B * n
    gz = tl.zeros((BLOCK_B, BLOCK_N), dtype=w_ptr.dtype.element_ty)
    g = tl.load(g_ptr + offsets, mask=inside, other=0.0)
    h = tl.load(h_ptr + offsets, mask=inside, other=0.0)
    z = tl.load(z_ptr + offsets, mask=inside, other=0.0) if ACTIVATION == 3 else h
    for t in range(T):
        earlier = offsets - B * n  # step t - 1's inputs, read before step t's product (the loads overlap)
        more = inside & (t + 1 < T)
        g_next = tl.load(g_ptr + earlier, mask=more, other=0.0)
        h_next = tl.load(h_ptr + earlier, mask=more, other=0.0)
        z_next = tl.load(z_ptr + earlier, mask=more, other=0.0) if ACTIVATION == 3 else h_next
        if BLOCK_K == BLOCK_N:
            gz = (g + tl.dot(gz, W, input_precision=PRECISION)) * _derivative(h, z, leak, ACTIVATION)
        else:  # gz_(t+1) is the slice after this step's; at t = T - 1 there is none (the rows read as 0)
            later = gz_ptr + (T - t) * B * n
            gz = _streamed_product(g, later, (rows < B) & (t > 0), rows, w_ptr, n, 1, n, BLOCK_K, BLOCK_N,
                                   PRECISION) * _derivative(h, z, leak, ACTIVATION)
        tl.store(gz_ptr + offsets, gz, mask=inside)
        if BLOCK_K != BLOCK_N:
            tl.debug_barrier()
        offsets = earlier
        g, h, z = g_next, h_next, z_next


BLOCK_ROWS = 16
"""Batch rows a program: the fewest ``tl.dot`` takes, and the fastest of 16 and 32 on an H200 at n = 128,
B = 64 and 128 (``benchmarks/fused_settings_cuda_h200.json``)."""
STREAMED_TILE = 64 * 256
"""The elements of W a streamed read brings on chip, ``BLOCK_K = STREAMED_TILE // BLOCK_N`` rows (64 KB of
float32): 64 rows at n = 256 and 32 at n = 512 were the fastest of 16, 32 and 64 on an H100 at B = 64 and
128, with 8 warps (TF32), 1.8x and 1.6x faster than 32 rows with 4 warps
(``benchmarks/fused_settings_cuda_h100.json``). One stage: Triton's software pipelining would issue a
step's loads of the state before the previous step has stored it (the loads read what the loop itself
writes)."""


def launch_settings(W: Tensor) -> dict:
    """The kernels' tiles, warps and ``tl.dot`` precision for ``W``: TF32 products with 4 warps where
    :func:`~spectral_analysis.nn.time_loop.fused_in_tf32` says so, else IEEE products with 16 warps (each
    the fastest candidate of its precision on an H200, ``benchmarks/fused_settings_cuda_h200.json``). W stays
    on chip (``BLOCK_K == BLOCK_N``) up to :data:`~spectral_analysis.nn.time_loop.FUSED_RESIDENT_SIZE`;
    past it the kernels stream it, :data:`STREAMED_TILE` elements a read, with 8 warps in TF32.

    >>> launch_settings(torch.eye(100))["BLOCK_N"]
    128
    >>> launch_settings(torch.eye(300))["BLOCK_K"]
    32
    """
    tf32 = fused_in_tf32(W.dtype)
    block = max(16, triton.next_power_of_2(W.shape[0]))
    settings = {"BLOCK_B": BLOCK_ROWS, "BLOCK_N": block, "BLOCK_K": block,
                "PRECISION": "tf32" if tf32 else "ieee", "num_warps": 4 if tf32 else 16}
    if block <= FUSED_RESIDENT_SIZE:
        return settings
    streamed = {"BLOCK_K": STREAMED_TILE // block, "num_stages": 1}
    return settings | streamed | ({"num_warps": 8} if tf32 else {})


class _FusedScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xp: Tensor, W: Tensor, h0: Tensor, activation: str, leak: float,
                settings: dict | None) -> Tensor:
        T, B, n = xp.shape
        xp, W = xp.contiguous(), W.contiguous()
        code, keep_z = ACTIVATION_CODES[activation], activation == "abs"
        leak = W.new_full((1,), 0.0 if activation == "relu" else leak)
        H = xp.new_empty((T + 1, B, n))
        H[0].copy_(h0)
        Z = torch.empty_like(xp) if keep_z else H  # an unread placeholder when z is not kept
        settings = settings or launch_settings(W)
        grid = (triton.cdiv(B, settings["BLOCK_B"]),)
        _forward_kernel[grid](xp, W, H, Z, leak, T, B, n, ACTIVATION=code, KEEP_Z=keep_z, **settings)
        ctx.code, ctx.settings = code, settings
        ctx.save_for_backward(W, H, leak, *((Z,) if keep_z else ()))
        return H[1:]

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):
        W, H, leak, *z = ctx.saved_tensors
        T, B, n = g.shape
        GZ = torch.empty_like(g, memory_format=torch.contiguous_format)
        settings = ctx.settings
        grid = (triton.cdiv(B, settings["BLOCK_B"]),)
        states = H[1:]
        _backward_kernel[grid](g.contiguous(), W, states, z[0] if z else states, GZ, leak, T, B, n,
                               ACTIVATION=ctx.code, **settings)
        grad_W = torch.tensordot(GZ, H[:-1], dims=([0, 1], [0, 1])) if ctx.needs_input_grad[1] else None
        grad_h0 = GZ[0] @ W if ctx.needs_input_grad[2] else None
        return GZ, grad_W, grad_h0, None, None, None


def recurrence_fused(xp: Tensor, W: Tensor, h0: Tensor, activation: str, leak: float,
                     settings: dict | None = None) -> Tensor:
    """Hidden states ``(T, B, n)`` from input projections ``xp (T, B, n)``, ``W (n, n)`` and ``h0 (B, n)``,
    by the persistent kernels; the same function as
    :func:`~spectral_analysis.nn.time_loop.recurrence_scan`. Where it can run (Triton, a CUDA device or
    the interpreter, ``n <= 512``, float32 or float64) is for
    :func:`~spectral_analysis.nn.time_loop.fused_unavailable` to say. ``settings`` replaces
    :func:`launch_settings`'s choice (``benchmarks/bench_fused_settings.py`` times the candidates).

    >>> H = recurrence_fused(xp, W, h0, "leaky_relu", 0.3)  # doctest: +SKIP
    """
    return _FusedScan.apply(xp, W, h0, activation, leak, settings)
