"""The unitary RNN (Arjovsky et al. 2016), the baseline both main papers compare with.

``W = D3 R2 F^-1 D2 Pi R1 F D1`` on complex states: ``D_j = diag(exp(i theta_j))``, complex reflections
``R_j = I - 2 v_j v_j^H / ||v_j||^2``, a fixed permutation ``Pi`` and the unitary FFT ``F`` (7n real
parameters), in the modReLU net of :mod:`spectral_analysis.nn.modrelu_rnn` (learned ``h_0`` as in the
authors' code: from ``h_0 = 0``, pixel MNIST at n = 512 diverged, nan gradient, at its second step).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from spectral_analysis.linalg import complex_vector, real_matrix, real_vector
from spectral_analysis.nn.modrelu_rnn import ModReLURNN
from spectral_analysis.nn.transitions import Transition, _check_size
from spectral_analysis.nn.unitary_scan import unitary_product, unitary_scan


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

    def modrelu_scan(self, xp: Tensor, h0: Tensor, b: Tensor, graphs: bool = False) -> Tensor:
        """Real-form states ``(T, B, 2n)`` of ``h_t = modReLU(W h_(t-1) + xp_t, b)`` with W applied by its
        factors (:func:`~spectral_analysis.nn.unitary_scan.unitary_scan`); it has no CUDA graph route."""
        if graphs:
            raise ValueError("the uRNN's scan (W by FFTs, reflections and phases) has no recurrence='graph' "
                             "route; use 'scan'")
        H = unitary_scan(complex_vector(xp), complex_vector(h0), *self.factors(), b, self.permutation)
        return real_vector(H)


class UnitaryRNN(ModReLURNN):
    """uRNN: the modReLU net with :class:`UnitaryTransition` layers, real-form state of size 2n;
    ``input_std``: the input matrix's std (default ``1/sqrt(2 n_i)``; the authors' code draws it
    Glorot-uniform, std ``sqrt(2 / (n_i + 2n))``); ``embedding``: a word embedding that factors it
    (:mod:`~spectral_analysis.nn.input_matrix`)."""

    def __init__(
        self, input_size: int, n: int, output_size: int, output_bias: bool = True, num_layers: int = 1,
        input_std: float | None = None, embedding: int | None = None,
    ) -> None:
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be a positive integer, got {num_layers!r}")
        super().__init__([UnitaryTransition(n, seed=layer) for layer in range(num_layers)], input_size,
                         output_size, output_bias, input_std=input_std, embedding=embedding)
        self.register_load_state_dict_pre_hook(_zero_start_for_older_files)


def _zero_start_for_older_files(module: nn.Module, state: dict, prefix: str, *_: object) -> None:
    """Files saved before the uRNN learned its start state ran from ``h_0 = 0``: load them so."""
    key = prefix + "start_states"
    if key not in state and prefix + "transitions.0.thetas" in state:
        state[key] = torch.zeros_like(module.start_states)
