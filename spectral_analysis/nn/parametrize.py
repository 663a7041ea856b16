"""Put any weight of any module in SVD form (Eq. 6, 15) with ``torch.nn.utils.parametrize``.

``svd_parametrize(nn.Linear(64, 32), m1=8, m2=8, sigma_map=SigmaMap("sigmoid", 1.0, 0.1))``
replaces ``weight`` by ``U Sigma_hat V^T``: U, V products of m1 and m2 Householder reflectors,
``Sigma = sigma_map(sigma_hat)``. The three raw tensors are stored in
``module.parametrizations.weight.original0`` (U's packed reflectors, r x m1),
``original1`` (V's, c x m2) and ``original2`` (``sigma_hat``, length min(r, c)); the weight is
rebuilt from them at every access (blocked compact-WY product, backward by autograd).

Initialization comes from the weight's current value:
- ``init="exact"``: :func:`svd_decompose` with the given counts; raises ``ValueError`` saying
  why when the weight is not in the image of ``M_{k1,k2}`` or its singular values fall outside
  the sigma map's range.
- ``init="truncate"``: the full decomposition with only the first m1 (m2) reflectors kept, so
  the leading m1 - 1 left (m2 - 1 right) singular vectors are kept exactly (the paper's
  Lemma 1), and singular values clamped into the map's range.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from spectral_analysis.linalg import (
    SigmaMap,
    pack_reflectors,
    svd_compose_packed,
    svd_decompose,
    trapezoid_mask,
)

INIT_MODES = ("exact", "truncate")


class SVDParametrization(nn.Module):
    """``(Yu, Yv, sigma_hat) -> U Sigma_hat V^T`` for an ``r x c`` weight; see the module docstring."""

    def __init__(self, shape: tuple[int, int], m1: int | None = None, m2: int | None = None,
                 sigma_map: SigmaMap | None = None, init: str = "exact",
                 block_size: int | None = None) -> None:
        super().__init__()
        r, c = int(shape[0]), int(shape[1])
        p = min(r, c)
        self.shape = (r, c)
        self.m1 = p if m1 is None else int(m1)
        self.m2 = p if m2 is None else int(m2)
        if not 0 <= self.m1 <= r:
            raise ValueError(f"m1={self.m1} must lie in [0, {r}] for a {r} x {c} weight")
        if not 0 <= self.m2 <= c:
            raise ValueError(f"m2={self.m2} must lie in [0, {c}] for a {r} x {c} weight")
        if init not in INIT_MODES:
            raise ValueError(f"init must be one of {INIT_MODES}, got {init!r}")
        self.sigma_map = sigma_map if sigma_map is not None else SigmaMap("none")
        self.init = init
        self.block_size = block_size
        self.register_buffer("mask_u", trapezoid_mask(r, self.m1, dtype=torch.float32), persistent=False)
        self.register_buffer("mask_v", trapezoid_mask(c, self.m2, dtype=torch.float32), persistent=False)

    def forward(self, Yu: Tensor, Yv: Tensor, sigma_hat: Tensor) -> Tensor:
        sigma = self.sigma_map(sigma_hat)
        return svd_compose_packed(Yu * self.mask_u.to(Yu.dtype), Yv * self.mask_v.to(Yv.dtype),
                                  sigma, self.block_size)

    def singular_values(self, sigma_hat: Tensor) -> Tensor:
        """The singular values of the weight, exactly: ``|sigma_map(sigma_hat)|``."""
        return self.sigma_map(sigma_hat).abs()

    def penalty(self, sigma_hat: Tensor) -> Tensor:
        """The soft constraint ``||sigma - sigma*||^2`` for the ``none`` map, zero for the others."""
        if self.sigma_map.kind == "none":
            return self.sigma_map.penalty(sigma_hat)
        return sigma_hat.new_zeros(())

    def parameter_count(self) -> int:
        """Free parameters: the reflector lengths (paper's count) plus min(r, c) singular values."""
        return int(self.mask_u.sum() + self.mask_v.sum()) + min(self.shape)

    @torch.no_grad()
    def right_inverse(self, W: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if tuple(W.shape) != self.shape:
            raise ValueError(f"weight has shape {tuple(W.shape)}, parametrization expects {self.shape}")
        r, c = self.shape
        if self.init == "exact":
            u, v, sigma = svd_decompose(W.double(), self.m1, self.m2)
        else:
            u, v, sigma = svd_decompose(W.double())
            u, v = u[len(u) - self.m1:], v[len(v) - self.m2:]
            low, high = self.sigma_map.bounds
            margin = 1e-3 * (high - low) if self.sigma_map.kind == "sigmoid" else 0.0
            sigma = sigma.clamp(low + margin, high - margin)
        sigma_hat = self.sigma_map.inverse(sigma)
        Yu = pack_reflectors(u, r) if u else torch.zeros(r, 0, device=W.device)
        Yv = pack_reflectors(v, c) if v else torch.zeros(c, 0, device=W.device)
        return Yu.to(W.device, W.dtype), Yv.to(W.device, W.dtype), sigma_hat.to(W.device, W.dtype)


def svd_parametrize(module: nn.Module, name: str = "weight", m1: int | None = None,
                    m2: int | None = None, sigma_map: SigmaMap | None = None, init: str = "exact",
                    block_size: int | None = None) -> nn.Module:
    """Register an :class:`SVDParametrization` on ``module.<name>`` (a 2-D weight), in place."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"{type(module).__name__} has no tensor attribute {name!r}")
    if weight.dim() != 2:
        raise ValueError(f"{type(module).__name__}.{name} has shape {tuple(weight.shape)}; "
                         "the SVD parametrization needs a 2-D weight")
    param = SVDParametrization(tuple(weight.shape), m1, m2, sigma_map, init, block_size)
    parametrize.register_parametrization(module, name, param)
    return module


def svd_singular_values(module: nn.Module, name: str = "weight") -> Tensor:
    """Singular values of an SVD-parametrized weight, read off ``sigma_hat`` (no SVD computed)."""
    if not parametrize.is_parametrized(module, name):
        raise ValueError(f"{type(module).__name__}.{name} is not parametrized")
    plist = module.parametrizations[name]
    param = plist[0]
    if not isinstance(param, SVDParametrization):
        raise ValueError(f"{type(module).__name__}.{name} is not SVD-parametrized")
    return param.singular_values(plist.original2)
