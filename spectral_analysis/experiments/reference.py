"""Plain-PyTorch reference baselines, written as a practitioner writes them with nothing of this toolkit:
``nn.RNN`` / ``nn.LSTM`` / ``nn.GRU`` (cuDNN's on a GPU) or, for an activation ``nn.RNN`` lacks (the
papers' leaky ReLU), the same recurrence as a loop over ``nn.Linear``; an ``nn.Linear`` read-out; PyTorch's
own initialization, except IRNN's identity recurrence and zero biases (Le, Jaitly & Hinton 2015). This
module imports torch only, so a defect of the toolkit's models cannot hide in both sides of a
calibration (:mod:`~spectral_analysis.experiments.calibration`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

REFERENCE_MODELS = ("rnn", "irnn", "lstm", "gru")  # the baselines that have a plain-PyTorch twin
PHI = {"relu": torch.relu, "tanh": torch.tanh, "abs": torch.abs, "identity": lambda z: z}


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
        states = []
        for drive in self.input_layer(x).unbind(1):  # one backward stack, not a (B, T, n) zero-fill a step
            pre = self.recurrent(h) + drive
            h = F.leaky_relu(pre, self.leak) if self.activation == "leaky_relu" else PHI[self.activation](pre)
            states.append(h)
        return torch.stack(states, dim=1), h[None]


class ReferenceRecurrent(nn.Module):
    """A baseline of :data:`REFERENCE_MODELS` with a linear read-out at every step. Symbol ids become
    one-hot vectors, or with ``embed`` (a word vocabulary) pass an ``nn.Embedding`` of the hidden size, as
    PyTorch's word_language_model example does. ``activation``: ``tanh`` or ``relu`` run ``nn.RNN``, others
    a :class:`LoopRNN` (one layer). ``num_layers`` stack; ``dropout`` acts where Zaremba et al. (2014) put
    it: on the (embedded) input, between layers (the cuDNN modules' own ``dropout``) and before the read-out.
    """

    def __init__(self, model: str, input_size: int, hidden_size: int, output_size: int,
                 activation: str = "tanh", leak: float = 0.2, num_layers: int = 1, dropout: float = 0.0,
                 embed: bool = False) -> None:
        super().__init__()
        if model not in REFERENCE_MODELS:
            raise ValueError(f"no plain-PyTorch reference of {model!r}; there is one of {REFERENCE_MODELS}")
        self.input_size = input_size
        self.embedding = nn.Embedding(input_size, hidden_size) if embed else None
        width = hidden_size if embed else input_size
        stacked = {"num_layers": num_layers, "dropout": dropout if num_layers > 1 else 0.0,
                   "batch_first": True}
        if model in ("lstm", "gru"):
            cell = nn.LSTM if model == "lstm" else nn.GRU
            self.recurrent = cell(width, hidden_size, **stacked)
        elif activation in ("tanh", "relu"):
            self.recurrent = nn.RNN(width, hidden_size, nonlinearity=activation, **stacked)
        elif num_layers == 1:
            self.recurrent = LoopRNN(width, hidden_size, activation, leak)
        else:
            raise ValueError(f"the loop reference ({activation}) has one layer, not {num_layers}")
        self.drop = nn.Dropout(dropout)
        if model == "irnn":
            with torch.no_grad():
                for name, parameter in self.recurrent.named_parameters():
                    if name in ("weight_hh_l0", "recurrent.weight"):
                        parameter.copy_(torch.eye(hidden_size))
                    elif "bias" in name:
                        parameter.zero_()
        self.output = nn.Linear(hidden_size, output_size)

    def run(self, x: Tensor, state=None) -> tuple[Tensor, object]:
        """Outputs at every step and the final state, from ``state`` (zeros when None)."""
        if not x.is_floating_point():
            x = self.embedding(x) if self.embedding is not None else F.one_hot(x, self.input_size).float()
        states, final = self.recurrent(self.drop(x), state)
        return self.output(self.drop(states)), final

    def forward(self, x: Tensor) -> Tensor:
        return self.run(x)[0]
