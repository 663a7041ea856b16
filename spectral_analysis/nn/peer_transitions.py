"""The peers' transitions, behind the same :class:`~spectral_analysis.nn.transitions.Transition` interface.

- :class:`KroneckerTransition` (KRU, Jose et al., Eq. 4): ``W = W_0 (x) ... (x) W_(F-1)`` with real or
  complex square factors. A complex W on complex states is presented in its **real form**: the state
  is ``(Re h; Im h)`` of length 2N and W is ``[[Re W, -Im W], [Im W, Re W]]``. KRU's paper gives its
  complex units the "complex rectified linear units (Arjovsky et al., 2016)" of the uRNNs, modReLU:
  ``activation="modrelu"`` builds that net (:mod:`~spectral_analysis.nn.modrelu_rnn`). The other
  activations act on the real and imaginary parts (ReLU there is "CReLU"), the ordinary activation of
  that real vector, so every analyzer sees a real network of size 2N. The soft unitary constraint (Eq. 7) is
  ``spectral_penalty() = sum_f ||W_f^H W_f - I||_F^2``, weighted by the trainer's ``--penalty``.
- :class:`GivensTransition` (DizzyRNN, Section 4): ``W = P_1 ... P_K``, packed Givens rotations.
- :class:`GivensSVDTransition` (DizzyRNN, Section 5): ``W = U diag(sigma) V^T`` with U, V packed
  Givens products; ``spectral_penalty() = ||sigma - 1||^2 / 2`` (the paper's lambda/2 term, lambda
  being the trainer's ``--penalty``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from spectral_analysis.linalg import (
    complex_vector,
    givens_apply,
    givens_apply_transpose,
    givens_matrix,
    kron_matrix,
    kron_matvec,
    packed_pairs,
    real_matrix,
    real_vector,
)
from spectral_analysis.nn.kronecker_scan import KRONECKER_SCAN_ACTIVATIONS, kronecker_scan
from spectral_analysis.nn.modrelu import dense_modrelu_scan
from spectral_analysis.nn.transitions import Transition, _check_size
from spectral_analysis.vocabulary import MODRELU

# the real-form size from which the two-block Kronecker scan beats the dense one on the CPU, one thread
# (benchmarks/kru_recurrence_cpu.json: 0.27x at 128 and 0.58x at 256 on KRU's copy sizes, 4.1-4.5x at
# 1024 on its adding sizes)
KRONECKER_SCAN_MIN_SIZE = 512


def default_factor_sizes(n: int) -> list[int]:
    """The smallest factors: n's prime factorization, ascending. For a power of two that is the paper's
    ``[2, 2, ..., 2]``; for a prime n, one dense n x n factor."""
    sizes, p = [], 2
    while n > 1:
        while n % p == 0:
            sizes.append(p)
            n //= p
        p += 1
    return sizes or [1]


class KroneckerTransition(Transition):
    """KRU's Kronecker-factored W (see the module docstring). ``n``: the (complex) hidden units N;
    ``self.size`` is N for real factors and 2N (the real form) for complex ones. Factors start as
    random orthogonal (real) or unitary (complex) matrices, as KRU initializes them.

    The ``scan`` time loop (``auto`` on the CPU) applies W as two Kronecker blocks ``A (x) B``
    (:mod:`~spectral_analysis.nn.kronecker_scan`) from a real-form size of
    :data:`KRONECKER_SCAN_MIN_SIZE`, and forms W for the dense scan below it, where one GEMM per step
    beats two (``benchmarks/kru_recurrence_cpu.json``); ``recurrence="reflector"`` keeps the
    factor-by-factor route of Algorithm 1."""

    def __init__(
        self, n: int, factor_sizes: Sequence[int] | None = None, complex_factors: bool = False
    ) -> None:
        super().__init__()
        n = _check_size(n)
        sizes = list(factor_sizes) if factor_sizes is not None else default_factor_sizes(n)
        if any(isinstance(p, bool) or not isinstance(p, int) or p < 1 for p in sizes):
            raise ValueError(f"factor_sizes must be positive integers, got {sizes}")
        if math.prod(sizes) != n:
            raise ValueError(f"factor_sizes {sizes} multiply to {math.prod(sizes)}, not the hidden size {n}")
        self.units, self.factor_sizes, self.complex_factors = n, sizes, complex_factors
        self.size = 2 * n if complex_factors else n
        parts = []
        for p in sizes:
            if complex_factors:
                Q, R = torch.linalg.qr(torch.randn(p, p, dtype=torch.complex64))
                Q = Q * (torch.diagonal(R) / torch.diagonal(R).abs()).unsqueeze(0)
                parts += [Q.real.contiguous(), Q.imag.contiguous()]
            else:
                Q, R = torch.linalg.qr(torch.randn(p, p))
                parts.append(Q * torch.sign(torch.diagonal(R)))
        self.factor_parameters = nn.ParameterList([nn.Parameter(t) for t in parts])

    def factors(self) -> list[Tensor]:
        """The factors ``W_f`` (complex tensors for complex factors)."""
        if not self.complex_factors:
            return list(self.factor_parameters)
        params = list(self.factor_parameters)
        return [torch.complex(params[2 * f], params[2 * f + 1]) for f in range(len(self.factor_sizes))]

    def complex_matrix(self) -> Tensor:
        """The dense W itself (complex for complex factors); formed only on request."""
        return kron_matrix(self.factors())

    def matrix(self) -> Tensor:
        W = self.complex_matrix()
        if not self.complex_factors:
            return W
        return real_matrix(W)

    def _two_blocks(self) -> bool:
        """Whether the scan keeps W as two Kronecker blocks (from :data:`KRONECKER_SCAN_MIN_SIZE`)."""
        return len(self.factor_sizes) >= 2 and self.size >= KRONECKER_SCAN_MIN_SIZE

    def scan(self, xp: Tensor, h0: Tensor, activation: str, leak: float, graphs: bool = False) -> Tensor:
        if self._two_blocks() and activation in KRONECKER_SCAN_ACTIVATIONS:
            return kronecker_scan(xp, self.factors(), h0, activation, leak, graphs=graphs)
        return super().scan(xp, h0, activation, leak, graphs)

    def modrelu_scan(self, xp: Tensor, h0: Tensor, b: Tensor, graphs: bool = False) -> Tensor:
        """Real-form states ``(T, B, 2N)`` of ``h_t = modReLU(W h_(t-1) + xp_t, b)`` (complex factors, in
        :class:`~spectral_analysis.nn.modrelu_rnn.ModReLURNN`): two Kronecker blocks, or W formed for the
        dense scan below :data:`KRONECKER_SCAN_MIN_SIZE`, as :meth:`scan` chooses."""
        if self._two_blocks():
            return kronecker_scan(xp, self.factors(), h0, MODRELU, 0.0, bias=b, graphs=graphs)
        return dense_modrelu_scan(xp, self.matrix(), h0, b, graphs)

    def complex_apply(self, z: Tensor) -> Tensor:
        """``W z`` for complex ``z (..., N)`` one factor at a time (KRU's Algorithm 1); complex factors."""
        return kron_matvec(self.factors(), z)

    def apply_reference(self, h: Tensor) -> Tensor:
        """``W h`` one factor at a time (KRU's Algorithm 1), without forming W."""
        if not self.complex_factors:
            return kron_matvec(self.factors(), h)
        return real_vector(self.complex_apply(complex_vector(h)))

    def singular_values(self) -> Tensor:
        """All products of one singular value per factor (twice each in the real form), descending."""
        spectra = [torch.linalg.svdvals(W.detach()) for W in self.factors()]  # real, even for complex W
        values = spectra[0]
        for s in spectra[1:]:
            values = (values.unsqueeze(1) * s.unsqueeze(0)).reshape(-1)
        if self.complex_factors:
            values = values.repeat_interleave(2)
        return values.sort(descending=True).values

    def parameter_count(self) -> int:
        """``sum_f p_f^2``, doubled for complex factors (KRU: 8 log2 N for 2 x 2 complex factors)."""
        return sum(p * p for p in self.factor_sizes) * (2 if self.complex_factors else 1)

    def structured_form(self) -> dict[str, Tensor]:
        return {f"factor_{f}": W for f, W in enumerate(self.factors())}

    def spectral_penalty(self) -> Tensor:
        """KRU Eq. 7 on each factor: ``sum_f ||W_f^H W_f - I||_F^2``."""
        total = self.factor_parameters[0].new_zeros(())
        for W in self.factors():
            eye = torch.eye(W.shape[0], dtype=W.dtype, device=W.device)
            total = total + (W.mH @ W - eye).abs().square().sum()
        return total


class GivensTransition(Transition):
    """DizzyRNN: ``W = P_1 ... P_K`` (the first K packed rotations of the round-robin schedule; all of
    them, n - 1 for even n, by default), angles uniform in [-pi, pi)."""

    def __init__(self, n: int, rotations: int | None = None) -> None:
        super().__init__()
        self.size = _check_size(n)
        self.schedule = packed_pairs(n)
        K = len(self.schedule) if rotations is None else rotations
        if isinstance(K, bool) or not isinstance(K, int) or not 1 <= K <= len(self.schedule):
            raise ValueError(
                f"rotations={rotations!r} must be an integer in [1, {len(self.schedule)}] for n = {n}"
            )
        self.rotations = K
        self.angles = nn.ParameterList(
            [nn.Parameter((torch.rand(len(a)) * 2 - 1) * math.pi) for a, _ in self.schedule[:K]]
        )

    def matrix(self) -> Tensor:
        return givens_matrix(list(self.angles), self.schedule, self.size)

    def apply_reference(self, h: Tensor) -> Tensor:
        return givens_apply(list(self.angles), self.schedule, h)

    def singular_values(self) -> Tensor:
        return torch.ones(self.size, dtype=self.angles[0].dtype, device=self.angles[0].device)

    def singular_value_bound(self) -> float:
        return 1.0

    def parameter_count(self) -> int:
        return sum(a.numel() for a in self.angles)

    def structured_form(self) -> dict[str, Tensor]:
        return {f"angles_{k}": a for k, a in enumerate(self.angles)}


class GivensSVDTransition(Transition):
    """DizzyRNN Section 5: ``W = U diag(sigma) V^T``, U and V packed Givens products, sigma free
    (initialized at 1) and penalized by ``||sigma - 1||^2 / 2``."""

    def __init__(self, n: int, rotations: int | None = None) -> None:
        super().__init__()
        self.size = _check_size(n)
        self.U, self.V = GivensTransition(n, rotations), GivensTransition(n, rotations)
        self.sigma = nn.Parameter(torch.ones(n))

    def matrix(self) -> Tensor:
        return self.U.matrix() * self.sigma.unsqueeze(0) @ self.V.matrix().mT

    def apply_reference(self, h: Tensor) -> Tensor:
        """``U (sigma o (V^T h))`` by rotations (Section 5.2's elementwise product in the middle)."""
        inner = givens_apply_transpose(list(self.V.angles), self.V.schedule, h) * self.sigma
        return givens_apply(list(self.U.angles), self.U.schedule, inner)

    def singular_values(self) -> Tensor:
        return self.sigma.detach().abs().sort(descending=True).values

    def parameter_count(self) -> int:
        return self.U.parameter_count() + self.V.parameter_count() + self.size

    def structured_form(self) -> dict[str, Tensor]:
        return {
            **{f"U_{k}": v for k, v in self.U.structured_form().items()},
            **{f"V_{k}": v for k, v in self.V.structured_form().items()},
            "sigma": self.sigma,
        }

    def spectral_penalty(self) -> Tensor:
        """DizzyRNN Section 5.3 without lambda: ``||sigma - 1||^2 / 2``."""
        return 0.5 * (self.sigma - 1.0).square().sum()
