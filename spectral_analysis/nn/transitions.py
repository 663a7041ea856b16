"""Transition operators: the recurrent matrix W of Eq. 4 behind one interface.

Every transition is an ``nn.Module`` with ``matrix()`` (the dense ``n x n`` W, rebuilt from its
factors with the fast product and differentiable), ``singular_values()`` (descending; exact from
the structure where it gives them, ``torch.linalg.svdvals`` otherwise), ``singular_value_bound()``
(the largest singular value the structure allows, ``None`` if unbounded), ``parameter_count()``
(the papers' count of free parameters), ``structured_form()`` (the named factors) and
``apply_reference(h)`` (``W h`` by the paper's own per-step procedure).

- :class:`DenseTransition`: a free matrix (RNN: Gaussian init; IRNN: identity or orthogonal init).
- :class:`HouseholderTransition`: ``W = H_n(u_n) ... H_{n-m+1}(u_{n-m+1})`` (oRNN, Mhammedi et al.).
- :class:`SpectralTransition`: ``W = U diag(sigma) V^T`` with m1 + m2 reflectors (Eq. 6) and
  ``sigma = sigma_map(sigma_hat)`` (Eq. 7): Spectral-RNN.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
from torch import Tensor, nn

from spectral_analysis.linalg import (
    SigmaMap,
    normalize_reflectors,
    packed_reflector_product,
    reflector_loop,
    trapezoid_mask,
)
from spectral_analysis.nn.parametrize import (
    SVDParametrization,
    accept_legacy_names,
    constrain_,
    random_reflectors,
    reflector_length_sum,
    spectral_penalty,
    svd_factors,
    svd_parametrize,
    svd_singular_values,
)
from spectral_analysis.nn.time_loop import recurrence_scan
from spectral_analysis.vocabulary import DENSE_INITS


def _check_size(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"hidden size must be a positive integer, got {n!r}")
    return n


def _check_count(m: int | None, n: int, name: str) -> int:
    if m is None:
        return n
    if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m <= n:
        raise ValueError(f"{name}={m!r} reflectors must be an integer in [0, n={n}]")
    return m


class Transition(nn.Module, ABC):
    """The interface; subclasses implement :meth:`matrix` and the counts. ``structured_apply``: the
    ``auto`` time-loop route applies W through :meth:`apply_reference` instead of forming it."""

    size: int
    structured_apply: bool = False

    @abstractmethod
    def matrix(self) -> Tensor:
        """The dense ``n x n`` W, differentiable."""

    def singular_values(self) -> Tensor:
        """Singular values of W, descending; ``svdvals`` of the dense matrix unless overridden."""
        return torch.linalg.svdvals(self.matrix().detach())

    def singular_value_bound(self) -> float | None:
        """Largest singular value the structure allows (``None`` when unbounded)."""
        return None

    @abstractmethod
    def parameter_count(self) -> int:
        """Free parameters as the papers count them."""

    @abstractmethod
    def structured_form(self) -> dict[str, Tensor]:
        """The named factors W is built from."""

    def apply_reference(self, h: Tensor) -> Tensor:
        """``W h`` for ``h (..., n)`` by the structure's own per-step procedure."""
        return h @ self.matrix().mT

    def scan(self, xp: Tensor, h0: Tensor, activation: str, leak: float, graphs: bool = False) -> Tensor:
        """The ``scan`` time loop's hidden states ``(T, B, n)`` from ``xp (T, B, n)``: the dense scan on
        :meth:`matrix` (its loops replayed as CUDA graphs with ``graphs``), unless the structure has a
        faster scan of its own (KRU's Kronecker blocks)."""
        return recurrence_scan(xp, self.matrix(), h0, activation, leak, graphs=graphs)

    def spectral_penalty(self) -> Tensor:
        """Soft singular-value constraint to add to the loss (zero unless the structure has one)."""
        param = next(self.parameters())
        return param.new_zeros(())

    def constrain_(self) -> None:
        """Project the raw parameters back into their feasible set after an optimizer step."""


class DenseTransition(Transition):
    """A free ``n x n`` matrix. ``init``: ``gaussian`` (entries N(0, std^2), std = 1/sqrt(n) unless
    given), ``identity`` (IRNN, Le et al. 2015) or ``orthogonal`` (the ICML paper's IRNN)."""

    def __init__(self, n: int, init: str = "gaussian", std: float | None = None) -> None:
        super().__init__()
        self.size = _check_size(n)
        if init not in DENSE_INITS:
            raise ValueError(f"unknown dense init {init!r}; expected one of {DENSE_INITS}")
        if std is not None and not (math.isfinite(std) and std > 0):
            raise ValueError(f"init std must be a finite number > 0, got {std}")
        if init == "gaussian":
            weight = torch.randn(n, n) * (std if std is not None else n ** -0.5)
        elif init == "identity":
            weight = torch.eye(n)
        else:
            weight, r = torch.linalg.qr(torch.randn(n, n))
            weight = weight * torch.sign(torch.diagonal(r))  # Haar-distributed
        self.weight = nn.Parameter(weight)
        self.init = init

    def matrix(self) -> Tensor:
        return self.weight

    def parameter_count(self) -> int:
        return self.size * self.size

    def structured_form(self) -> dict[str, Tensor]:
        return {"weight": self.weight}


