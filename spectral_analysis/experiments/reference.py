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

    def forward(self, x: Tensor) -> tuple[Tensor, None]:
        h = x.new_zeros(x.shape[0], self.hidden_size)
        drive, states = self.input_layer(x), []
        for t in range(x.shape[1]):
            pre = self.recurrent(h) + drive[:, t]
            h = F.leaky_relu(pre, self.leak) if self.activation == "leaky_relu" else PHI[self.activation](pre)
            states.append(h)
        return torch.stack(states, dim=1), None


class ReferenceRecurrent(nn.Module):
    """A baseline of :data:`REFERENCE_MODELS` with a linear read-out at every step; symbol ids become
    one-hot vectors. ``activation``: ``tanh`` or ``relu`` run ``nn.RNN``, others a :class:`LoopRNN`."""

    def __init__(self, model: str, input_size: int, hidden_size: int, output_size: int,
                 activation: str = "tanh", leak: float = 0.2) -> None:
        super().__init__()
        if model not in REFERENCE_MODELS:
            raise ValueError(f"no plain-PyTorch reference of {model!r}; there is one of {REFERENCE_MODELS}")
        self.input_size = input_size
        if model in ("lstm", "gru"):
            cell = nn.LSTM if model == "lstm" else nn.GRU
            self.recurrent = cell(input_size, hidden_size, batch_first=True)
        elif activation in ("tanh", "relu"):
            self.recurrent = nn.RNN(input_size, hidden_size, nonlinearity=activation, batch_first=True)
        else:
            self.recurrent = LoopRNN(input_size, hidden_size, activation, leak)
        if model == "irnn":
            with torch.no_grad():
                for name, parameter in self.recurrent.named_parameters():
                    if name in ("weight_hh_l0", "recurrent.weight"):
                        parameter.copy_(torch.eye(hidden_size))
                    elif "bias" in name:
                        parameter.zero_()
        self.output = nn.Linear(hidden_size, output_size)

    def forward(self, x: Tensor) -> Tensor:
        if not x.is_floating_point():
            x = F.one_hot(x, self.input_size).float()
        states, _ = self.recurrent(x)
        return self.output(states)
