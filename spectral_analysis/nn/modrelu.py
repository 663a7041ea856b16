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

from spectral_analysis.nn.cuda_graphs import Buffers, run_body

MODRELU_EPS = 1e-6  # |z| is floored here inside modReLU, so its gradient stays finite near z = 0


def modrelu(z: Tensor, b: Tensor) -> Tensor:
    """``relu(|z| + b) z / |z|`` per complex unit (Arjovsky et al., Eq. 8), |z| floored at ``MODRELU_EPS``.

    The floor acts on ``|z|^2`` before the square root: ``torch.abs``'s gradient ``z / |z|`` overflows
    to inf for subnormal ``z`` (``1 / |z|`` past float32's range), and inf times the floor's zero
    gradient is nan.
    """
    magnitude = _floored_squares(z.real, z.imag)[1].sqrt()
    return torch.relu(magnitude + b) / magnitude * z


def _floored_squares(real: Tensor, imag: Tensor) -> tuple[Tensor, Tensor]:
    """``(|z|^2, max(|z|^2, eps^2))``: modReLU's magnitude squared, and floored before the square root."""
    squared = real.square() + imag.square()
    return squared, squared.clamp_min(MODRELU_EPS**2)


CHUNK_ELEMENTS = 2**16  # ModReLUGradient forms its coefficients for this many values at once (>= a step)


