"""The time loop of Eq. 4, ``h_t = phi(W h_{t-1} + M x_t + b)``, for a W that is fixed over time.

Four interchangeable routes, all exact (they differ only in rounding):

- ``torch``: PyTorch's fused RNN kernel (``torch.rnn_relu`` / ``torch.rnn_tanh``, cuDNN on a
  GPU), which takes any weight tensors and keeps autograd; relu and tanh only.
- ``scan``: :class:`_Scan`, one autograd node for the whole sequence. Forward runs one ``addmm``
  and one in-place activation per step; backward runs one ``addmm`` and one elementwise op per step
  and forms ``dL/dW = sum_t g_t h_{t-1}^T`` as one large GEMM at the end. Every activation.
- ``loop``: the obviously correct twin, a plain Python loop under autograd (dense W).
- ``reflector``: the same loop with ``W h`` applied by the transition's own structure, W never formed:
  the reflectors one at a time (Algorithm 1, :func:`~spectral_analysis.linalg.reflector_loop`), KRU's
  factor-by-factor product, DizzyRNN's packed rotations. ``auto`` takes this route for KRU.

``auto`` picks ``torch`` for relu/tanh on CUDA (cuDNN) and ``scan`` elsewhere: on the CPU the scan
measured faster than PyTorch's own kernel (``benchmarks/bench_recurrence.py``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from spectral_analysis.nn.activations import activate, activate_, derivative_from_output
from spectral_analysis.vocabulary import RECURRENCES

TORCH_KERNEL_ACTIVATIONS = ("relu", "tanh")


class _Scan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xp: Tensor, W: Tensor, h0: Tensor, activation: str, leak: float) -> Tensor:
        T = xp.shape[0]
        H = xp.new_empty((T + 1, *h0.shape))
        H[0] = h0
        Z = xp.new_empty(xp.shape) if activation == "abs" else None
        Wt = W.t()
        for t in range(T):
            if Z is None:
                activate_(torch.addmm(xp[t], H[t], Wt, out=H[t + 1]), activation, leak)
            else:  # abs: keep z, its sign is the derivative
                torch.abs(torch.addmm(xp[t], H[t], Wt, out=Z[t]), out=H[t + 1])
        ctx.activation, ctx.leak = activation, leak
        ctx.save_for_backward(W, H, *(() if Z is None else (Z,)))
        return H[1:]

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):
        W, H, *z = ctx.saved_tensors
        T = g.shape[0]
        if ctx.activation == "identity":
            D = None
        elif ctx.activation == "abs":
            D = torch.sgn(z[0])
        else:
            D = derivative_from_output(H[1:], ctx.activation, ctx.leak)
        GZ = torch.empty_like(H[1:])  # dL/dz_t
        torch.mul(g[T - 1], D[T - 1], out=GZ[T - 1]) if D is not None else GZ[T - 1].copy_(g[T - 1])
        for t in range(T - 2, -1, -1):
            torch.addmm(g[t], GZ[t + 1], W, out=GZ[t])  # g_t + GZ_(t+1) W in one pass
            if D is not None:
                GZ[t].mul_(D[t])
        grad_W = torch.tensordot(GZ, H[:-1], dims=([0, 1], [0, 1])) if ctx.needs_input_grad[1] else None
        grad_h0 = GZ[0] @ W if ctx.needs_input_grad[2] else None
        return GZ, grad_W, grad_h0, None, None


def recurrence_scan(xp: Tensor, W: Tensor, h0: Tensor, activation: str, leak: float) -> Tensor:
    """Hidden states ``(T, B, n)`` from input projections ``xp = M x_t + b`` ``(T, B, n)`` by the scan."""
    return _Scan.apply(xp, W, h0, activation, leak)


def recurrence_loop(xp: Tensor, h0: Tensor, step: Callable[[Tensor], Tensor], activation: str,
                    leak: float) -> Tensor:
    """The reference: ``h_t = phi(step(h_{t-1}) + xp_t)`` under autograd, ``step(h) = W h``."""
    h, states = h0, []
    for t in range(xp.shape[0]):
        h = activate(step(h) + xp[t], activation, leak)
        states.append(h)
    return torch.stack(states)


def recurrence_torch(x: Tensor, M: Tensor, b: Tensor, W: Tensor, h0: Tensor, activation: str) -> Tensor:
    """PyTorch's fused kernel on batch-first ``x (B, T, ni)``; returns ``(B, T, n)``."""
    kernel = torch.rnn_relu if activation == "relu" else torch.rnn_tanh
    with warnings.catch_warnings():  # cuDNN copies W into its flat buffer: W is new at every call
        warnings.filterwarnings("ignore", message=".*contiguous chunk of memory.*")
        # cuDNN views the weights as one flat buffer: a transposed or strided W (the SVD map's) must be
        # made contiguous first ("view size is not compatible with input tensor's size and stride")
        weights = [M.contiguous(), W.contiguous(), b.contiguous(), torch.zeros_like(b)]
        out, _ = kernel(x.contiguous(), h0.unsqueeze(0).contiguous(), weights, True, 1, 0.0,
                        torch.is_grad_enabled(), False, True)
    return out


def resolve_recurrence(mode: str, activation: str, device: torch.device) -> str:
    """The concrete route for ``mode`` (``auto`` resolved); ``ValueError`` when it cannot run."""
    if mode not in RECURRENCES:
        raise ValueError(f"unknown recurrence {mode!r}; expected one of {RECURRENCES}")
    if mode == "auto":
        return "torch" if device.type == "cuda" and activation in TORCH_KERNEL_ACTIVATIONS else "scan"
    if mode == "torch" and activation not in TORCH_KERNEL_ACTIVATIONS:
        raise ValueError(f"recurrence='torch' (PyTorch's fused RNN kernel) supports only "
                         f"{TORCH_KERNEL_ACTIVATIONS}, not {activation!r}; use 'scan'")
    return mode
