"""The GRU (Cho et al. 2014) in PyTorch's form, stacked, with Eq. 5's linear read-out.

For each layer, gates in PyTorch's order (reset r, update z, new n)::

    r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
    z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
    h' = (1 - z) * n + z * h

The input and hidden biases are kept apart (``b_hn`` sits inside the reset gate's product, so the
two cannot be summed), which is why ``nn.GRU`` state dicts import into this class unchanged.
``recurrence="auto"``/``"torch"`` runs PyTorch's fused kernel (``torch.gru``); ``"loop"`` runs the
equations above step by step (the reference twin).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from spectral_analysis.nn.arguments import check_positive_sizes
from spectral_analysis.nn.gated import GatedWeights
from spectral_analysis.nn.input_matrix import input_weights, symbol_vectors
from spectral_analysis.nn.recurrent import (
    RecurrentModel,
    RecurrentRun,
    input_projection,
    make_readout,
)

GRU_RECURRENCES = ("auto", "torch", "loop")


def _gru_update(projected: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor) -> Tensor:
    """One GRU step from the input projection ``W_i x + b_i`` ``(..., 3n)`` and the state ``h``."""
    ir, iz, i_n = projected.chunk(3, dim=-1)
    hr, hz, h_n = (h @ w_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
    new = torch.tanh(i_n + r * h_n)
    return (1 - z) * new + z * h


class GRUNet(GatedWeights, RecurrentModel):
    def __init__(self, input_size: int, hidden_size: int, output_size: int, num_layers: int = 1,
                 recurrence: str = "auto", output_bias: bool = False, dropout: float = 0.0,
                 dropout_kind: str = "standard", input_std: float | None = None,
                 embedding: int | None = None) -> None:
        super().__init__()
        self.set_dropout(dropout, dropout_kind)
        check_positive_sizes(input_size=input_size, hidden_size=hidden_size, output_size=output_size,
                             num_layers=num_layers)
        if recurrence not in GRU_RECURRENCES:
            raise ValueError(f"the GRU supports recurrence in {GRU_RECURRENCES}, got {recurrence!r}")
        n = hidden_size
        self.input_size, self.hidden_size, self.output_size = input_size, n, output_size
        self.num_layers, self.recurrence = num_layers, recurrence
        fan_ins = [input_size] + [n] * (num_layers - 1)
        self.input_weights = input_weights(3 * n, fan_ins, input_std, embedding)
        self.recurrent_weights = nn.ParameterList([nn.Parameter(torch.randn(3 * n, n) * n ** -0.5)
                                                   for _ in fan_ins])
        self.biases = nn.ParameterList([nn.Parameter(torch.zeros(3 * n)) for _ in fan_ins])
        self.recurrent_biases = nn.ParameterList([nn.Parameter(torch.zeros(3 * n)) for _ in fan_ins])
        self.output = make_readout(n, output_size, output_bias)


    def parameter_counts(self) -> dict[str, int]:
        counts = super().parameter_counts()
        extra = sum(b.numel() for b in self.recurrent_biases)
        counts["bias"] += extra
        counts["total"] += extra
        return counts

    @property
    def state_size(self) -> int:
        return self.num_layers * self.hidden_size

    def top_hidden(self, state: Tensor) -> Tensor:
        return state[..., -self.hidden_size:]

    def step_function(self) -> Callable[[Tensor, Tensor], Tensor]:
        n, input_weights = self.hidden_size, list(self.input_weights)

        def step(state: Tensor, x: Tensor) -> Tensor:
            layer_input, new = x, []
            for layer in range(self.num_layers):
                h = state[..., layer * n:(layer + 1) * n]
                projected = input_projection(layer_input, input_weights[layer], self.biases[layer])
                layer_input = _gru_update(projected, h, self.recurrent_weights[layer],
                                          self.recurrent_biases[layer])
                new.append(layer_input)
            return torch.cat(new, dim=-1)
        return step

    def run(self, x: Tensor, h0: Tensor | None = None, recurrence: str | None = None) -> RecurrentRun:
        self.check_input(x)
        B = x.shape[0]
        h0 = self.start_state(B) if h0 is None else self.check_state(h0, B)
        mode = recurrence or self.recurrence
        if mode not in GRU_RECURRENCES:
            raise ValueError(f"the GRU supports recurrence in {GRU_RECURRENCES}, got {mode!r}")
        layer_input, hidden = x, []
        for layer in range(self.num_layers):
            w_hh, b_ih, b_hh = self.recurrent_weights[layer], self.biases[layer], self.recurrent_biases[layer]
            if layer_input.is_floating_point():
                w_ih = self.input_weights[layer]
            else:  # symbol ids: the word's vector (M's column, or its embedding) and what reads it
                layer_input, w_ih = symbol_vectors(self.input_weights, layer_input)
            layer_input = self.drop(layer_input)
            if mode == "loop" or w_ih is None:
                projected = layer_input + b_ih if w_ih is None else input_projection(layer_input, w_ih, b_ih)
                h, states = h0[layer], []
                for projected_t in projected.unbind(1):  # unbind: one backward stack, not a zero-fill a step
                    h = _gru_update(projected_t, h, w_hh, b_hh)
                    states.append(h)
                H = torch.stack(states, dim=1)
            else:
                H, _ = torch.gru(layer_input, h0[layer:layer + 1], [w_ih, w_hh, b_ih, b_hh], True, 1, 0.0,
                                 torch.is_grad_enabled(), False, True)
            hidden.append(H)
            layer_input = H
        state = torch.stack([H[:, -1] for H in hidden])
        return RecurrentRun(self.read_out, hidden, state)
