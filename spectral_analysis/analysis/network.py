"""A recurrent model seen as the bias-free network of the ICML paper's Eq. 17, in float64.

Theorem 5 and Lemma 3 are about ``h_t = phi(W h_{t-1} + M x_t)``, ``h_0 = 0``, ``y = Y h_T``
(Appendix A.6). A model of the registry has a hidden bias ``b`` and may have an output bias ``c``;
both are absorbed so that the same function is computed by a bias-free network of that form:

- hidden bias: a constant input 1 is appended to every ``x_t`` and ``b`` becomes M's last column,
  ``M~ = (M | b)``; the data bound grows to ``B~ = sqrt(B^2 + 1)`` and ``n_i`` by one;
- output bias: one more hidden unit with a zero row and column in ``W`` reads the constant input
  (``M~`` gets a row ``(0 .. 0 1)``), so it holds ``phi(1)`` at every step, and ``Y~ = (Y | c / phi(1))``;
  ``n`` grows by one.

A bias that is exactly zero is not absorbed. Symbol-id inputs stand for one-hot vectors (B = 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from spectral_analysis.nn import GRUNet, LSTMNet, RecurrentNet
from spectral_analysis.nn.activations import activate
from spectral_analysis.nn.modrelu_rnn import ModReLURNN


@dataclass
class Eq17Network:
    """Dense float64 ``W (n, n)``, ``M (n, n_i)``, ``Y (n_y, n)`` of Eq. 17, biases absorbed."""

    W: Tensor
    M: Tensor
    Y: Tensor
    activation: str
    leak: float
    symbolic_inputs: bool  # the model reads symbol ids; x_t is their one-hot vector
    constant_input: bool  # a constant 1 was appended to x_t (a bias was absorbed)
    output_unit: bool  # one hidden unit carries phi(1) for the output bias
    raw_input_size: int  # n_i of the model before absorption
    singular_value_bound: float | None  # structural bound on ||W|| (Corollary 1), None if unbounded

    @property
    def sizes(self) -> dict[str, int]:
        n, ni, ny = self.W.shape[0], self.M.shape[1], self.Y.shape[0]
        return {"n": n, "n_i": ni, "n_y": ny, "h": max(n, ni, ny)}

    def data_bound(self, raw_bound: float) -> float:
        """``B`` of Assumption 1(a) for the absorbed inputs, from the bound on the model's own inputs."""
        return math.sqrt(raw_bound ** 2 + 1.0) if self.constant_input else raw_bound

    def inputs(self, x: Tensor) -> Tensor:
        """The model's input ``(B, T, n_i)`` (or ids ``(B, T)``) as Eq. 17's dense float64 ``x~_t``."""
        if self.symbolic_inputs:
            if x.is_floating_point() or x.dim() != 2:
                raise ValueError(f"this model reads symbol ids of shape (batch, time), got {tuple(x.shape)}")
            dense = nn.functional.one_hot(x.long(), self.raw_input_size).to(torch.float64)
        else:
            if not x.is_floating_point() or x.dim() != 3 or x.shape[-1] != self.raw_input_size:
                raise ValueError(f"expected inputs of shape (batch, time, {self.raw_input_size}), "
                                 f"got {tuple(x.shape)}")
            dense = x.to(torch.float64)
        if self.constant_input:
            dense = torch.cat([dense, dense.new_ones(*dense.shape[:-1], 1)], dim=-1)
        return dense.to(self.W.device)

    def hidden_states(self, x: Tensor, W: Tensor | None = None, M: Tensor | None = None) -> Tensor:
        """``h_1 .. h_T`` ``(B, T, n)`` of Eq. 17 on dense inputs ``x~`` (the reference loop)."""
        W = self.W if W is None else W
        M = self.M if M is None else M
        h = x.new_zeros(x.shape[0], W.shape[0])
        states = []
        for t in range(x.shape[1]):
            h = activate(h @ W.T + x[:, t] @ M.T, self.activation, self.leak)
            states.append(h)
        return torch.stack(states, dim=1)

    def final(self, x: Tensor, W: Tensor | None = None, M: Tensor | None = None,
              Y: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``(h_T, y = Y h_T)`` on dense inputs, optionally with other (perturbed) weights."""
        h_T = self.hidden_states(x, W, M)[:, -1]
        return h_T, h_T @ (self.Y if Y is None else Y).T


def eq17_network(model: nn.Module, symbolic_inputs: bool = False) -> Eq17Network:
    """The Eq. 17 form of a one-layer :class:`RecurrentNet` (any transition), biases absorbed;
    ``symbolic_inputs`` when the task feeds symbol ids (copy, ptb)."""
    if isinstance(model, LSTMNet | GRUNet):
        cell = "an LSTM" if isinstance(model, LSTMNet) else "a GRU"
        raise ValueError(f"Theorem 5 and Lemma 3 are about h_t = phi(W h_{{t-1}} + M x_t) (Eq. 17); {cell}'s "
                         "gated update is not of that form")
    if isinstance(model, ModReLURNN):
        raise ValueError("Theorem 5 needs h_t = phi(W h_{t-1} + M x_t) with phi elementwise (Eq. 17); the "
                         "modReLU of this net (the uRNN's, or KRU's with activation modrelu) scales each "
                         "complex pair (Re, Im) together, with a trainable bias")
    if not isinstance(model, RecurrentNet):
        raise ValueError(f"Theorem 5 is about the recurrent nets of Eq. 17; a {type(model).__name__} is not "
                         "one")
    if model.num_layers != 1:
        raise ValueError(f"Theorem 5 covers one recurrent layer (Eq. 17, h_t = phi(W h_(t-1) + M x_t)); this "
                         f"model stacks {model.num_layers}, so layer 2 reads h_t, not x_t")
    with torch.no_grad():
        W = model.transition_matrix(0).detach().to(torch.float64)
        M = model.input_weights[0].detach().to(torch.float64)
        b = model.biases[0].detach().to(torch.float64)
        Y = model.output.weight.detach().to(torch.float64)
        c = model.output.bias.detach().to(torch.float64) if model.output.bias is not None else None
    output_unit = c is not None and bool(c.abs().max() > 0)
    constant_input = output_unit or bool(b.abs().max() > 0)
    if constant_input:
        M = torch.cat([M, b.unsqueeze(1)], dim=1)
    if output_unit:
        phi_one = float(activate(torch.ones(()), model.activation, model.leak))
        W = torch.block_diag(W, W.new_zeros(1, 1))
        unit_row = M.new_zeros(1, M.shape[1])
        unit_row[0, -1] = 1.0
        M = torch.cat([M, unit_row], dim=0)
        Y = torch.cat([Y, (c / phi_one).unsqueeze(1)], dim=1)
    return Eq17Network(W, M, Y, model.activation, model.leak, symbolic_inputs, constant_input, output_unit,
                       model.input_size, model.transitions[0].singular_value_bound())
