"""The LSTM baseline (Hochreiter & Schmidhuber 1997), stacked, with Eq. 5's linear read-out.

One bias per gate (4n per layer, as TensorFlow's LSTM cell that the paper used), the forget
gate's initialized to ``forget_bias``; gates in PyTorch's order (input, forget, cell, output). The
recurrent weights start as ``init`` says (:func:`recurrent_start`).
``recurrence="auto"``/``"torch"`` runs PyTorch's fused kernel (``torch.lstm``, cuDNN on a GPU);
``"loop"`` runs the equations step by step under autograd (the reference). Symbol-id inputs
``(B, T)`` select columns of the input weight (one-hot inputs without the one-hot vectors); with
``embedding`` that weight is a word embedding's product (:mod:`spectral_analysis.nn.input_matrix`).

An LSTM has no single transition matrix: :meth:`LSTMNet.transition_matrix` returns the stacked
``4n x n`` recurrent weight of the four gates, and its singular values come from ``svdvals``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from spectral_analysis.nn.arguments import check_positive_sizes
from spectral_analysis.nn.gated import GatedWeights
from spectral_analysis.nn.input_matrix import input_weights, is_embedded, symbol_vectors
from spectral_analysis.nn.recurrent import (
    RecurrentModel,
    RecurrentRun,
    input_projection,
    make_readout,
)
from spectral_analysis.vocabulary import LSTM_INITS

LSTM_RECURRENCES = ("auto", "torch", "loop")


def recurrent_start(n: int, init: str) -> Tensor:
    """A layer's ``4n x n`` recurrent weight (gates input, forget, cell, output) at its start:

    - ``gaussian``: N(0, 1/n) entries (the toolkit's default);
    - ``orthogonal``: orthonormal columns, Cooijmans et al.'s (2016) released code's ``--init ortho``
      (its ``orthogonal((n, 4n))``, applied as ``h @ W``);
    - ``identity-orthogonal``: the cell block the identity and the other three gates' ``3n x n`` with
      orthonormal columns, that code's ``--init id``, which its LSTM baseline on pixel MNIST ran with
      (``experiments/sequentialmnist_lstm.sh``).

    >>> W = recurrent_start(4, "identity-orthogonal")
    >>> bool(torch.equal(W[8:12], torch.eye(4)))
    True
    """
    if init not in LSTM_INITS:
        raise ValueError(f"unknown LSTM init {init!r}; expected one of {LSTM_INITS}")
    if init == "gaussian":
        return torch.randn(4 * n, n) * n ** -0.5
    if init == "orthogonal":
        return nn.init.orthogonal_(torch.empty(4 * n, n))
    gates = nn.init.orthogonal_(torch.empty(3 * n, n))
    return torch.cat([gates[:2 * n], torch.eye(n), gates[2 * n:]])


class LSTMNet(GatedWeights, RecurrentModel):
    def __init__(self, input_size: int, hidden_size: int, output_size: int, num_layers: int = 1,
                 forget_bias: float = 1.0, recurrence: str = "auto", output_bias: bool = False,
                 dropout: float = 0.0, dropout_kind: str = "standard",
                 input_std: float | None = None, init: str = "gaussian",
                 embedding: int | None = None) -> None:
        super().__init__()
        self.set_dropout(dropout, dropout_kind)
        check_positive_sizes(input_size=input_size, hidden_size=hidden_size, output_size=output_size,
                             num_layers=num_layers)
        if recurrence not in LSTM_RECURRENCES:
            raise ValueError(f"the LSTM supports recurrence in {LSTM_RECURRENCES}, got {recurrence!r}")
        n = hidden_size
        self.input_size, self.hidden_size, self.output_size = input_size, n, output_size
        self.num_layers, self.recurrence = num_layers, recurrence
        fan_ins = [input_size] + [n] * (num_layers - 1)
        self.input_weights = input_weights(4 * n, fan_ins, input_std, embedding)
        self.recurrent_weights = nn.ParameterList([nn.Parameter(recurrent_start(n, init)) for _ in fan_ins])
        biases = []
        for _ in fan_ins:
            b = torch.zeros(4 * n)
            b[n:2 * n] = forget_bias
            biases.append(nn.Parameter(b))
        self.biases = nn.ParameterList(biases)
        self.output = make_readout(n, output_size, output_bias)


    @property
    def state_size(self) -> int:
        """The flat state is ``(h_1 .. h_L, c_1 .. c_L)``: ``2 L n``."""
        return 2 * self.num_layers * self.hidden_size

    def start_state(self, batch: int) -> tuple[Tensor, Tensor]:
        """``(h_0, c_0)``, both zeros ``(L, B, n)``."""
        h = super().start_state(batch)
        return h, torch.zeros_like(h)

    def flat_state(self, state: tuple[Tensor, Tensor]) -> Tensor:
        """``(h_0, c_0)`` as the flat ``(h_1 .. h_L, c_1 .. c_L)``."""
        h, c = state
        return torch.cat([super().flat_state(h), super().flat_state(c)], dim=-1)

    def top_hidden(self, state: Tensor) -> Tensor:
        L, n = self.num_layers, self.hidden_size
        return state[..., (L - 1) * n:L * n]

    def step_function(self) -> Callable[[Tensor, Tensor], Tensor]:
        L, n, input_weights = self.num_layers, self.hidden_size, list(self.input_weights)

        def step(state: Tensor, x: Tensor) -> Tensor:
            layer_input, hs, cs = x, [], []
            for layer in range(L):
                w_ih, w_hh, b = input_weights[layer], self.recurrent_weights[layer], self.biases[layer]
                h, c = state[..., layer * n:(layer + 1) * n], state[..., (L + layer) * n:(L + layer + 1) * n]
                projected = input_projection(layer_input, w_ih)
                i, f, g, o = (projected + h @ w_hh.T + b).chunk(4, dim=-1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                layer_input = torch.sigmoid(o) * torch.tanh(c)
                hs.append(layer_input)
                cs.append(c)
            return torch.cat(hs + cs, dim=-1)
        return step

    def run(self, x: Tensor, h0: tuple[Tensor, Tensor] | None = None,
            recurrence: str | None = None) -> RecurrentRun:
        self.check_input(x)
        B = x.shape[0]
        if h0 is None:
            h0 = self.start_state(B)
        elif not (isinstance(h0, tuple | list) and len(h0) == 2):
            raise ValueError("an LSTM's initial state is a pair (h0, c0)")
        h_init, c_init = (self.check_state(s, B) for s in h0)
        mode = recurrence or self.recurrence
        if mode not in LSTM_RECURRENCES:
            raise ValueError(f"the LSTM supports recurrence in {LSTM_RECURRENCES}, got {mode!r}")
        layer_input, hidden, finals_h, finals_c = x, [], [], []
        for layer in range(self.num_layers):
            w_hh, b = self.recurrent_weights[layer], self.biases[layer]
            if layer_input.is_floating_point():
                w_ih = self.input_weights[layer]
            else:
                layer_input, w_ih = _symbol_input(self.input_weights, layer_input,
                                                  dropped=self.training and self.dropout > 0)
            layer_input = self.drop(layer_input)
            if mode == "loop":
                H, (h, c) = _lstm_loop(layer_input, w_ih, w_hh, b, h_init[layer], c_init[layer])
            else:
                H, h, c = torch.lstm(layer_input, (h_init[layer:layer + 1], c_init[layer:layer + 1]),
                                     [w_ih, w_hh, b, torch.zeros_like(b)], True, 1, 0.0,
                                     torch.is_grad_enabled(), False, True)
                h, c = h[0], c[0]
            hidden.append(H)
            finals_h.append(h)
            finals_c.append(c)
            layer_input = H
        state = (torch.stack(finals_h), torch.stack(finals_c))
        return RecurrentRun(self.read_out, hidden, state)


def _symbol_input(weights: nn.ParameterList, ids: Tensor, dropped: bool) -> tuple[Tensor, Tensor]:
    """``torch.lstm``'s input and input weight for symbol ids ``(B, T)``. With a word embedding, the
    embedded words and ``A`` (:func:`~spectral_analysis.nn.input_matrix.symbol_vectors`). Without one, a
    small alphabet (at most the ``4n`` gate rows, e.g. copy's 10 symbols) goes in one-hot against ``M``
    itself: ``n_i`` multiply-adds per gate row instead of ``4n`` (3.4x faster forward + backward on the copy
    task, n = 128, T = 220); a large vocabulary (PTB's 10,000 words), or any input that is ``dropped``,
    selects ``M``'s columns and passes ``I``."""
    if not is_embedded(weights):
        M = weights[0]
        rows, symbols = M.shape
        if symbols <= rows and not dropped:
            return nn.functional.one_hot(ids, symbols).to(M.dtype), M
    vectors, A = symbol_vectors(weights, ids)
    if A is None:
        A = torch.eye(vectors.shape[-1], dtype=vectors.dtype, device=vectors.device)
    return vectors, A


def _lstm_loop(x: Tensor, w_ih: Tensor, w_hh: Tensor, b: Tensor, h: Tensor,
               c: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """The LSTM equations one step at a time (the reference twin of ``torch.lstm``)."""
    states = []
    for t in range(x.shape[1]):
        i, f, g, o = (x[:, t] @ w_ih.T + h @ w_hh.T + b).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        states.append(h)
    return torch.stack(states, dim=1), (h, c)
