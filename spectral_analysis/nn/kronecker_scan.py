"""KRU's time loop with W kept as two Kronecker blocks (Jose et al., Eq. 4): ``W = A (x) B``.

The factors ``W_0 ... W_(F-1)`` are grouped into ``A = W_0 (x) ... (x) W_(k-1)`` (a x a) and
``B = W_k (x) ... (x) W_(F-1)`` (b x b), k chosen to make ``a + b`` smallest. With the state of
length ``N = a b`` read as an ``a x b`` matrix X (``torch.kron``'s index order), ``W h`` is
``A X B^T``: two small GEMMs, ``N (a + b)`` multiply-adds per example against the dense ``N^2``
(for N = 512 with 2 x 2 factors, 48 against 512 per unit). :class:`_KroneckerScan` runs the whole
sequence as one autograd node, as :func:`~spectral_analysis.nn.time_loop.recurrence_scan` does for a
dense W: backward walks ``W^H`` (``A^H X conj(B)``) down the steps and forms ``dL/dA`` and ``dL/dB``
along the way. Complex factors never leave the real form: a state ``(Re h; Im h)`` is read as two
planes of ``a x b`` (a view, no copy), ``A`` acts through its real form ``[[Re A, -Im A], [Im A,
Re A]]`` and ``B`` plane by plane, so every product is a real GEMM and the activation acts on the
real and imaginary parts as the real form's elementwise activation does; modReLU (KRU's complex units,
:mod:`~spectral_analysis.nn.modrelu`) reads the two planes as one unit's pair and keeps the
pre-activations for its backward. Its twin is the dense scan on ``kron_matrix`` (tests hold them
together, float64 gradcheck included).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from spectral_analysis.linalg import kron_matrix
from spectral_analysis.nn.activations import activate_, derivative_from_output
from spectral_analysis.nn.cuda_graphs import Buffers, run_body
from spectral_analysis.nn.modrelu import modrelu_pairs, pairs_gradient, pairs_step
from spectral_analysis.vocabulary import MODRELU

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


def _left_real_form(A: Tensor) -> Tensor:
    """The real matrix acting on stacked planes ``(Re X; Im X)`` as ``A`` acts on ``X``:
    ``[[Re A, -Im A], [Im A, Re A]]`` (``A`` itself when real)."""
    if not A.is_complex():
        return A
    return torch.cat([torch.cat([A.real, -A.imag], 1), torch.cat([A.imag, A.real], 1)], 0)


class _RightProduct:
    """``X -> X C`` on planar states ``(batch, P a, b)`` (``P = 2`` planes ``Re; Im`` for complex ``C``),
    in real GEMMs: ``X_p [Re C | Im C]`` for both planes at once, then the planes recombined. Built from
    :meth:`prepared` ``C``."""

    def __init__(self, prepared: Tensor, complex_: bool, batch: int, a: int, b: int) -> None:
        self.complex, self.batch, self.a, self.b, self.C = complex_, batch, a, b, prepared
        self.scratch = prepared.new_empty(batch, 2, a, 2 * b) if complex_ else None

    @staticmethod
    def prepared(C: Tensor) -> Tensor:
        """``[Re C | Im C]`` for complex ``C`` (``C`` itself when real), contiguous."""
        return torch.cat([C.real, C.imag], 1).contiguous() if C.is_complex() else C.contiguous()

    def __call__(self, X: Tensor, out: Tensor, add: Tensor | None = None) -> None:
        """``out = X C`` (``+ add``); ``X``, ``out`` and ``add`` are ``(batch, P a, b)``."""
        b = self.b
        if not self.complex:
            if add is None:
                torch.mm(X.view(-1, b), self.C, out=out.view(-1, b))
            else:
                torch.addmm(add.view(-1, b), X.view(-1, b), self.C, out=out.view(-1, b))
            return
        S = self.scratch  # S[:, p, :, :b] = X_p Re C, S[:, p, :, b:] = X_p Im C
        torch.mm(X.view(-1, b), self.C, out=S.view(-1, 2 * b))
        real, imag = out.view(self.batch, 2, self.a, b).unbind(1)
        if add is None:
            torch.sub(S[:, 0, :, :b], S[:, 1, :, b:], out=real)  # Re: X_r C_r - X_i C_i
            torch.add(S[:, 0, :, b:], S[:, 1, :, :b], out=imag)  # Im: X_r C_i + X_i C_r
        else:
            add_real, add_imag = add.view(self.batch, 2, self.a, b).unbind(1)
            torch.add(add_real, S[:, 0, :, :b], out=real).sub_(S[:, 1, :, b:])
            torch.add(add_imag, S[:, 0, :, b:], out=imag).add_(S[:, 1, :, :b])


def _complex_from_planes(M: Tensor, size: int) -> Tensor:
    """``sum_n G_n Y_n^H`` from the plane products ``M = sum_n [G_r; G_i] [Y_r; Y_i]^T``, blocks
    ``[[rr, ri], [ir, ii]]``: ``(rr + ii) + i (ir - ri)``."""
    rr, ri, ir, ii = M[:size, :size], M[:size, size:], M[size:, :size], M[size:, size:]
    return torch.complex(rr + ii, ir - ri)


class _KroneckerScan(torch.autograd.Function):
    """Real-form tensors in and out. A state of the real form ``(Re h; Im h)`` is read, without a copy,
    as planes ``(P a, b)``: ``A`` acts on them through its real form, ``B`` through
    :class:`_RightProduct`, so every product is a real GEMM. Both time loops run on buffers
    (:func:`~spectral_analysis.nn.cuda_graphs.run_body`), replayed as CUDA graphs with ``graphs``."""

    @staticmethod
    def forward(ctx, xp: Tensor, A: Tensor, B: Tensor, h0: Tensor, activation: str, leak: float,
                bias: Tensor | None, graphs: bool) -> Tensor:
        a, b, planes = A.shape[0], B.shape[0], 2 if A.is_complex() else 1
        T, batch = xp.shape[:2]
        xp = xp.reshape(T, batch, planes * a, b)
        modrelu = activation == MODRELU  # modReLU's derivative needs z_t

        def steps(buf: Buffers) -> None:
            xp, H, Y, Z = buf["xp"], buf["H"], buf["Y"], buf.get("Z")  # Y: X_t B^T, kept for dL/dA
            H[0].copy_(buf["h0"])
            A_batch = buf["A"].expand(batch, planes * a, planes * a)
            times_B_transposed = _RightProduct(buf["C"], planes == 2, batch, a, b)
            for t in range(T):
                times_B_transposed(H[t], Y[t])
                if Z is None:
                    torch.baddbmm(xp[t], A_batch, Y[t], out=H[t + 1])  # xp_t + A X_t B^T
                    activate_(H[t + 1], activation, leak)
                else:
                    torch.baddbmm(xp[t], A_batch, Y[t], out=Z[t])
                    modrelu_pairs(Z[t].view(batch, 2, -1), buf["bias"], out=H[t + 1].view(batch, 2, -1))

        def outputs() -> Buffers:
            return {"H": xp.new_empty((T + 1, batch, planes * a, b)), "Y": torch.empty_like(xp)} | (
                {"Z": torch.empty_like(xp)} if modrelu else {})

        inputs = {"xp": xp, "A": _left_real_form(A).contiguous(), "C": _RightProduct.prepared(B.mT),
                  "h0": h0.reshape(batch, planes * a, b)} | ({"bias": bias} if modrelu else {})
        done = run_body(("kronecker scan forward", activation, leak) if graphs else None, outputs, steps,
                        inputs)
        ctx.activation, ctx.leak, ctx.graphs = activation, leak, graphs
        ctx.save_for_backward(A, B, done["H"], done["Y"], *((done["Z"], bias) if modrelu else ()))
        return done["H"][1:].view(T, batch, -1)

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):
        A, B, H, Y, *modrelu_saved = ctx.saved_tensors
        T, batch, rows, b = Y.shape
        planes = 2 if A.is_complex() else 1
        a = rows // planes
        activation, leak = ctx.activation, ctx.leak
        want_A, want_B, want_h0 = ctx.needs_input_grad[1:4]

        def steps(buf: Buffers) -> None:
            g, H, Y, GZ = buf["g"], buf["H"], buf["Y"], buf["GZ"]  # GZ: dL/dz_t, z_t = W h_(t-1) + xp_t
            D = (None if activation in ("identity", MODRELU)
                 else derivative_from_output(H[1:], activation, leak))
            pairs = None if "Z" not in buf else buf["Z"].view(T, batch, 2, -1)
            gradient = None if pairs is None else pairs_gradient(pairs, buf["bias"])
            AH_batch = buf["AH"].expand(batch, rows, rows)  # the real form of A^H
            times_B_conj = _RightProduct(buf["C"], planes == 2, batch, a, b)
            # per example n, summed after the loop (no transposing copy a step): M_A[n] = sum_t G_n Y_n^T,
            # M_B[0, n] = sum_t K_n^T X_n (Re: Kr^T Xr + Ki^T Xi), M_B[1, n] = sum_t Ki^T Xr - Kr^T Xi (Im)
            M_A, M_B = buf.get("M_A"), buf.get("M_B")
            for M in (M_A, M_B):
                if M is not None:
                    M.zero_()
            K = torch.empty_like(GZ[0])  # A^H GZ_t
            GZ[T - 1].copy_(g[T - 1])
            for t in range(T - 1, -1, -1):
                if D is not None:
                    GZ[t].mul_(D[t])
                elif gradient is not None:  # through modReLU's 2 x 2 Jacobian of each unit
                    G = GZ[t].view(batch, 2, -1)
                    pairs_step(gradient, t, pairs[t], G, out=G)
                torch.bmm(AH_batch, GZ[t], out=K)
                if M_A is not None:
                    M_A.baddbmm_(GZ[t], Y[t].mT)
                if M_B is not None:
                    M_B[0].baddbmm_(K.mT, H[t])
                    if planes == 2:
                        M_B[1].baddbmm_(K[:, a:].mT, H[t][:, :a]).baddbmm_(K[:, :a].mT, H[t][:, a:], alpha=-1)
                if t > 0:  # GZ_(t-1) before its mask: g_(t-1) + W^H GZ_t, W^H X = A^H X conj(B)
                    times_B_conj(K, GZ[t - 1], add=g[t - 1])
                elif "grad_h0" in buf:
                    times_B_conj(K, buf["grad_h0"])
            if gradient is not None:
                buf["grad_bias"].copy_(gradient.bias_gradient())

        def outputs() -> Buffers:
            return ({"GZ": torch.empty_like(Y)}
                    | ({"M_A": Y.new_empty(batch, rows, rows)} if want_A else {})
                    | ({"M_B": Y.new_empty(planes, batch, b, b)} if want_B else {})
                    | ({"grad_h0": torch.empty_like(Y[0])} if want_h0 else {})
                    | ({"grad_bias": torch.empty_like(modrelu_saved[1])} if modrelu_saved else {}))

        inputs = {"g": g.contiguous().view(T, batch, rows, b),  # batch-first readers hand in strided ones
                  "H": H, "Y": Y, "AH": _left_real_form(A).mT.contiguous(),
                  "C": _RightProduct.prepared(B.conj().resolve_conj())} | (
            {"Z": modrelu_saved[0], "bias": modrelu_saved[1]} if modrelu_saved else {})
        key = ("kronecker scan backward", activation, leak, want_A, want_B, want_h0) if ctx.graphs else None
        done = run_body(key, outputs, steps, inputs)
        # Z_n = A X_n B^T: dL/dA = sum_n G_n (X_n B^T)^H, dL/dB = sum_n (A^H G_n)^T conj(X_n)
        M_A = done["M_A"].sum(0) if want_A else None
        M_B = done["M_B"].sum(1) if want_B else None
        grad_A = None if M_A is None else _complex_from_planes(M_A, a) if planes == 2 else M_A
        grad_B = None if M_B is None else torch.complex(M_B[0], M_B[1]) if planes == 2 else M_B[0]
        grad_h0 = done["grad_h0"].view(batch, -1) if want_h0 else None
        return done["GZ"].view(T, batch, -1), grad_A, grad_B, grad_h0, None, None, done.get("grad_bias"), None


def kronecker_scan(xp: Tensor, factors: Sequence[Tensor], h0: Tensor, activation: str, leak: float,
                   bias: Tensor | None = None, graphs: bool = False) -> Tensor:
    """Hidden states ``(T, B, N')`` of ``h_t = phi(W h_(t-1) + xp_t)``, ``W = W_0 (x) ... (x) W_(F-1)``.

    ``xp (T, B, N')`` and ``h0 (B, N')`` are real; for complex factors ``N' = 2N`` holds the real form
    ``(Re h; Im h)``, as :class:`~spectral_analysis.nn.peer_transitions.KroneckerTransition` presents it.
    ``activation="modrelu"`` (complex factors only) takes modReLU's bias ``bias (N,)``; ``graphs`` replays
    both time loops as CUDA graphs."""
    if activation not in (*KRONECKER_SCAN_ACTIVATIONS, MODRELU):
        raise ValueError(f"the Kronecker scan supports the activations {KRONECKER_SCAN_ACTIVATIONS} and "
                         f"modrelu, not {activation!r}; use recurrence='scan'")
    if (activation == MODRELU) != (bias is not None) or (bias is not None and not factors[0].is_complex()):
        raise ValueError("modReLU takes complex factors and its bias, and no other activation takes a bias")
    A, B = kronecker_blocks(factors)
    return _KroneckerScan.apply(xp, A, B, h0, activation, leak, bias, graphs)
