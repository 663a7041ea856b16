"""modReLU (Arjovsky et al. 2016, Eq. 8), ``relu(|z| + b) z / |z|`` per complex unit, and the dense time
loop ``h_t = modReLU(W h_(t-1) + u_t)`` as one autograd node.

The uRNN uses it, and so does KRU: its paper's complex units are "complex rectified linear units
(Arjovsky et al., 2016)", the same as the uRNNs' (KRU Section 4). States in the real form ``(Re h; Im
h)`` of length 2n are read as ``(..., 2, n)`` pairs (:func:`modrelu_pairs`), so a real-form time loop
applies modReLU without leaving real arithmetic for its products. :class:`_DenseModReLUScan` is
:func:`~spectral_analysis.nn.time_loop.recurrence_scan` with modReLU for phi: its backward passes
``dL/dh_t`` through modReLU's 2 x 2 Jacobian of each unit (not an elementwise one) and adds ``dL/db``.
Its reference twin is the autograd loop; tests hold them together, float64 gradcheck included.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

MODRELU_EPS = 1e-6  # |z| is floored here inside modReLU, so its gradient stays finite near z = 0


def modrelu(z: Tensor, b: Tensor) -> Tensor:
    """``relu(|z| + b) z / |z|`` per complex unit (Arjovsky et al., Eq. 8), |z| floored at ``MODRELU_EPS``.

    The floor acts on ``|z|^2`` before the square root: ``torch.abs``'s gradient ``z / |z|`` overflows
    to inf for subnormal ``z`` (``1 / |z|`` past float32's range), and inf times the floor's zero
    gradient is nan.
    """
    _, magnitude = _floored_magnitude(z.real, z.imag)
    return torch.relu(magnitude + b) / magnitude * z


def _floored_magnitude(real: Tensor, imag: Tensor) -> tuple[Tensor, Tensor]:
    """``(|z|^2, sqrt(max(|z|^2, eps^2)))``: modReLU's magnitude, floored before the square root."""
    squared = real.square() + imag.square()
    return squared, squared.clamp_min(MODRELU_EPS**2).sqrt()


def _backward_parts(a_real: Tensor, a_imag: Tensor, b: Tensor, g_real: Tensor,
                    g_imag: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(s, c, dL/db)`` with ``dL/da = s g + c a`` for ``h = modReLU(a, b) = s a``, ``s = relu(m + b) / m``,
    ``m = sqrt(max(|a|^2, eps^2))``, from ``g = dL/dh``: ``dL/ds = Re(conj(g) a)``; ``ds/dm = (1[m + b >
    0] - s) / m``; ``dm/da = a / m`` where ``|a|^2 >= eps^2`` (the floor passes no gradient below it, as
    ``clamp_min``), so ``c = dL/ds ds/dm / m``. Real and imaginary parts apart, in any layout."""
    squared, m = _floored_magnitude(a_real, a_imag)
    shifted = m + b
    active = (shifted > 0).to(m.dtype)
    s = shifted.mul_(active).div_(m)  # relu(m + b) / m
    dL_ds_over_m = torch.addcmul(g_real * a_real, g_imag, a_imag).div_(m)
    dL_db = (dL_ds_over_m * active).sum(0)
    c = dL_ds_over_m.mul_(active.sub_(s)).div_(m).mul_(squared >= MODRELU_EPS**2)
    return s, c, dL_db


def modrelu_backward(a: Tensor, b: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    """``(dL/da, dL/db)`` of :func:`modrelu` on complex ``a (B, n)`` from ``g = dL/dh``
    (:func:`_backward_parts`)."""
    s, c, dL_db = _backward_parts(a.real, a.imag, b, g.real, g.imag)
    return s * g + c * a, dL_db


def modrelu_pairs(z: Tensor, b: Tensor, out: Tensor) -> None:
    """``out = ``:func:`modrelu` of real-form states, both viewed as ``(B, 2, n)`` (``Re; Im``), in real
    arithmetic (no autograd: the scans' forward)."""
    m = torch.hypot(z[:, 0], z[:, 1]).clamp_min_(MODRELU_EPS)  # sqrt(max(|z|^2, eps^2))
    torch.mul(z, (m + b).relu_().div_(m).unsqueeze(1), out=out)


def modrelu_pairs_backward(z: Tensor, b: Tensor, g: Tensor, out: Tensor) -> Tensor:
    """:func:`modrelu_backward` on ``(B, 2, n)`` real-form pairs: ``out = dL/dz`` (``out`` may be ``g``'s
    own storage); returns ``dL/db (n,)``."""
    s, c, dL_db = _backward_parts(z[:, 0], z[:, 1], b, g[:, 0], g[:, 1])
    torch.addcmul(g * s.unsqueeze(1), z, c.unsqueeze(1), out=out)
    return dL_db


class _DenseModReLUScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xp: Tensor, W: Tensor, h0: Tensor, b: Tensor) -> Tensor:
        T, batch = xp.shape[:2]
        H = xp.new_empty((T + 1, *h0.shape))
        Z = torch.empty_like(xp)  # pre-activations W h_(t-1) + xp_t
        H[0] = h0
        Wt = W.t()
        for t in range(T):
            torch.addmm(xp[t], H[t], Wt, out=Z[t])
            modrelu_pairs(Z[t].view(batch, 2, -1), b, out=H[t + 1].view(batch, 2, -1))
        ctx.save_for_backward(W, H, Z, b)
        return H[1:]

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):
        W, H, Z, b = ctx.saved_tensors
        T, batch = Z.shape[:2]
        g = g.contiguous()
        GZ = torch.empty_like(Z)  # dL/dz_t
        grad_b = torch.zeros_like(b)
        carry = torch.zeros_like(H[0])  # dL/dh_t from the steps after t: GZ_(t+1) W
        for t in range(T - 1, -1, -1):
            grad_b += modrelu_pairs_backward(Z[t].view(batch, 2, -1), b, (g[t] + carry).view(batch, 2, -1),
                                             out=GZ[t].view(batch, 2, -1))
            carry = GZ[t] @ W
        grad_W = torch.tensordot(GZ, H[:-1], dims=([0, 1], [0, 1])) if ctx.needs_input_grad[1] else None
        return GZ, grad_W, carry, grad_b


def dense_modrelu_scan(xp: Tensor, W: Tensor, h0: Tensor, b: Tensor) -> Tensor:
    """Real-form states ``(T, B, 2n)`` of ``h_t = modReLU(W h_(t-1) + xp_t, b)`` from ``xp (T, B, 2n)``,
    ``h0 (B, 2n)``, W's real form ``(2n, 2n)`` and modReLU's bias ``b (n,)``."""
    return _DenseModReLUScan.apply(xp.contiguous(), W, h0, b)
