"""Plain-PyTorch reference baselines, written as a practitioner writes them with nothing of this toolkit:
``nn.RNN`` / ``nn.LSTM`` / ``nn.GRU`` (cuDNN's on a GPU) or, for an activation ``nn.RNN`` lacks (the
papers' leaky ReLU), the same recurrence as a loop over ``nn.Linear``; the oRNN (Mhammedi et al. 2017) as
that loop with its recurrent matrix a product of Householder reflections, written from the paper's
equation; the uRNN (Arjovsky et al. 2016) on complex states with its W formed from its factors and
torch.fft; KRU (Jose et al.) with W formed by ``torch.kron`` of its factors, its complex form the uRNN's
modReLU loop; DizzyRNN with W a product of dense packed rotations; an ``nn.Linear`` read-out; PyTorch's
own initialization, except IRNN's identity recurrence and zero biases (Le, Jaitly & Hinton 2015), the
oRNN and the uRNN, which PyTorch does not have, started as their authors' released code starts them, and
KRU's and DizzyRNN's recurrences as their papers start them. The deep feed-forward baselines (MLP, ResNet
of two-layer blocks) are ``nn.Linear`` stacks started as the field starts a deep rectifier net: He et
al. (2015)'s normal initialization for the leaky ReLU's slope, zero biases (torchvision's ResNet starts
its layers with ``kaiming_normal_``). This module imports torch only, so a defect
of the toolkit's models cannot hide in both sides of a calibration
(:mod:`~spectral_analysis.experiments.calibration`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# the models with a plain-PyTorch twin: the recurrent ones (ReferenceRecurrent) and the feed-forward ones
FEED_FORWARD_MODELS = ("mlp", "resnet")
REFERENCE_MODELS = ("rnn", "irnn", "lstm", "gru", "ornn", "urnn", "kru", "dizzy", *FEED_FORWARD_MODELS)
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


def _factor_sizes(n: int) -> list[int]:
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


class ReferenceFeedForward(nn.Module):
    """The MLP or ResNet of the depth experiment as a practitioner writes it: an input ``nn.Linear``,
    ``num_layers`` hidden ones (a ResNet's in blocks of two, ``h <- phi(h + W_2 phi(W_1 h + b_1) + b_2)``)
    and an ``nn.Linear`` read-out, every weight ``kaiming_normal_`` for ``phi`` (He et al. 2015: the
    variance that keeps a rectifier layer's output scale; the read-out's too, as the hidden ones'), every
    bias zero."""

    def __init__(self, model: str, input_size: int, hidden_size: int, output_size: int, num_layers: int,
                 activation: str = "leaky_relu", leak: float = 0.2) -> None:
        super().__init__()
        if model not in FEED_FORWARD_MODELS:
            raise ValueError(f"no plain-PyTorch feed-forward reference of {model!r}; there is one of "
                             f"{FEED_FORWARD_MODELS}")
        if model == "resnet" and num_layers % 2:
            raise ValueError(f"a ResNet's hidden layers come in blocks of two, not {num_layers}")
        self.residual, self.activation, self.leak = model == "resnet", activation, leak
        sizes = [(input_size, hidden_size)] + [(hidden_size, hidden_size)] * num_layers
        self.layers = nn.ModuleList(nn.Linear(i, o) for i, o in sizes)
        self.output = nn.Linear(hidden_size, output_size)
        gain = {"leaky_relu": ("leaky_relu", leak), "relu": ("relu", 0.0),
                "tanh": ("tanh", 0.0)}.get(activation, ("linear", 0.0))  # as the toolkit's initial_gain
        for layer in [*self.layers, self.output]:
            nn.init.kaiming_normal_(layer.weight, a=gain[1], nonlinearity=gain[0])
            nn.init.zeros_(layer.bias)

    def _phi(self, z: Tensor) -> Tensor:
        return F.leaky_relu(z, self.leak) if self.activation == "leaky_relu" else PHI[self.activation](z)

    def forward(self, x: Tensor) -> Tensor:
        h = self._phi(self.layers[0](x))
        hidden = list(self.layers[1:])
        if self.residual:
            for first, second in zip(hidden[::2], hidden[1::2], strict=True):
                h = self._phi(h + second(self._phi(first(h))))
        else:
            for layer in hidden:
                h = self._phi(layer(h))
        return self.output(h)

    def run(self, x: Tensor, state=None) -> tuple[Tensor, None]:
        """The class scores, and no state (the calibration's interface of :class:`ReferenceRecurrent`)."""
        return self(x), None

    def project_(self) -> None:
        """Nothing: no weight of the recipe is projected after a step."""


class ReferenceRecurrent(nn.Module):
    """A baseline of :data:`REFERENCE_MODELS` with a linear read-out at every step. Symbol ids become
    one-hot vectors, or with ``embed`` (a word vocabulary) pass an ``nn.Embedding`` of the hidden size, as
    PyTorch's word_language_model example does. ``activation``: ``tanh`` or ``relu`` run ``nn.RNN``, others
    a :class:`LoopRNN` (one layer). ``num_layers`` stack; ``dropout`` acts where Zaremba et al. (2014) put
    it: on the (embedded) input, between layers (the cuDNN modules' own ``dropout``) and before the read-out.
    ``reflectors``, ``unit_reflectors``: the oRNN's m (None: n) and its projection
    (:class:`HouseholderLoopRNN`). ``factor_sizes``, ``complex_factors``: KRU's factors (None: n's prime
    factors); complex factors run KRU's modReLU net (:class:`KroneckerModReLURNN`), ``hidden_size`` complex
    units read in real form, as the uRNN's. ``rotations``: DizzyRNN's packed rotations (None: all n - 1).
    """

    def __init__(self, model: str, input_size: int, hidden_size: int, output_size: int,
                 activation: str = "tanh", leak: float = 0.2, num_layers: int = 1, dropout: float = 0.0,
                 embed: bool = False, reflectors: int | None = None, unit_reflectors: bool = False,
                 factor_sizes: list[int] | None = None, complex_factors: bool = False,
                 rotations: int | None = None) -> None:
        super().__init__()
        if model not in REFERENCE_MODELS or model in FEED_FORWARD_MODELS:
            raise ValueError(f"no plain-PyTorch recurrent reference of {model!r}; there is one of "
                             f"{[m for m in REFERENCE_MODELS if m not in FEED_FORWARD_MODELS]}")
        self.input_size = input_size
        self.embedding = nn.Embedding(input_size, hidden_size) if embed else None
        width = hidden_size if embed else input_size
        stacked = {"num_layers": num_layers, "dropout": dropout if num_layers > 1 else 0.0,
                   "batch_first": True}
        if model in ("lstm", "gru"):
            cell = nn.LSTM if model == "lstm" else nn.GRU
            self.recurrent = cell(width, hidden_size, **stacked)
        elif activation in ("tanh", "relu") and model in ("rnn", "irnn"):
            self.recurrent = nn.RNN(width, hidden_size, nonlinearity=activation, **stacked)
        elif num_layers != 1:
            raise ValueError(f"the loop reference of {model} ({activation}) has one layer, not {num_layers}")
        elif model == "urnn":
            self.recurrent = UnitaryLoopRNN(width, hidden_size)
        elif model == "dizzy":
            self.recurrent = GivensLoopRNN(width, hidden_size, rotations, activation, leak)
        elif model == "kru":
            sizes = list(factor_sizes) if factor_sizes is not None else _factor_sizes(hidden_size)
            if complex_factors and activation != "modrelu":
                raise ValueError("the reference KRU with complex factors runs modReLU units, not "
                                 f"{activation!r}")
            self.recurrent = (KroneckerModReLURNN(width, hidden_size, sizes) if complex_factors else
                              KroneckerLoopRNN(width, hidden_size, sizes, activation, leak))
        elif model == "ornn":
            self.recurrent = HouseholderLoopRNN(width, hidden_size, reflectors or hidden_size, activation,
                                                leak, unit_reflectors)
        else:
            self.recurrent = LoopRNN(width, hidden_size, activation, leak)
        self.drop = nn.Dropout(dropout)
        if model == "irnn":
            with torch.no_grad():
                for name, parameter in self.recurrent.named_parameters():
                    if name in ("weight_hh_l0", "recurrent.weight"):
                        parameter.copy_(torch.eye(hidden_size))
                    elif "bias" in name:
                        parameter.zero_()
        # the uRNN's and complex KRU's n complex units are read in real form (Re h; Im h)
        complex_units = model == "urnn" or (model == "kru" and complex_factors)
        self.output = nn.Linear(2 * hidden_size if complex_units else hidden_size, output_size)

    @torch.no_grad()
    def project_(self) -> None:
        """What the recipe does to the weights after each optimizer step (the oRNN's reflectors; nothing
        for the others)."""
        if isinstance(self.recurrent, HouseholderLoopRNN):
            self.recurrent.project_()

    def spectral_penalty(self) -> Tensor:
        """The penalty the recipe weights by its ``penalty``: KRU's soft unitary constraint (Eq. 7)."""
        kronecker = getattr(self.recurrent, "kronecker", None)
        if kronecker is None:
            raise ValueError(f"the reference {type(self.recurrent).__name__} has no spectral penalty")
        return kronecker.penalty()

    def run(self, x: Tensor, state=None) -> tuple[Tensor, object]:
        """Outputs at every step and the final state, from ``state`` (zeros when None)."""
        if not x.is_floating_point():
            x = self.embedding(x) if self.embedding is not None else F.one_hot(x, self.input_size).float()
        states, final = self.recurrent(self.drop(x), state)
        return self.output(self.drop(states)), final

    def forward(self, x: Tensor) -> Tensor:
        return self.run(x)[0]
