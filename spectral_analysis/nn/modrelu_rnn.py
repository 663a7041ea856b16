"""Recurrent nets of complex units with modReLU: ``h_t = modReLU(W h_(t-1) + V x_t, b)``,
``y_t = U (Re h_t; Im h_t) + c`` (Arjovsky et al. 2016, Eq. 6 and 8), for any complex W.

The uRNN (:mod:`spectral_analysis.nn.urnn`, W by FFTs, reflections and phases) and KRU with its paper's
"complex rectified linear units (Arjovsky et al., 2016)" (Jose et al., Section 4; W a Kronecker product
of complex factors, ``build_model("kru", ..., complex=True, activation="modrelu")``) are this net with
another transition. Each layer's transition gives ``complex_apply(z)`` (``W z`` by its own structure,
the per-step reference) and ``modrelu_scan(xp, h0, b)`` (the time loop as one autograd node, on the
real form). Both models start as the uRNN authors' code does (``complex_RNN``'s ``models.py``; KRU states
no initialization): ``h_0`` a trained parameter drawn from ``U(-sqrt(3/n), sqrt(3/n))``, ``b`` from
``U(-0.01, 0.01)``. From ``h_0 = 0``, a run of zero inputs (pixel MNIST's first rows) keeps ``z = 0``,
where modReLU is discontinuous for ``b > 0``: its gradient gains ``b / eps`` a step.

The model runs on the **real form**: the state is ``(Re h; Im h)`` of length 2n, ``matrix()`` is the
real ``2n x 2n`` form of W, ``V`` is the real ``2n x n_i`` matrix ``(Re V; Im V)``. modReLU is not
elementwise on that vector (it scales each complex pair), so Theorem 5's Eq. 17 does not cover these
models; the Jacobian analyzers use the per-step view (:meth:`ModReLURNN.step_function`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from spectral_analysis.linalg import complex_vector, real_vector
from spectral_analysis.nn.arguments import check_positive_sizes
from spectral_analysis.nn.input_matrix import input_weights
from spectral_analysis.nn.modrelu import modrelu
from spectral_analysis.nn.recurrent import RecurrentModel, RecurrentRun, TransitionLayers, input_projection
from spectral_analysis.nn.time_loop import resolve_recurrence
from spectral_analysis.nn.transitions import Transition
from spectral_analysis.vocabulary import MODRELU

MODRELU_RECURRENCES = (None, "auto", "scan", "graph", "reflector", "loop")


class ModReLURNN(TransitionLayers, RecurrentModel):
    """The modReLU net of the module docstring over ``transitions`` (one per layer, complex W in real
    form, ``size = 2n``); layer l > 0 reads the real-form state of layer l - 1. The first layer's
    input matrix ``(Re V; Im V)`` starts N(0, s^2): ``s = input_std``, or ``1/sqrt(2 fan-in)`` as the
    layers above it start."""

    activation = MODRELU

    def __init__(self, transitions: Sequence[Transition], input_size: int, output_size: int,
                 output_bias: bool = True, recurrence: str = "auto", input_std: float | None = None,
                 embedding: int | None = None) -> None:
        super().__init__()
        check_positive_sizes(input_size=input_size, output_size=output_size)
        if not transitions:
            raise ValueError("a recurrent net needs at least one layer (num_layers >= 1)")
        if recurrence not in MODRELU_RECURRENCES:
            raise ValueError(_recurrence_message(recurrence))
        n = transitions[0].size // 2
        self.transitions = nn.ModuleList(transitions)
        self.units, self.recurrence = n, recurrence
        self.input_size, self.hidden_size, self.output_size = input_size, 2 * n, output_size
        self.num_layers = len(transitions)
        fan_ins = [input_size] + [2 * n] * (self.num_layers - 1)
        self.input_weights = input_weights(2 * n, fan_ins, input_std, embedding, fan_scale=2)
        self.biases = nn.ParameterList(  # modReLU's b
            [nn.Parameter(torch.empty(n).uniform_(-0.01, 0.01)) for _ in fan_ins])
        bound = (3 / n) ** 0.5
        self.start_states = nn.Parameter(torch.empty(self.num_layers, 2 * n).uniform_(-bound, bound))
        self.output = nn.Linear(2 * n, output_size, bias=output_bias)
        nn.init.normal_(self.output.weight, std=(2 * n) ** -0.5)
        if output_bias:
            nn.init.zeros_(self.output.bias)

    @property
    def state_size(self) -> int:
        return self.num_layers * 2 * self.units

    def start_state(self, batch: int) -> Tensor:
        """The learned ``h_0`` of every layer, ``(L, B, 2n)``."""
        return self.start_states.unsqueeze(1).expand(-1, batch, -1)

    def parameter_counts(self) -> dict[str, int]:
        """As the other models', plus the learned start state (2n reals a layer)."""
        counts = super().parameter_counts()
        counts["start_state"] = self.start_states.numel()
        counts["total"] += counts["start_state"]
        return counts

    def top_hidden(self, state: Tensor) -> Tensor:
        return state[..., -2 * self.units :]

    def step_function(self) -> Callable[[Tensor, Tensor], Tensor]:
        d, input_weights = 2 * self.units, list(self.input_weights)

        def step(state: Tensor, x: Tensor) -> Tensor:
            layer_input, new = x, []
            layers = zip(self.transitions, input_weights, self.biases, strict=True)
            for layer, (transition, M, b) in enumerate(layers):
                h = state[..., layer * d : (layer + 1) * d]
                z = complex_vector(transition.apply_reference(h) + input_projection(layer_input, M))
                layer_input = real_vector(modrelu(z, b))
                new.append(layer_input)
            return torch.cat(new, dim=-1)

        return step

    def run(self, x: Tensor, h0: Tensor | None = None, recurrence: str | None = None) -> RecurrentRun:
        """The time loop, layer by layer, each layer's input projections of all steps computed once: as
        one autograd node (the transition's ``modrelu_scan``; ``graph``, ``auto``'s route on CUDA unless a
        transition applies itself as the uRNN's does, replays its loops as CUDA graphs), or with
        ``recurrence="loop"`` as its reference, autograd through every step with W applied by its
        structure (``complex_apply``); :meth:`step_function` is the per-step view the analyzers use."""
        self.check_input(x)
        if recurrence not in MODRELU_RECURRENCES:
            raise ValueError(_recurrence_message(recurrence))
        requested = recurrence or self.recurrence
        recurrence = resolve_recurrence(requested, MODRELU, x.device)
        if requested == "auto" and any(t.structured_apply for t in self.transitions):
            recurrence = "scan"  # the uRNN's own scan, W by its factors
        B = x.shape[0]
        h0 = self.start_state(B) if h0 is None else self.check_state(h0, B)
        layer_input, hidden = x, []
        for layer, (transition, b) in enumerate(zip(self.transitions, self.biases, strict=True)):
            if recurrence == "loop":
                h, states = complex_vector(h0[layer]), []
                drives = complex_vector(input_projection(layer_input, self.input_weights[layer]))
                for u in drives.unbind(1):  # unbind: one gradient
                    h = modrelu(transition.complex_apply(h) + u, b)
                    states.append(h)
                layer_input = real_vector(torch.stack(states, dim=1))
            else:  # time-major inside the node: the input projected from (T, B, n_i), no copy of it
                u = input_projection(layer_input.transpose(0, 1), self.input_weights[layer])
                layer_input = transition.modrelu_scan(u, h0[layer], b, graphs=recurrence == "graph")
                layer_input = layer_input.transpose(0, 1)
            hidden.append(layer_input)
        final = torch.stack([H[:, -1] for H in hidden])
        return RecurrentRun(self.output, hidden, final)


def _recurrence_message(recurrence: object) -> str:
    return ("a modReLU net runs its time loop as one autograd node ('auto', 'scan', 'graph', 'reflector') or "
            f"through every step ('loop'); recurrence {recurrence!r} is not available")
