"""The recurrences ``nn.RNN`` lacks, written as loops over plain PyTorch for the calibration's reference
baselines (:mod:`~spectral_analysis.experiments.reference`): the loop RNN for the papers' leaky ReLU, the
oRNN's Householder recurrence (Mhammedi et al. 2017), the uRNN (Arjovsky et al. 2016) and KRU's complex
modReLU net, KRU's Kronecker factors (Jose et al.) and DizzyRNN's packed Givens rotations, each started as
its authors' paper or released code starts it. Like the reference module, it imports torch only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

PHI = {"relu": torch.relu, "tanh": torch.tanh, "abs": torch.abs, "identity": lambda z: z}


def _scan(drives: Tensor, h: Tensor, transition: Callable[[Tensor], Tensor], activation: str,
          leak: float) -> tuple[Tensor, Tensor]:
    """``h_t = phi(transition(h_{t-1}) + drives[:, t])`` over time: the states ``(B, T, n)`` and the last."""
    states = []
    for drive in drives.unbind(1):  # one backward stack, not a (B, T, n) zero-fill a step
        pre = transition(h) + drive
        h = F.leaky_relu(pre, leak) if activation == "leaky_relu" else PHI[activation](pre)
        states.append(h)
    return torch.stack(states, dim=1), h[None]


class LoopRNN(nn.Module):
    """``h_t = phi(W h_{t-1} + U x_t + b)`` over time with ``nn.Linear`` layers (for an activation cuDNN
    lacks)."""

    def __init__(self, input_size: int, hidden_size: int, activation: str, leak: float) -> None:
        super().__init__()
        self.input_layer = nn.Linear(input_size, hidden_size)
        self.recurrent = nn.Linear(hidden_size, hidden_size)
        self.hidden_size, self.activation, self.leak = hidden_size, activation, leak

    def forward(self, x: Tensor, h: Tensor | None = None) -> tuple[Tensor, Tensor]:
        h = x.new_zeros(x.shape[0], self.hidden_size) if h is None else h[0]
        return _scan(self.input_layer(x), h, self.recurrent, self.activation, self.leak)


class MatrixLoopRNN(nn.Module, ABC):
    """``h_t = phi(W h_{t-1} + U x_t + b)`` over time for a structured W formed once a forward pass by
    :meth:`weight` (the oRNN's, KRU's, DizzyRNN's twins), ``U x + b`` an ``nn.Linear``."""

    def __init__(self, input_size: int, hidden_size: int, activation: str, leak: float) -> None:
        super().__init__()
        self.input_layer = nn.Linear(input_size, hidden_size)
        self.hidden_size, self.activation, self.leak = hidden_size, activation, leak

    @abstractmethod
    def weight(self) -> Tensor:
        """The ``n x n`` W."""

    def forward(self, x: Tensor, h: Tensor | None = None) -> tuple[Tensor, Tensor]:
        h = x.new_zeros(x.shape[0], self.hidden_size) if h is None else h[0]
        weight = self.weight()
        return _scan(self.input_layer(x), h, lambda state: state @ weight.T, self.activation, self.leak)


class HouseholderLoopRNN(MatrixLoopRNN):
    """The oRNN of Mhammedi et al. (2017, Eq. 2-3 of their paper): ``h_t = phi(W h_{t-1} + U x_t + b)``
    with ``W = H(v_1) H(v_2) ... H(v_m)``, ``H(v) = I - 2 v v^T / ||v||^2``, ``v_j`` column j of a
    lower-trapezoidal ``(n, m)`` matrix (zero above row j). Started as their released RNN_models.py starts
    it (PyTorch has no oRNN of its own): the vectors N(0, 0.01) scaled to unit length, U Glorot-uniform,
    b zero; with ``unit_reflectors``, :meth:`project_` scales the vectors back after each optimizer step,
    as their sgd.py does."""

    def __init__(self, input_size: int, hidden_size: int, m: int, activation: str, leak: float,
                 unit_reflectors: bool) -> None:
        super().__init__(input_size, hidden_size, activation, leak)
        self.vectors = nn.Parameter(torch.tril(0.01 * torch.randn(hidden_size, m)))
        with torch.no_grad():
            self.vectors.div_(self.vectors.norm(dim=0))
        nn.init.xavier_uniform_(self.input_layer.weight)
        nn.init.zeros_(self.input_layer.bias)
        self.unit_reflectors = unit_reflectors

    def weight(self) -> Tensor:
        """W, the product of the reflections (formed once a forward pass)."""
        weight = torch.eye(self.hidden_size, dtype=self.vectors.dtype, device=self.vectors.device)
        for v in torch.tril(self.vectors).unbind(1):  # W H(v) = W - 2 (W v) v^T / ||v||^2
            weight = weight - torch.outer(weight @ v, v) * (2 / v.dot(v))
        return weight

    @torch.no_grad()
    def project_(self) -> None:
        """Cut the vectors to the lower trapezoid and, with ``unit_reflectors``, scale them to unit length."""
        self.vectors.copy_(torch.tril(self.vectors))
        if self.unit_reflectors:
            self.vectors.div_(self.vectors.norm(dim=0))


def _glorot(fan_in: int, fan_out: int, *shape: int) -> Tensor:
    """``U(-sqrt(6 / (fan_in + fan_out)), +)``: the uRNN code's ``initialize_matrix``."""
    bound = (6 / (fan_in + fan_out)) ** 0.5
    return torch.empty(*shape).uniform_(-bound, bound)


class ModReLULoop(nn.Module, ABC):
    """The modReLU net of Arjovsky et al. (2016), their Eq. 6 and 8, on complex states: ``h_t = modReLU(W
    h_{t-1} + V x_t, b)``, ``modReLU(z, b) = relu(|z| + b) z / (|z| + eps)``, eps = 1e-5, as their code
    writes it, for the complex W of :meth:`weight`. Started as the ``complex_RNN`` of their released
    models.py (amarshah/complex_RNN) starts it: V, one ``n_i x 2n`` matrix of real and imaginary parts,
    Glorot-uniform (``initialize_matrix``), b from U(-0.01, 0.01), and a learned ``h_0`` from
    U(-sqrt(3/2n), sqrt(3/2n)) (drawn by :meth:`_draw_start` after W's parameters, as that code draws it).
    The states come out in real form, ``(Re h; Im h)``, for the read-out."""

    def __init__(self, input_size: int, units: int) -> None:
        super().__init__()
        n = units
        self.input_real = nn.Parameter(_glorot(input_size, 2 * n, n, input_size))
        self.input_imag = nn.Parameter(_glorot(input_size, 2 * n, n, input_size))
        self.bias = nn.Parameter(torch.empty(n).uniform_(-0.01, 0.01))
        self.units, self.eps = n, 1e-5

    def _draw_start(self) -> None:
        bound = (3 / (2 * self.units)) ** 0.5
        self.start = nn.Parameter(torch.empty(2 * self.units).uniform_(-bound, bound))

    @abstractmethod
    def weight(self) -> Tensor:
        """The complex ``n x n`` W."""

    def _complex_dtype(self) -> torch.dtype:
        return torch.complex128 if self.bias.dtype == torch.float64 else torch.complex64

    def forward(self, x: Tensor, h: Tensor | None = None) -> tuple[Tensor, Tensor]:
        n = self.units
        start = self.start.expand(x.shape[0], -1) if h is None else h[0]
        state = torch.complex(start[:, :n], start[:, n:])
        drives = torch.complex(x @ self.input_real.T, x @ self.input_imag.T)
        weight, states = self.weight(), []
        for drive in drives.unbind(1):
            z = state @ weight.T + drive
            modulus = z.abs()
            state = torch.relu(modulus + self.bias) / (modulus + self.eps) * z
            states.append(torch.cat([state.real, state.imag], dim=-1))
        return torch.stack(states, dim=1), states[-1][None]


class UnitaryLoopRNN(ModReLULoop):
    """The uRNN (Arjovsky et al. 2016): :class:`ModReLULoop` with ``W = D3 R2 F^-1 D2 Pi R1 F D1``
    (``D_j = diag(exp(i theta_j))``, ``R_j = I - 2 v_j v_j^H / ||v_j||^2``, ``F`` the unitary DFT, ``Pi`` a
    fixed permutation), formed once a forward pass from its factors by ``torch.fft``. Started as the
    ``complex_RNN`` of their released models.py (the version that applies the FFTs) starts it: the
    reflection vectors Glorot-uniform, the phases from U(-pi, pi)."""

    def __init__(self, input_size: int, units: int) -> None:
        super().__init__(input_size, units)
        n = units
        self.reflections = nn.Parameter(_glorot(2, 2 * n, 2, 2 * n))  # v_j = [j, :n] + i [j, n:]
        self.phases = nn.Parameter(torch.empty(3, n).uniform_(-torch.pi, torch.pi))
        self._draw_start()
        self.register_buffer("permutation", torch.randperm(n))

    def _reflect(self, z: Tensor, j: int) -> Tensor:
        """``R_j`` applied to the rows of ``z``."""
        v = torch.complex(self.reflections[j, :self.units], self.reflections[j, self.units:])
        return z - 2 * (z @ v.conj()).unsqueeze(-1) * v / v.abs().square().sum()

    def weight(self) -> Tensor:
        """The complex ``n x n`` W, its columns ``W e_k`` (the factors applied right to left)."""
        z = torch.eye(self.units, dtype=self._complex_dtype(), device=self.phases.device)
        z = torch.fft.fft(torch.exp(1j * self.phases[0]) * z, norm="ortho")
        z = self._reflect(z, 0)[:, self.permutation]
        z = torch.fft.ifft(torch.exp(1j * self.phases[1]) * z, norm="ortho")
        return (torch.exp(1j * self.phases[2]) * self._reflect(z, 1)).T


def kronecker_factor_sizes(n: int) -> list[int]:
    """KRU's factor sizes for n units: n's prime factors, ascending (2 x 2 factors for a power of two), as the
    toolkit's KRU takes them by default, written anew since this module imports torch only."""
    sizes, p = [], 2
    while n > 1:
        while n % p == 0:
            sizes.append(p)
            n //= p
        p += 1
    return sizes or [1]


def _random_orthogonal(p: int, complex_factor: bool) -> Tensor:
    """A random unitary (complex) or orthogonal (real) ``p x p`` matrix: Q of a Gaussian's QR, its columns'
    phases fixed by R's diagonal so that it is Haar-distributed."""
    Q, R = torch.linalg.qr(torch.randn(p, p, dtype=torch.complex64 if complex_factor else torch.float32))
    diagonal = torch.diagonal(R)
    return Q * (diagonal / diagonal.abs()).unsqueeze(0)


class KroneckerFactors(nn.Module):
    """KRU's W = W_0 (x) ... (x) W_(F-1) (Jose et al., Eq. 4), formed with ``torch.kron``, each factor
    started random unitary ("We initialize it by random unitary matrix", their Section 4.1), complex
    factors held as real and imaginary parts; :meth:`penalty` is their soft unitary constraint (Eq. 7),
    ``sum_f ||W_f^H W_f - I||_F^2``."""

    def __init__(self, sizes: list[int], complex_factors: bool) -> None:
        super().__init__()
        factors = [_random_orthogonal(p, complex_factors) for p in sizes]
        self.real = nn.ParameterList([nn.Parameter(W.real.contiguous()) for W in factors])
        self.imag = nn.ParameterList([nn.Parameter(W.imag.contiguous()) for W in factors]
                                     if complex_factors else [])

    def factors(self) -> list[Tensor]:
        if not len(self.imag):
            return list(self.real)
        return [torch.complex(re, im) for re, im in zip(self.real, self.imag, strict=True)]

    def weight(self) -> Tensor:
        weight = self.factors()[0]
        for factor in self.factors()[1:]:
            weight = torch.kron(weight, factor)
        return weight

    def penalty(self) -> Tensor:
        return sum(((W.mH @ W - torch.eye(W.shape[0], dtype=W.dtype, device=W.device)).abs().square().sum()
                    for W in self.factors()), torch.zeros((), dtype=self.real[0].dtype))


class KroneckerModReLURNN(ModReLULoop):
    """KRU with complex factors and modReLU units (their "complex rectified linear units (Arjovsky et al.,
    2016)"): :class:`ModReLULoop` with W from :class:`KroneckerFactors`."""

    def __init__(self, input_size: int, units: int, sizes: list[int]) -> None:
        super().__init__(input_size, units)
        self.kronecker = KroneckerFactors(sizes, complex_factors=True)
        self._draw_start()

    def weight(self) -> Tensor:
        return self.kronecker.weight()


class KroneckerLoopRNN(MatrixLoopRNN):
    """KRU with real factors: :class:`MatrixLoopRNN` with W from :class:`KroneckerFactors` (an ``nn.Linear``
    input layer at PyTorch's default initialization)."""

    def __init__(self, input_size: int, hidden_size: int, sizes: list[int], activation: str,
                 leak: float) -> None:
        super().__init__(input_size, hidden_size, activation, leak)
        self.kronecker = KroneckerFactors(sizes, complex_factors=False)

    def weight(self) -> Tensor:
        return self.kronecker.weight()


def round_robin(n: int) -> list[list[tuple[int, int]]]:
    """The n - 1 rounds of a round-robin tournament among n (even) units, each a perfect matching, every
    pair met once: unit n - 1 meets unit r in round r, and ``(r + k) mod (n - 1)`` meets
    ``(r - k) mod (n - 1)`` (the polygon method). DizzyRNN's packed rotations are such rounds (their
    Section 4.2: "n/2 Givens rotations in parallel ... n - 1 sequential operations")."""
    if n < 2 or n % 2:
        raise ValueError(f"the reference DizzyRNN pairs an even number of units, not {n}")
    m = n - 1
    return [[(r, n - 1)] + [tuple(sorted(((r + k) % m, (r - k) % m))) for k in range(1, n // 2)]
            for r in range(m)]


class GivensLoopRNN(MatrixLoopRNN):
    """DizzyRNN (their Section 4.4): :class:`MatrixLoopRNN` with ``W = P_1 ... P_K``, each packed rotation
    ``P_k`` a dense matrix with ``cos theta`` at ``(a, a)`` and ``(b, b)``, ``sin theta`` at ``(a, b)`` and
    ``-sin theta`` at ``(b, a)`` for each pair ``(a, b)`` of its round, one angle a pair, angles from
    U(-pi, pi); the rounds are :func:`round_robin`'s first K (``pairs`` another schedule)."""

    def __init__(self, input_size: int, hidden_size: int, rotations: int | None, activation: str, leak: float,
                 pairs: list[list[tuple[int, int]]] | None = None) -> None:
        super().__init__(input_size, hidden_size, activation, leak)
        schedule = round_robin(hidden_size) if pairs is None else pairs
        self.pairs = schedule[:len(schedule) if rotations is None else rotations]
        angles = torch.empty(len(self.pairs), hidden_size // 2).uniform_(-torch.pi, torch.pi)
        self.angles = nn.Parameter(angles)

    def weight(self) -> Tensor:
        n, weight = self.hidden_size, None
        for theta, pairs in zip(self.angles, self.pairs, strict=True):
            a, b = (torch.tensor(side, device=theta.device) for side in zip(*pairs, strict=True))
            c, s = torch.cos(theta), torch.sin(theta)
            rotation = torch.zeros(n, n, dtype=theta.dtype, device=theta.device)
            rotation = rotation.index_put((torch.cat([a, b, a, b]), torch.cat([a, b, b, a])),
                                          torch.cat([c, c, s, -s]))
            weight = rotation if weight is None else weight @ rotation
        return weight
