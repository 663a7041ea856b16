"""The unitary RNN (Arjovsky et al. 2016), the baseline both main papers compare with.

``W = D3 R2 F^-1 D2 Pi R1 F D1`` on complex states: ``D_j = diag(exp(i theta_j))``, complex reflections
``R_j = I - 2 v_j v_j^H / ||v_j||^2``, a fixed permutation ``Pi`` and the unitary FFT ``F`` (7n real
parameters). ``h_t = modReLU(W h_(t-1) + V x_t)`` with ``modReLU(z)_i = relu(|z_i| + b_i) z_i / |z_i|``
and ``y_t = U (Re h_t; Im h_t) + c``. As in the authors' code (``complex_RNN``'s ``models.py``), the start
state ``h_0`` is a trained parameter drawn from ``U(-sqrt(3/n), sqrt(3/n))`` and ``b`` from
``U(-0.01, 0.01)``. From ``h_0 = 0``, a run of zero inputs (pixel MNIST's first rows) keeps ``z = 0``, where
modReLU is discontinuous for ``b > 0``: its gradient gains ``b / eps`` a step, and pixel MNIST at n = 512
diverged (nan gradient) at its second step.

As with complex KRU, the model runs on the **real form**: the state is ``(Re h; Im h)`` of length 2n,
``matrix()`` is the real ``2n x 2n`` form of W, ``V`` is the real ``2n x n_i`` matrix ``(Re V; Im V)``.
modReLU is not elementwise on that vector (it scales each complex pair), so Theorem 5's Eq. 17 does not
cover this model; the Jacobian analyzers use the per-step view below.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from spectral_analysis.linalg import complex_vector, real_matrix, real_vector
from spectral_analysis.nn.recurrent import RecurrentModel, RecurrentRun, TransitionLayers, input_projection
from spectral_analysis.nn.transitions import Transition, _check_size
from spectral_analysis.nn.unitary_scan import modrelu, unitary_product, unitary_scan


class UnitaryTransition(Transition):
    """uRNN's W in real form (``size = 2n``); the permutation is drawn once from ``seed`` and saved."""

    structured_apply = True

    def __init__(self, n: int, seed: int = 0) -> None:
        super().__init__()
        n = _check_size(n)
        self.units, self.size = n, 2 * n
        self.thetas = nn.Parameter((torch.rand(3, n) * 2 - 1) * torch.pi)
        self.reflections = nn.Parameter(torch.randn(2, 2, n))  # [j][real, imag]
        generator = torch.Generator().manual_seed(seed)
        self.register_buffer("permutation", torch.randperm(n, generator=generator))

    def factors(self) -> tuple[Tensor, Tensor, Tensor]:
        """The phases ``exp(i theta_j)`` ``(3, n)``, and for each reflection ``R_j = I - 2 v_j v_j^H /
        ||v_j||^2`` the rows ``conj(v_j)`` and ``2 v_j / ||v_j||^2`` ``(2, n)``."""
        phases = torch.exp(1j * self.thetas.to(torch.promote_types(self.thetas.dtype, torch.float32)))
        v = torch.complex(self.reflections[:, 0], self.reflections[:, 1])
        return phases, v.conj(), 2.0 * v / v.abs().square().sum(-1, keepdim=True)

    def apply_factors(self, z: Tensor, phases: Tensor, conjugates: Tensor, scaled: Tensor) -> Tensor:
        """``W z`` for complex ``z (..., n)`` from :meth:`factors` (:func:`unitary_product`)."""
        return unitary_product(z, phases, conjugates, scaled, self.permutation)

    def complex_apply(self, z: Tensor) -> Tensor:
        """``W z`` for complex ``z (..., n)`` (:meth:`apply_factors` of this step's :meth:`factors`)."""
        return self.apply_factors(z, *self.factors())

    def complex_matrix(self) -> Tensor:
        """The dense complex W (its columns are ``W e_j``)."""
        eye = torch.eye(
            self.units,
            dtype=torch.complex128 if self.thetas.dtype == torch.float64 else torch.complex64,
            device=self.thetas.device,
        )
        return self.complex_apply(eye).mT

    def matrix(self) -> Tensor:
        W = self.complex_matrix()
        return real_matrix(W)

    def apply_reference(self, h: Tensor) -> Tensor:
        return real_vector(self.complex_apply(complex_vector(h).to(self._complex_dtype())))

    def _complex_dtype(self) -> torch.dtype:
        return torch.complex128 if self.thetas.dtype == torch.float64 else torch.complex64

    def singular_values(self) -> Tensor:
        return torch.ones(self.size, dtype=self.thetas.dtype, device=self.thetas.device)

    def singular_value_bound(self) -> float:
        return 1.0

    def parameter_count(self) -> int:
        """7n: three phase diagonals and two complex reflection vectors."""
        return self.thetas.numel() + self.reflections.numel()

    def structured_form(self) -> dict[str, Tensor]:
        return {"thetas": self.thetas, "reflections": self.reflections, "permutation": self.permutation}