class ModReLUGradient:
    """modReLU's backward over a sequence of pre-activations ``a`` (real and imaginary parts ``(T, ..., n)``,
    any layout after the step index), visited a step at a time. For ``h = s a``, ``s = relu(m + b) / m``,
    ``m = sqrt(max(|a|^2, eps^2))`` and ``g = dL/dh``: ``dL/ds = Re(conj(g) a)``, ``ds/dm = (1[m + b > 0]
    - s) / m = -p b / m`` with ``p = 1[m + b > 0] / m``, and ``dm/da = a / m`` where ``|a|^2 >= eps^2``
    (the floor passes no gradient below it, as ``clamp_min``), so ``dL/da = s g - Re(conj(g) a) q a``
    with ``q = p b / |a|^2`` there (0 below), and ``dL/db = sum Re(conj(g) a) p``. ``s``, ``p`` and ``q``
    depend on ``a`` only: they are formed for a chunk of steps at once (:data:`CHUNK_ELEMENTS` values),
    which stays in cache. The whole sequence at once was passes over memory, a sixth of a KRU training
    step at the adding size; one step at a time was many small ops, slower at the copy size."""

    def __init__(self, real: Tensor, imag: Tensor, b: Tensor) -> None:
        self.real, self.imag, self.b = real, imag, b
        self.steps = max(1, CHUNK_ELEMENTS // max(1, real[0].numel()))  # steps per chunk
        self.start = -1  # the first step of the chunk formed
        self.bias_sum = torch.zeros_like(real[0])  # sum over the steps of Re(conj(g) a) p, per example
        self.dot = torch.empty_like(real[0])

    def _chunk(self, t: int) -> int:
        """Form ``s``, ``p``, ``q`` of the chunk holding step ``t``; ``t``'s index in it."""
        start = t - t % self.steps
        if start != self.start:
            self.start = start
            real, imag = self.real[start:start + self.steps], self.imag[start:start + self.steps]
            squared, floored = _floored_squares(real, imag)
            m = floored.sqrt()
            shifted = m + self.b
            self.p = torch.div(shifted > 0, m)
            self.q = (self.p * self.b).div_(floored).mul_(squared >= MODRELU_EPS**2)
            self.s = shifted.relu_().div_(m)
        return t - start

    def step(self, t: int, g_real: Tensor, g_imag: Tensor) -> tuple[Tensor, Tensor]:
        """``(s_t, c_t)`` with ``dL/da_t = s_t g - c_t a_t``; adds step ``t``'s share of ``dL/db``."""
        i = self._chunk(t)
        dot = torch.mul(g_real, self.real[t], out=self.dot).addcmul_(g_imag, self.imag[t])
        self.bias_sum.addcmul_(dot, self.p[i])
        return self.s[i], dot.mul_(self.q[i])

    def bias_gradient(self) -> Tensor:
        """``dL/db``, summed over the steps and examples (after :meth:`step` at every step)."""
        return self.bias_sum.reshape(-1, self.bias_sum.shape[-1]).sum(0)


def modrelu_backward(a: Tensor, b: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    """``(dL/da, dL/db)`` of :func:`modrelu` on complex ``a (B, n)`` from ``g = dL/dh``, one step
    (:class:`ModReLUGradient`)."""
    gradient = ModReLUGradient(a.real.unsqueeze(0), a.imag.unsqueeze(0), b)
    s, c = gradient.step(0, g.real, g.imag)
    return s * g - c * a, gradient.bias_gradient()


def modrelu_pairs(z: Tensor, b: Tensor, out: Tensor) -> None:
    """``out = ``:func:`modrelu` of real-form states, both viewed as ``(B, 2, n)`` (``Re; Im``), in real
    arithmetic (no autograd: the scans' forward)."""
    m = torch.hypot(z[:, 0], z[:, 1]).clamp_min_(MODRELU_EPS)  # sqrt(max(|z|^2, eps^2))
    torch.mul(z, (m + b).relu_().div_(m).unsqueeze(1), out=out)


def pairs_gradient(Z: Tensor, b: Tensor) -> ModReLUGradient:
    """:class:`ModReLUGradient` of a sequence of real-form pre-activations ``Z (T, B, 2, n)``."""
    return ModReLUGradient(Z[:, :, 0], Z[:, :, 1], b)


def pairs_step(gradient: ModReLUGradient, t: int, z: Tensor, g: Tensor, out: Tensor) -> None:
    """``out = dL/dz_t`` from ``g = dL/dh_t``, both real-form ``(B, 2, n)`` (``out`` may be ``g``'s own
    storage)."""
    s, c = gradient.step(t, g[:, 0], g[:, 1])
    torch.mul(g, s.unsqueeze(1), out=out).addcmul_(z, c.unsqueeze(1), value=-1)


class _DenseModReLUScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xp: Tensor, W: Tensor, h0: Tensor, b: Tensor, graphs: bool) -> Tensor:
        T, batch = xp.shape[:2]

        def steps(buf: Buffers) -> None:
            H, Z = buf["H"], buf["Z"]  # Z: the pre-activations W h_(t-1) + xp_t
            H[0].copy_(buf["h0"])
            Wt = buf["W"].t()
            for t in range(T):
                torch.addmm(buf["xp"][t], H[t], Wt, out=Z[t])
                modrelu_pairs(Z[t].view(batch, 2, -1), buf["b"], out=H[t + 1].view(batch, 2, -1))

        def outputs() -> Buffers:
            return {"H": xp.new_empty((T + 1, *h0.shape)), "Z": torch.empty_like(xp)}

        done = run_body(("modrelu scan forward",) if graphs else None, outputs, steps,
                        {"xp": xp, "W": W, "h0": h0, "b": b})
        ctx.graphs = graphs
        ctx.save_for_backward(W, done["H"], done["Z"], b)
        return done["H"][1:]

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):
        W, H, Z, b = ctx.saved_tensors
        T, batch = Z.shape[:2]

        def steps(buf: Buffers) -> None:
            g, W, GZ, grad_h = buf["g"], buf["W"], buf["GZ"], buf["grad_h"]  # grad_h: g_t + GZ_(t+1) W
            pairs = buf["Z"].view(T, batch, 2, -1)
            gradient = pairs_gradient(pairs, buf["b"])
            grad_h.copy_(g[T - 1])
            for t in range(T - 1, -1, -1):
                pairs_step(gradient, t, pairs[t], grad_h.view(batch, 2, -1), out=GZ[t].view(batch, 2, -1))
                if t > 0:
                    torch.addmm(g[t - 1], GZ[t], W, out=grad_h)
                else:
                    torch.mm(GZ[0], W, out=grad_h)  # dL/dh_0
            buf["grad_b"].copy_(gradient.bias_gradient())

        def outputs() -> Buffers:
            return {"GZ": torch.empty_like(Z), "grad_h": torch.empty_like(Z[0]),
                    "grad_b": torch.empty_like(b)}

        done = run_body(("modrelu scan backward",) if ctx.graphs else None, outputs, steps,
                        {"g": g.contiguous(), "W": W, "Z": Z, "b": b})
        GZ = done["GZ"]
        grad_W = torch.tensordot(GZ, H[:-1], dims=([0, 1], [0, 1])) if ctx.needs_input_grad[1] else None
        return GZ, grad_W, done["grad_h"], done["grad_b"], None


def dense_modrelu_scan(xp: Tensor, W: Tensor, h0: Tensor, b: Tensor, graphs: bool = False) -> Tensor:
    """Real-form states ``(T, B, 2n)`` of ``h_t = modReLU(W h_(t-1) + xp_t, b)`` from ``xp (T, B, 2n)``,
    ``h0 (B, 2n)``, W's real form ``(2n, 2n)`` and modReLU's bias ``b (n,)``; ``graphs`` replays both
    time loops as CUDA graphs (:func:`~spectral_analysis.nn.cuda_graphs.run_body`)."""
    return _DenseModReLUScan.apply(xp.contiguous(), W, h0, b, graphs)