class HouseholderTransition(Transition):
    """oRNN: ``W = H_n(u_n) ... H_{n-m+1}(u_{n-m+1})``, orthogonal; parameters packed ``(n, m)``.
    ``unit_reflectors`` keeps the reflectors at unit length, as Spectral-RNN's option does (see
    :mod:`spectral_analysis.nn.parametrize`): W is unchanged, the optimizer's step on each direction
    is not."""

    def __init__(self, n: int, m: int | None = None, unit_reflectors: bool = False) -> None:
        super().__init__()
        self.size = _check_size(n)
        self.m = _check_count(m, n, "m")
        self.unit_reflectors = bool(unit_reflectors)
        reflectors = random_reflectors(n, self.m)
        self.reflectors = nn.Parameter(normalize_reflectors(reflectors) if unit_reflectors else reflectors)
        self.register_buffer("mask", trapezoid_mask(n, self.m, dtype=torch.float32), persistent=False)

    def _masked(self) -> Tensor:
        return self.reflectors * self.mask.to(self.reflectors.dtype)

    def matrix(self) -> Tensor:
        return packed_reflector_product(self._masked())

    def singular_values(self) -> Tensor:
        return torch.ones(self.size, dtype=self.reflectors.dtype, device=self.reflectors.device)

    def singular_value_bound(self) -> float:
        return 1.0

    def parameter_count(self) -> int:
        return reflector_length_sum(self.size, self.m)

    def structured_form(self) -> dict[str, Tensor]:
        return {"reflectors": self._masked()}

    def apply_reference(self, h: Tensor) -> Tensor:
        Y = self._masked()
        none = Y[:, :0]
        return reflector_loop(h, Y, torch.ones(self.size, dtype=Y.dtype, device=Y.device), none)

    @torch.no_grad()
    def constrain_(self) -> None:
        """The reflectors back to unit length where ``unit_reflectors`` is set (a no-op otherwise)."""
        if self.unit_reflectors:
            self.reflectors.copy_(normalize_reflectors(self.reflectors))


class SpectralTransition(Transition):
    """Spectral-RNN, Eq. 6: ``W = H_n(u_n)...H_k1(u_k1) diag(sigma) H_k2(v_k2)...H_n(v_n)``.

    ``weight`` is :func:`svd_parametrize`'d (the one SVD mechanism), initialized as Section 4 does:
    N(0, 1) reflector entries, ``sigma = sigma_map(sigma_raw)`` at ``sigma_star`` (Eq. 7 for the
    default sigmoid map); ``unit_reflectors`` keeps the reflectors at unit length (see
    :mod:`spectral_analysis.nn.parametrize`).
    """

    def __init__(self, n: int, m1: int | None = None, m2: int | None = None,
                 sigma_map: SigmaMap | None = None, unit_reflectors: bool = False) -> None:
        super().__init__()
        self.size = _check_size(n)
        m1, m2 = _check_count(m1, n, "m1"), _check_count(m2, n, "m2")
        self.weight = nn.Parameter(torch.zeros(n, n))
        svd_parametrize(self, "weight", m1, m2, sigma_map if sigma_map is not None else SigmaMap(), "random",
                        unit_reflectors=unit_reflectors)
        accept_legacy_names(self)
        self.m1, self.m2, self.sigma_map = m1, m2, self.svd.sigma_map

    @property
    def svd(self) -> SVDParametrization:
        """The parametrization of ``weight`` (the one SVD mechanism)."""
        return self.parametrizations.weight[0]

    def sigma(self) -> Tensor:
        """The diagonal of Eq. 6, ``sigma_map(sigma_raw)``."""
        return svd_factors(self)["sigma"]

    def matrix(self) -> Tensor:
        return self.weight

    def singular_values(self) -> Tensor:
        return svd_singular_values(self)

    def singular_value_bound(self) -> float | None:
        return self.svd.singular_value_bound()

    def parameter_count(self) -> int:
        """Section 4: the reflector lengths plus the n singular values."""
        return self.svd.parameter_count()

    def structured_form(self) -> dict[str, Tensor]:
        factors = svd_factors(self)
        return {name: factors[name] for name in ("u_reflectors", "v_reflectors", "sigma")}

    def apply_reference(self, h: Tensor) -> Tensor:
        form = self.structured_form()
        return reflector_loop(h, form["u_reflectors"], form["sigma"], form["v_reflectors"])

    def spectral_penalty(self) -> Tensor:
        return spectral_penalty(self)

    def constrain_(self) -> None:
        constrain_(self)