class UnitaryRNN(TransitionLayers, RecurrentModel):
    """uRNN (see the module docstring), real-form state of size 2n per layer; layer l > 0 reads the
    real-form state of layer l - 1."""

    activation = "modrelu"

    def __init__(
        self, input_size: int, n: int, output_size: int, output_bias: bool = True, num_layers: int = 1
    ) -> None:
        super().__init__()
        for name, value in (
            ("input_size", input_size),
            ("output_size", output_size),
            ("num_layers", num_layers),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.transitions = nn.ModuleList([UnitaryTransition(n, seed=layer) for layer in range(num_layers)])
        self.units = n
        self.input_size, self.hidden_size, self.output_size = input_size, 2 * n, output_size
        self.num_layers = num_layers
        fan_ins = [input_size] + [2 * n] * (num_layers - 1)
        self.input_weights = nn.ParameterList(
            [nn.Parameter(torch.randn(2 * n, f) * (2 * f) ** -0.5) for f in fan_ins]
        )
        self.biases = nn.ParameterList(  # modReLU's b
            [nn.Parameter(torch.empty(n).uniform_(-0.01, 0.01)) for _ in fan_ins])
        bound = (3 / n) ** 0.5
        self.start_states = nn.Parameter(torch.empty(num_layers, 2 * n).uniform_(-bound, bound))
        self.output = nn.Linear(2 * n, output_size, bias=output_bias)
        nn.init.normal_(self.output.weight, std=(2 * n) ** -0.5)
        if output_bias:
            nn.init.zeros_(self.output.bias)
        self.register_load_state_dict_pre_hook(_zero_start_for_older_files)

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

    def _input(self, layer: int, x: Tensor) -> Tensor:
        M = self.input_weights[layer]
        return input_projection(x, M) if x.is_floating_point() else nn.functional.embedding(x, M.T)

    def step_function(self) -> Callable[[Tensor, Tensor], Tensor]:
        d = 2 * self.units

        def step(state: Tensor, x: Tensor) -> Tensor:
            layer_input, new = x, []
            for layer, (transition, b) in enumerate(zip(self.transitions, self.biases, strict=True)):
                h = state[..., layer * d : (layer + 1) * d]
                z = complex_vector(transition.apply_reference(h) + self._input(layer, layer_input))
                layer_input = real_vector(modrelu(z, b))
                new.append(layer_input)
            return torch.cat(new, dim=-1)

        return step

    def run(self, x: Tensor, h0: Tensor | None = None, recurrence: str | None = None) -> RecurrentRun:
        """The time loop with W applied by its factors (FFTs, reflections), never formed, layer by layer on
        complex states, each layer's factors and input projections of all steps computed once: as one
        autograd node (:func:`~spectral_analysis.nn.unitary_scan.unitary_scan`), or with
        ``recurrence="loop"`` as its reference, autograd through every step (:meth:`step_function` is the
        per-step view the analyzers use)."""
        self.check_input(x)
        if recurrence not in (None, "auto", "reflector", "loop"):
            raise ValueError(
                "the uRNN applies W by its factors, as one autograd node ('auto') or through every step "
                f"('loop'); recurrence {recurrence!r} is not available"
            )
        B = x.shape[0]
        h0 = self.start_state(B) if h0 is None else self.check_state(h0, B)
        layer_input, hidden = x, []
        for layer, (transition, b) in enumerate(zip(self.transitions, self.biases, strict=True)):
            factors, h = transition.factors(), complex_vector(h0[layer])
            if recurrence == "loop":
                states = []
                for u in complex_vector(self._input(layer, layer_input)).unbind(1):  # unbind: one gradient
                    h = modrelu(transition.apply_factors(h, *factors) + u, b)
                    states.append(h)
                H = torch.stack(states, dim=1)
            else:  # time-major inside the node: the input projected from (T, B, n_i), no copy of u
                u = complex_vector(self._input(layer, layer_input.transpose(0, 1)))
                H = unitary_scan(u, h, *factors, b, transition.permutation).transpose(0, 1)
            layer_input = real_vector(H)
            hidden.append(layer_input)
        final = torch.stack([H[:, -1] for H in hidden])
        return RecurrentRun(self.output, hidden, final)


def _zero_start_for_older_files(module: nn.Module, state: dict, prefix: str, *_: object) -> None:
    """Files saved before the uRNN learned its start state ran from ``h_0 = 0``: load them so."""
    key = prefix + "start_states"
    if key not in state and prefix + "transitions.0.thetas" in state:
        state[key] = torch.zeros_like(module.start_states)
