"""The uRNN's time loop as one autograd node (Arjovsky et al. 2016, Eq. 6 and 8).

``h_t = modReLU(W h_(t-1) + u_t)`` with ``W = D3 R2 F^-1 D2 Pi R1 F D1`` applied by its factors
(:func:`unitary_product`). Autograd through the per-step loop records about twenty complex nodes a step
and reduces the gradients of the phases and reflections into fresh tensors at each of them;
:class:`_UnitaryScan` keeps only the states ``h_t`` and pre-activations ``a_t``, and its backward walks
``W^H = D1^H F^H R1 Pi^T D2^H F R2 D3^H`` down the steps (``F^H = F^-1``, ``R_j^H = R_j``), recomputing one
step's intermediate products from ``h_(t-1)`` and adding each factor's gradient in place. Gradients follow
torch's convention for complex tensors (``dL/dRe z + i dL/dIm z``), so the phases, the reflection rows
and ``u`` connect to the model's real parameters through ordinary autograd outside the node. Its
reference twin is the autograd loop (``UnitaryRNN.run(..., recurrence="loop")``); tests hold them
together, float64 gradcheck included.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from spectral_analysis.nn.modrelu import modrelu, modrelu_backward


def unitary_product(z: Tensor, phases: Tensor, conjugates: Tensor, scaled: Tensor, permutation: Tensor,
                    keep: list[Tensor] | None = None) -> Tensor:
    """``W z`` for complex ``z (B, n)``, right to left: D1, F, R1, Pi, D2, F^-1, R2, D3; O(n log n).

    ``R_j z = z - (z . conj(v_j)) 2 v_j / ||v_j||^2`` from the rows ``conjugates[j] = conj(v_j)`` and
    ``scaled[j] = 2 v_j / ||v_j||^2``. With ``keep`` a list, the intermediate products the backward
    needs are appended to it: ``F D1 z``, the coefficients ``z . conj(v_1)`` of R1, ``Pi R1 F D1 z``,
    ``F^-1 D2 Pi ...``, the coefficients of R2, and ``R2 F^-1 ...``."""
    z = torch.fft.fft(phases[0] * z, norm="ortho")
    alpha = z @ conjugates[0]
    reflected = z - alpha.unsqueeze(-1) * scaled[0]
    permuted = reflected[..., permutation]
    w = torch.fft.ifft(phases[1] * permuted, norm="ortho")
    beta = w @ conjugates[1]
    out = w - beta.unsqueeze(-1) * scaled[1]
    if keep is not None:
        keep.extend((z, alpha, permuted, w, beta, out))
    return phases[2] * out


def _reflection_backward(z: Tensor, alpha: Tensor, g: Tensor, conjugate: Tensor, scaled: Tensor,
                         grad_conjugate: Tensor, grad_scaled: Tensor) -> Tensor:
    """``dL/dz`` of ``y = z - alpha s``, ``alpha = z . c``, from ``g = dL/dy``; adds ``dL/dc`` and
    ``dL/ds`` in place. With ``k = g . conj(s)`` (``= -dL/dalpha``): ``dL/dz = g - k conj(c)``,
    ``dL/dc = -conj(z)^T k``, ``dL/ds = -conj(alpha)^T g``."""
    k = g @ scaled.conj()
    grad_conjugate.sub_(k @ z.conj())
    grad_scaled.sub_(alpha.conj() @ g)
    return g - k.unsqueeze(-1) * conjugate.conj()


class _UnitaryScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u: Tensor, h0: Tensor, phases: Tensor, conjugates: Tensor, scaled: Tensor, b: Tensor,
                permutation: Tensor) -> Tensor:
        T = u.shape[0]
        H = u.new_empty((T + 1, *h0.shape))
        A = torch.empty_like(u)  # pre-activations W h_(t-1) + u_t
        H[0] = h0
        for t in range(T):
            torch.add(unitary_product(H[t], phases, conjugates, scaled, permutation), u[t], out=A[t])
            H[t + 1] = modrelu(A[t], b)
        ctx.save_for_backward(H, A, phases, conjugates, scaled, b, permutation)
        return H[1:]

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):
        H, A, phases, conjugates, scaled, b, permutation = ctx.saved_tensors
        g = g.contiguous()  # batch-first readers hand in a transposed gradient
        inverse = torch.argsort(permutation)
        grad_u = torch.empty_like(A)
        grads = [torch.zeros_like(p) for p in (phases, conjugates, scaled, b)]
        grad_phases, grad_conjugates, grad_scaled, grad_b = grads
        carry = torch.zeros_like(H[0])  # dL/dh_t from the steps after t
        for t in range(A.shape[0] - 1, -1, -1):
            grad_a, grad_b_t = modrelu_backward(A[t], b, g[t] + carry)
            grad_b += grad_b_t
            grad_u[t] = grad_a
            kept: list[Tensor] = []
            unitary_product(H[t], phases, conjugates, scaled, permutation, keep=kept)
            z, alpha, permuted, w, beta, out = kept
            grad_phases[2] += (out.conj() * grad_a).sum(0)
            grad = _reflection_backward(w, beta, phases[2].conj() * grad_a, conjugates[1], scaled[1],
                                        grad_conjugates[1], grad_scaled[1])
            grad = torch.fft.fft(grad, norm="ortho")  # the adjoint of the unitary F^-1
            grad_phases[1] += (permuted.conj() * grad).sum(0)
            grad = (phases[1].conj() * grad)[..., inverse]
            grad = _reflection_backward(z, alpha, grad, conjugates[0], scaled[0],
                                        grad_conjugates[0], grad_scaled[0])
            grad = torch.fft.ifft(grad, norm="ortho")
            grad_phases[0] += (H[t].conj() * grad).sum(0)
            carry = phases[0].conj() * grad
        return grad_u, carry, grad_phases, grad_conjugates, grad_scaled, grad_b, None


def unitary_scan(u: Tensor, h0: Tensor, phases: Tensor, conjugates: Tensor, scaled: Tensor, b: Tensor,
                 permutation: Tensor) -> Tensor:
    """Complex states ``(T, B, n)`` of ``h_t = modReLU(W h_(t-1) + u_t, b)`` from ``u (T, B, n)`` and
    ``h0 (B, n)``; W's factors as :meth:`~spectral_analysis.nn.urnn.UnitaryTransition.factors` gives them."""
    return _UnitaryScan.apply(u.contiguous(), h0, phases, conjugates, scaled, b, permutation)
