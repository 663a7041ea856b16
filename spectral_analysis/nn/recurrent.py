"""The recurrent net of Eq. 4-5, stacked: ``h_t = phi(W h_{t-1} + M x_t + b)``, ``y_t = Y h_t``.

Layer l > 0 reads the hidden states of layer l - 1 as its input; ``Y`` reads the last layer.
Inputs are floats ``(B, T, n_i)`` or integer symbol ids ``(B, T)`` in ``[0, n_i)``: an id stands for
its one-hot vector, so ``M x_t`` is a column of M (an embedding lookup, same math).
Each layer's ``W`` comes from a :class:`~spectral_analysis.nn.transitions.Transition`; it is
materialized once per forward pass and the time loop runs by one of the routes of
:mod:`spectral_analysis.nn.time_loop`. Eq. 5 has no output bias; ``output_bias=True`` adds one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from spectral_analysis.nn.activations import activate, check_activation, derivative
from spectral_analysis.nn.arguments import check_positive_sizes
from spectral_analysis.nn.dropout import check_dropout, sequence_dropout
from spectral_analysis.nn.input_matrix import input_weights, symbol_vectors
from spectral_analysis.nn.time_loop import (
    RECURRENCES,
    recurrence_loop,
    recurrence_torch,
    resolve_recurrence,
)
from spectral_analysis.nn.transitions import DenseTransition, Transition
from spectral_analysis.vocabulary import DEFAULT_LEAK


def input_projection(x: Tensor, M: Tensor, b: Tensor | None = None) -> Tensor:
    """``M x + b`` over every leading dim of ``x (..., n_i)``, as ``F.linear``; for symbol ids ``x (...)``,
    the ids' columns of ``M`` (``M`` times the one-hot vectors, never formed). ``M^T`` goes in contiguous,
    so autograd forms ``dL/dM^T = x^T G`` (one wide GEMM); ``F.linear``'s ``G^T x`` ran 2.6-4.4x slower
    on the CPU for n_i = 2 (``benchmarks/training_pieces_cpu.json``).

    >>> input_projection(torch.tensor([[1, 0]]), torch.eye(2)).tolist()
    [[[0.0, 1.0], [1.0, 0.0]]]
    """
    if not x.is_floating_point():
        columns = nn.functional.embedding(x, M.mT)
        return columns if b is None else columns + b
    flat, Mt = x.reshape(-1, x.shape[-1]), M.mT.contiguous()
    out = flat @ Mt if b is None else torch.addmm(b, flat, Mt)
    return out.view(*x.shape[:-1], M.shape[0])


@dataclass
class RecurrentRun:
    """What a recurrent model computed on a batch.

    ``hidden`` one ``(B, T, n)`` tensor of hidden states per layer; ``state`` the final state, to pass back
    as ``h0`` (``(L, B, n)``, or ``(h, c)`` for an LSTM); ``readout`` the read-out ``Y`` (Eq. 5).
    ``outputs`` ``(B, T, n_y)`` reads every step out (on first use); :meth:`last_outputs` only the last,
    which is all a last-step task scores (its backward then skips a ``(B T, n_y) x (n_y, n)`` product).
    """

    readout: Callable[[Tensor], Tensor]
    hidden: list[Tensor]
    state: Tensor | tuple[Tensor, Tensor]

    @cached_property
    def outputs(self) -> Tensor:
        return self.readout(self.hidden[-1])

    def last_outputs(self) -> Tensor:
        """``y_T`` as ``(B, 1, n_y)``."""
        return self.readout(self.hidden[-1][:, -1:])


class RecurrentModel(nn.Module, ABC):
    """Shared input checks and ``forward`` of the recurrent models."""

    input_size: int
    hidden_size: int
    output_size: int
    num_layers: int
    symbol_ids_refused: str | None = None  # an imported model's dropped input module (see check_input)
    dropout: float = 0.0  # on the non-recurrent connections while training (nn.dropout)
    dropout_kind: str = "standard"

    def set_dropout(self, p: float, kind: str) -> None:
        """Dropout ``p`` of ``kind`` on every layer's input and the read-out's, while training."""
        check_dropout(p, kind)
        self.dropout, self.dropout_kind = float(p), kind

    def drop(self, x: Tensor, time_dim: int = 1) -> Tensor:
        """``x`` (a layer's input, time along ``time_dim``) after the model's dropout when training."""
        return sequence_dropout(x, self.dropout, self.dropout_kind, self.training, time_dim)

    def read_out(self, hidden: Tensor) -> Tensor:
        """Eq. 5's read-out of hidden states ``(B, T, n)``, after dropout when training."""
        return self.output(self.drop(hidden))

    def _reference_weight(self) -> Tensor:
        return next(self.parameters())

    def check_input(self, x: Tensor) -> None:
        if not isinstance(x, Tensor):
            raise ValueError(f"expected a tensor input, got {type(x).__name__}")
        w = self._reference_weight()
        if not x.is_floating_point():
            if self.symbol_ids_refused:
                raise ValueError(f"this model was imported without {self.symbol_ids_refused}, which may "
                                 "turn symbol ids into its inputs: ids would be read as one-hot vectors "
                                 "instead; pass the vectors that module makes, of shape (batch, time, "
                                 f"{self.input_size})")
            if x.dim() != 2 or x.dtype not in (torch.int64, torch.int32):
                raise ValueError(f"integer input must be symbol ids of shape (batch, time), got "
                                 f"{x.dtype} of shape {tuple(x.shape)}")
            if x.numel() and (int(x.min()) < 0 or int(x.max()) >= self.input_size):
                raise ValueError(f"symbol ids must lie in [0, {self.input_size}), got "
                                 f"[{int(x.min())}, {int(x.max())}]")
            if x.shape[1] < 1:
                raise ValueError("input has no time steps (time dimension is 0)")
            if x.device != w.device:
                raise ValueError(f"input is on {x.device} but the model is on {w.device}")
            return
        if x.dim() != 3 or x.shape[-1] != self.input_size:
            raise ValueError(f"expected input of shape (batch, time, {self.input_size}), "
                             f"got {tuple(x.shape)}")
        if x.shape[1] < 1:
            raise ValueError("input has no time steps (time dimension is 0)")
        if x.dtype != w.dtype or x.device != w.device:
            raise ValueError(f"input is {x.dtype} on {x.device} but the model is {w.dtype} on {w.device}; "
                             f"convert with x.to(model_dtype, model_device)")

    def start_state(self, batch: int) -> Tensor:
        """The state ``(L, B, n)`` a run starts from when given no ``h0``, in the form ``run`` takes:
        zeros (the uRNN learns its own; the LSTM's is the pair ``(h_0, c_0)``)."""
        w = self._reference_weight()
        return w.new_zeros(self.num_layers, batch, self.hidden_size)

    def check_state(self, h0: Tensor, batch: int) -> Tensor:
        """``h0`` as ``(L, B, n)``; ``(B, n)`` is accepted for a one-layer model."""
        L, n = self.num_layers, self.hidden_size
        if h0.dim() == 2 and L == 1:
            h0 = h0.unsqueeze(0)
        if tuple(h0.shape) != (L, batch, n):
            raise ValueError(f"initial hidden state must have shape ({L}, {batch}, {n})"
                             f"{f' or ({batch}, {n})' if L == 1 else ''}, got {tuple(h0.shape)}")
        return h0

    @abstractmethod
    def run(self, x: Tensor, h0=None, recurrence: str | None = None) -> RecurrentRun:
        """Outputs, per-layer hidden states and the final state on ``x``."""

    @abstractmethod
    def transition_parameter_count(self) -> int:
        """Free parameters of the recurrent weights."""

    def parameter_counts(self) -> dict[str, int]:
        """Free parameters by component; the transition counts are the papers' (Section 4)."""
        output_bias = self.output.bias.numel() if self.output.bias is not None else 0
        counts = {"transition": self.transition_parameter_count(),
                  "input": sum(p.numel() for p in self.input_weights.parameters()),  # an embedding's factors
                  "output": self.output.weight.numel(),
                  "bias": sum(b.numel() for b in self.biases.parameters()) + output_bias}
        counts["total"] = sum(counts.values())
        return counts

    # The per-step view used by the analyzers (Jacobian products, Lyapunov exponents, gradient flow):
    # the whole state of all layers as one flat vector s_t, s_t = step(s_{t-1}, x_t), y_t = readout(s_t).

    @property
    @abstractmethod
    def state_size(self) -> int:
        """Length of the flat state vector s_t."""

    def flat_state(self, state: Tensor) -> Tensor:
        """A per-layer state ``(L, B, w)`` (as ``start_state`` gives it) as the flat ``(B, L w)``."""
        return state.transpose(0, 1).reshape(state.shape[1], -1)

    @abstractmethod
    def step_function(self) -> Callable[[Tensor, Tensor], Tensor]:
        """``step(s, x_t) -> s'`` on flat states ``(..., state_size)`` and one input ``x_t`` ``(..., n_i)``
        (or symbol ids ``(...)``), with the weights materialized once; differentiable."""

    @abstractmethod
    def top_hidden(self, state: Tensor) -> Tensor:
        """The hidden vector of the last layer inside a flat state (what the read-out sees)."""

    def readout(self, state: Tensor) -> Tensor:
        """``y_t = Y h_t`` (Eq. 5) from a flat state."""
        return self.output(self.top_hidden(state))

    def step_jacobian_function(self) -> Callable[[Tensor, Tensor], Tensor]:
        """``A(s, x_t) = d step(s, x_t) / d s`` as ``(B, d, d)`` for a batch ``(B, d)``: by ``torch.func``
        (``vmap`` of ``jacrev``) unless a model overrides it with its closed form."""
        step = self.step_function()
        return torch.func.vmap(torch.func.jacrev(step, argnums=0))

    def last_outputs(self, x: Tensor) -> Tensor:
        """``y_T`` ``(B, n_y)`` from the start state: what margins and last-step tasks read."""
        return self.run(x).last_outputs()[:, 0]

    def forward(self, x: Tensor, h0=None, return_hidden: bool = False):
        """Outputs ``(B, T, n_y)`` of every step; with ``return_hidden``, also the hidden states
        ``(L, B, T, n)`` of every layer."""
        run = self.run(x, h0)
        return (run.outputs, torch.stack(run.hidden)) if return_hidden else run.outputs


class BiasPair(nn.Module):
    """Eq. 4's bias ``b`` held as the sum of two trainable vectors, as ``nn.RNN`` holds it
    (``b_ih + b_hh``), through ``torch.nn.utils.parametrize``: the same function, but both halves receive
    ``dL/db``, so under Adam ``b`` moves at twice the rate of a single vector (a plain-PyTorch IRNN's
    recipe; :mod:`~spectral_analysis.experiments.reference`).

    Example: ``BiasPair()(torch.ones(2, 3))`` is ``tensor([2., 2., 2.])``."""

    def forward(self, pair: Tensor) -> Tensor:
        return pair[0] + pair[1]

    def right_inverse(self, bias: Tensor) -> Tensor:
        """``b`` split as ``(b, 0)``."""
        return torch.stack([bias, torch.zeros_like(bias)])


def make_readout(n: int, output_size: int, bias: bool) -> nn.Linear:
    """Eq. 5's read-out ``Y`` (weights N(0, 1/n)), with a zero bias when asked for."""
    output = nn.Linear(n, output_size, bias=bias)
    nn.init.normal_(output.weight, std=n ** -0.5)
    if bias:
        nn.init.zeros_(output.bias)
    return output


class TransitionLayers:
    """What a model whose layers each hold a :class:`Transition` in ``self.transitions`` gets from them."""

    def transition_matrix(self, layer: int = 0) -> Tensor:
        """The dense ``W`` of ``layer`` (differentiable)."""
        return self.transitions[layer].matrix()

    def transition_matrices(self) -> list[Tensor]:
        return [t.matrix() for t in self.transitions]

    def singular_values(self, layer: int = 0) -> Tensor:
        return self.transitions[layer].singular_values()

    def spectral_penalty(self) -> Tensor:
        """Sum of the layers' soft singular-value penalties (``||sigma - sigma*||^2`` for map ``none``)."""
        return sum((t.spectral_penalty() for t in self.transitions), self.biases[0].new_zeros(()))

    def constrain_(self) -> None:
        for t in self.transitions:
            t.constrain_()

    def transition_parameter_count(self) -> int:
        return sum(t.parameter_count() for t in self.transitions)


class RecurrentNet(TransitionLayers, RecurrentModel):
    """Eq. 4-5 with one transition per layer (RNN, IRNN, oRNN, Spectral-RNN, later KRU/Dizzy).

    The first layer's input weight M (the network's input matrix) starts with N(0, s^2) entries:
    ``s = input_std``, or ``1/sqrt(fan-in)`` when ``None``, as the layers above it start (the paper:
    "other matrices are initialized by sampling from a Gaussian distribution", Section 7, its variance
    unstated). ``dropout`` acts on each layer's input and the read-out's while
    training (:mod:`spectral_analysis.nn.dropout`). ``bias_pair`` holds each ``b`` as :class:`BiasPair`.
    ``embedding`` factors M through a word embedding (:mod:`spectral_analysis.nn.input_matrix`)."""

    def __init__(self, transitions: Sequence[Transition], input_size: int, output_size: int,
                 activation: str = "leaky_relu", leak: float = DEFAULT_LEAK, recurrence: str = "auto",
                 output_bias: bool = False, input_std: float | None = None, dropout: float = 0.0,
                 dropout_kind: str = "standard", bias_pair: bool = False,
                 embedding: int | None = None) -> None:
        super().__init__()
        if not transitions:
            raise ValueError("a recurrent net needs at least one layer (num_layers >= 1)")
        sizes = {t.size for t in transitions}
        if len(sizes) != 1:
            raise ValueError(f"all layers must have the same hidden size, got {sorted(sizes)}")
        check_positive_sizes(input_size=input_size, output_size=output_size)
        check_activation(activation, leak)
        if recurrence not in RECURRENCES:
            raise ValueError(f"unknown recurrence {recurrence!r}; expected one of {RECURRENCES}")
        self.set_dropout(dropout, dropout_kind)
        n = sizes.pop()
        self.input_size, self.hidden_size, self.output_size = input_size, n, output_size
        self.num_layers = len(transitions)
        self.activation, self.leak, self.recurrence = activation, float(leak), recurrence
        self.transitions = nn.ModuleList(transitions)
        fan_ins = [input_size] + [n] * (self.num_layers - 1)
        self.input_weights = input_weights(n, fan_ins, input_std, embedding)
        self.biases = nn.ParameterList([nn.Parameter(torch.zeros(n)) for _ in fan_ins])
        if not isinstance(bias_pair, bool):
            raise ValueError(f"bias_pair must be True or False, got {bias_pair!r}")
        for layer in range(self.num_layers) if bias_pair else ():
            parametrize.register_parametrization(self.biases, str(layer), BiasPair())
        self.output = make_readout(n, output_size, output_bias)

    @property
    def state_size(self) -> int:
        return self.num_layers * self.hidden_size

    def top_hidden(self, state: Tensor) -> Tensor:
        return state[..., -self.hidden_size:]

    def step_function(self) -> Callable[[Tensor, Tensor], Tensor]:
        Ws, Ms, n = self.transition_matrices(), list(self.input_weights), self.hidden_size

        def step(state: Tensor, x: Tensor) -> Tensor:
            layer_input, new = x, []
            for layer, (W, M, b) in enumerate(zip(Ws, Ms, self.biases, strict=True)):
                h = state[..., layer * n:(layer + 1) * n]
                layer_input = activate(h @ W.mT + input_projection(layer_input, M, b), self.activation,
                                       self.leak)
                new.append(layer_input)
            return torch.cat(new, dim=-1)
        return step

    def step_jacobian_function(self) -> Callable[[Tensor, Tensor], Tensor]:
        """Closed form: layer l's rows are ``D_l (M_l [rows of l-1] + W_l E_l)``, ``D_l = diag phi'(z_l)``
        (for one layer, ``D W`` as in KRU's Eq. 3)."""
        Ws, Ms, n, L = self.transition_matrices(), list(self.input_weights), self.hidden_size, self.num_layers

        def jacobian(state: Tensor, x: Tensor) -> Tensor:
            B = state.shape[0]
            layer_input, below, rows = x, None, []
            for layer, (W, M, b) in enumerate(zip(Ws, Ms, self.biases, strict=True)):
                z = state[:, layer * n:(layer + 1) * n] @ W.mT + input_projection(layer_input, M, b)
                d = derivative(z, self.activation, self.leak)
                block = state.new_zeros(B, n, L * n)
                block[:, :, layer * n:(layer + 1) * n] = W
                if below is not None:
                    block = block + M @ below
                below = d.unsqueeze(-1) * block
                rows.append(below)
                layer_input = activate(z, self.activation, self.leak)
            return torch.cat(rows, dim=1)
        return jacobian

    def run(self, x: Tensor, h0: Tensor | None = None, recurrence: str | None = None) -> RecurrentRun:
        """Eq. 4-5 on ``x (B, T, n_i)``, by route ``recurrence`` (default: the model's own)."""
        hidden = self.hidden_states(x, h0, recurrence)
        state = torch.stack([H[:, -1] for H in hidden])
        return RecurrentRun(self.read_out, hidden, state)

    def hidden_states(self, x: Tensor, h0: Tensor | None = None,
                      recurrence: str | None = None) -> list[Tensor]:
        """Eq. 4's hidden states ``(B, T, n)`` of every layer."""
        self.check_input(x)
        B = x.shape[0]
        h0 = self.start_state(B) if h0 is None else self.check_state(h0, B)
        requested = recurrence or self.recurrence
        mode = resolve_recurrence(requested, self.activation, x.device, self.hidden_size,
                                  self._reference_weight().dtype)
        if requested == "auto" and all(t.structured_apply for t in self.transitions):
            mode = "reflector"  # W h by the structure (KRU's factor-by-factor product), W never formed
        if mode == "reflector" and any(isinstance(t, DenseTransition) for t in self.transitions):
            raise ValueError("recurrence='reflector' needs a structured transition (oRNN, Spectral-RNN, KRU, "
                             "DizzyRNN); this model has a dense W, use 'loop'")
        layer_input, hidden = x, []
        for layer, (transition, b, h_init) in enumerate(zip(self.transitions, self.biases, h0, strict=True)):
            if layer_input.is_floating_point():
                M = self.input_weights[layer]
            else:  # symbol ids: the word's vector (M's column, or its embedding) and what reads it
                layer_input, M = symbol_vectors(self.input_weights, layer_input)
            layer_input = self.drop(layer_input)
            if mode == "torch":
                if M is None:  # the fused kernel wants an input matrix: M's columns are read through I
                    M = torch.eye(layer_input.shape[-1], dtype=layer_input.dtype, device=layer_input.device)
                H = recurrence_torch(layer_input, M, b, transition.matrix(), h_init, self.activation)
            else:
                xp = (layer_input.transpose(0, 1).contiguous() + b if M is None  # (T, B, n)
                      else input_projection(layer_input.transpose(0, 1), M, b))
                if mode in ("scan", "graph"):  # graph: the dense scan's loops replayed as CUDA graphs
                    Ht = transition.scan(xp, h_init, self.activation, self.leak, graphs=mode == "graph")
                elif mode == "fused":  # imported here: Triton is optional, and only this route needs it
                    from spectral_analysis.nn.fused_recurrence import recurrence_fused
                    Ht = recurrence_fused(xp, transition.matrix(), h_init, self.activation, self.leak)
                else:
                    step = transition.apply_reference if mode == "reflector" else _dense_step(transition)
                    Ht = recurrence_loop(xp, h_init, step, self.activation, self.leak)
                H = Ht.transpose(0, 1)
            hidden.append(H)
            layer_input = H
        return hidden


def _dense_step(transition: Transition):
    W = transition.matrix()
    return lambda h: h @ W.mT
