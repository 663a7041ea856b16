"""KRU's time loop with W kept as two Kronecker blocks (Jose et al., Eq. 4): ``W = A (x) B``.

The factors ``W_0 ... W_(F-1)`` are grouped into ``A = W_0 (x) ... (x) W_(k-1)`` (a x a) and
``B = W_k (x) ... (x) W_(F-1)`` (b x b), k chosen to make ``a + b`` smallest. With the state of
length ``N = a b`` read as an ``a x b`` matrix X (``torch.kron``'s index order), ``W h`` is
``A X B^T``: two small GEMMs, ``N (a + b)`` multiply-adds per example against the dense ``N^2``
(for N = 512 with 2 x 2 factors, 48 against 512 per unit). :class:`_KroneckerScan` runs the whole
sequence as one autograd node, as :func:`~spectral_analysis.nn.time_loop.recurrence_scan` does for a
dense W: backward walks ``W^H`` (``A^H X conj(B)``) down the steps and forms ``dL/dA`` and ``dL/dB``
once at the end. Complex factors run in complex arithmetic; the activation acts on the real and
imaginary parts (the real form's elementwise activation). Its twin is the dense scan on
``kron_matrix`` (tests hold them together, float64 gradcheck included).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from spectral_analysis.linalg import complex_vector, kron_matrix, real_vector
from spectral_analysis.nn.activations import activate_, derivative_from_output

KRONECKER_SCAN_ACTIVATIONS = ("identity", "relu", "leaky_relu", "tanh")  # derivative from the output


def kronecker_blocks(factors: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """``(A, B)`` with ``A (x) B = W_0 (x) ... (x) W_(F-1)``, split where ``a + b`` is smallest."""
    if len(factors) < 2:
        raise ValueError("a two-block Kronecker scan needs at least two factors")
    sizes = [W.shape[0] for W in factors]
    if any(W.shape[0] != W.shape[1] for W in factors):
        shapes = [tuple(W.shape) for W in factors]
        raise ValueError(f"the Kronecker scan needs square factors, got shapes {shapes}")
    split = min(range(1, len(sizes)), key=lambda k: math.prod(sizes[:k]) + math.prod(sizes[k:]))
    return kron_matrix(factors[:split]), kron_matrix(factors[split:])


def _real_view(z: Tensor) -> Tensor:
    return torch.view_as_real(z) if z.is_complex() else z


def _to_blocks(v: Tensor, a: int, b: int, complex_factors: bool) -> Tensor:
    """``(..., N')`` real (the real form ``(Re; Im)`` for complex factors) -> ``(..., a, b)`` states."""
    if complex_factors:
        v = complex_vector(v)
    # contiguous: the steps view each state as (batch a, b), and a gradient arriving through the
    # model's batch-first transpose is strided
    return v.reshape(*v.shape[:-1], a, b).contiguous()


def _from_blocks(z: Tensor) -> Tensor:
    """The inverse of :func:`_to_blocks`."""
    z = z.flatten(-2)
    return real_vector(z) if z.is_complex() else z


class _KroneckerScan(torch.autograd.Function):
    """Real-form tensors in and out; complex arithmetic inside for complex blocks."""

    @staticmethod
    def forward(ctx, xp: Tensor, A: Tensor, B: Tensor, h0: Tensor, activation: str, leak: float) -> Tensor:
        a, b, complex_factors = A.shape[0], B.shape[0], A.is_complex()
        xp = _to_blocks(xp, a, b, complex_factors)
        T, batch = xp.shape[:2]
        H = xp.new_empty((T + 1, batch, a, b))
        H[0] = _to_blocks(h0, a, b, complex_factors)
        Y = xp.new_empty((T, batch, a, b))  # X_t B^T, kept for dL/dA
        A_batch, B_t = A.expand(batch, a, a), B.mT
        for t in range(T):
            torch.mm(H[t].view(batch * a, b), B_t, out=Y[t].view(batch * a, b))
            torch.baddbmm(xp[t], A_batch, Y[t], out=H[t + 1])  # xp_t + A X_t B^T
            activate_(_real_view(H[t + 1]), activation, leak)
        ctx.activation, ctx.leak = activation, leak
        ctx.save_for_backward(A, B, H, Y)
        return _from_blocks(H[1:])

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):
        A, B, H, Y = ctx.saved_tensors
        T, batch, a, b = Y.shape
        g = _to_blocks(g, a, b, A.is_complex())
        D = None if ctx.activation == "identity" else derivative_from_output(
            _real_view(H[1:]), ctx.activation, ctx.leak)
        # conj() and mH are lazy views: resolved once here, not copied again at every step
        AH_batch = A.mH.resolve_conj().contiguous().expand(batch, a, a)
        B_conj = B.conj().resolve_conj()
        GZ = torch.empty_like(H[1:])  # dL/dz_t, z_t = W h_(t-1) + xp_t
        K = torch.empty_like(GZ)  # A^H GZ_t, kept for dL/dB
        GZ[T - 1] = g[T - 1]
        for t in range(T - 1, -1, -1):
            if D is not None:
                _real_view(GZ[t]).mul_(D[t])
            torch.bmm(AH_batch, GZ[t], out=K[t])
            if t > 0:  # GZ_(t-1) before its mask: g_(t-1) + W^H GZ_t, W^H X = A^H X conj(B)
                torch.addmm(g[t - 1].view(batch * a, b), K[t].view(batch * a, b), B_conj,
                            out=GZ[t - 1].view(batch * a, b))
        rows = T * batch
        # Z_n = A X_n B^T: dL/dA = sum_n G_n (X_n B^T)^H, dL/dB = sum_n (A^H G_n)^T conj(X_n)
        grad_A = torch.bmm(GZ.view(rows, a, b), Y.view(rows, a, b).mH).sum(0) \
            if ctx.needs_input_grad[1] else None
        grad_B = K.view(rows * a, b).mT @ H[:-1].reshape(rows * a, b).conj() \
            if ctx.needs_input_grad[2] else None
        grad_h0 = _from_blocks(torch.mm(K[0].view(batch * a, b), B_conj).view(batch, a, b)) \
            if ctx.needs_input_grad[3] else None
        return _from_blocks(GZ), grad_A, grad_B, grad_h0, None, None


def kronecker_scan(xp: Tensor, factors: Sequence[Tensor], h0: Tensor, activation: str, leak: float) -> Tensor:
    """Hidden states ``(T, B, N')`` of ``h_t = phi(W h_(t-1) + xp_t)``, ``W = W_0 (x) ... (x) W_(F-1)``.

    ``xp (T, B, N')`` and ``h0 (B, N')`` are real; for complex factors ``N' = 2N`` holds the real form
    ``(Re h; Im h)``, as :class:`~spectral_analysis.nn.peer_transitions.KroneckerTransition` presents it."""
    if activation not in KRONECKER_SCAN_ACTIVATIONS:
        raise ValueError(f"the Kronecker scan supports the activations {KRONECKER_SCAN_ACTIVATIONS}, "
                         f"not {activation!r}; use recurrence='scan'")
    A, B = kronecker_blocks(factors)
    return _KroneckerScan.apply(xp, A, B, h0, activation, leak)
