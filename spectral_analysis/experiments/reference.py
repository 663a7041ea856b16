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
its layers with ``kaiming_normal_``). This module and its loops
(:mod:`~spectral_analysis.experiments.reference_loops`) import torch only, so a defect of the toolkit's
models cannot hide in both sides of a calibration
(:mod:`~spectral_analysis.experiments.calibration`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from spectral_analysis.experiments.reference_loops import (
    PHI,
    GivensLoopRNN,
    HouseholderLoopRNN,
    KroneckerLoopRNN,
    KroneckerModReLURNN,
    LoopRNN,
    UnitaryLoopRNN,
    kronecker_factor_sizes,
)

# the models with a plain-PyTorch twin: the recurrent ones (ReferenceRecurrent) and the feed-forward ones
FEED_FORWARD_MODELS = ("mlp", "resnet")
REFERENCE_MODELS = ("rnn", "irnn", "lstm", "gru", "ornn", "urnn", "kru", "dizzy", *FEED_FORWARD_MODELS)


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
    one-hot vectors, or with ``embedding`` (a word vocabulary) pass an ``nn.Embedding`` of that width, as
    PyTorch's word_language_model example does (of the hidden size). ``activation``: ``tanh`` or ``relu``
    run ``nn.RNN``, others a :class:`LoopRNN` (one layer). ``num_layers`` stack; ``dropout`` acts where
    Zaremba et al. (2014) put it: on the (embedded) input, between layers (the cuDNN modules' own
    ``dropout``) and before the read-out.
    ``reflectors``, ``unit_reflectors``: the oRNN's m (None: n) and its projection
    (:class:`HouseholderLoopRNN`). ``factor_sizes``, ``complex_factors``: KRU's factors (None: n's prime
    factors); complex factors run KRU's modReLU net (:class:`KroneckerModReLURNN`), ``hidden_size`` complex
    units read in real form, as the uRNN's. ``rotations``: DizzyRNN's packed rotations (None: all n - 1).
    """

    def __init__(self, model: str, input_size: int, hidden_size: int, output_size: int,
                 activation: str = "tanh", leak: float = 0.2, num_layers: int = 1, dropout: float = 0.0,
                 embedding: int | None = None, reflectors: int | None = None, unit_reflectors: bool = False,
                 factor_sizes: list[int] | None = None, complex_factors: bool = False,
                 rotations: int | None = None) -> None:
        super().__init__()
        if model not in REFERENCE_MODELS or model in FEED_FORWARD_MODELS:
            raise ValueError(f"no plain-PyTorch recurrent reference of {model!r}; there is one of "
                             f"{[m for m in REFERENCE_MODELS if m not in FEED_FORWARD_MODELS]}")
        self.input_size = input_size
        self.embedding = None if embedding is None else nn.Embedding(input_size, embedding)
        width = input_size if embedding is None else embedding
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
            sizes = list(factor_sizes) if factor_sizes is not None else kronecker_factor_sizes(hidden_size)
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
