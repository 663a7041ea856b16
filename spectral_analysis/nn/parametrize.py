"""The one SVD mechanism: any 2-D weight of any module in SVD form (Eq. 6, 15) with one call.

``svd_parametrize(rnn, "weight_hh_l0", m1=16, m2=16, sigma=(1.0, 0.1))`` replaces the weight by
``U diag(sigma) V^T`` through ``torch.nn.utils.parametrize``: U, V products of m1 and m2 Householder
reflectors, ``sigma = sigma_map(sigma_raw)`` in ``[sigma* - r, sigma* + r]`` (Eq. 7, sigmoid map by
default). The weight is rebuilt from its factors at every access (blocked compact-WY product,
backward by autograd); the Spectral-RNN transition and the Spectral-MLP layers are this mechanism.

The three raw tensors are ``parametrizations.<name>.original0`` (U's packed reflectors, r x m1),
``original1`` (V's, c x m2) and ``original2`` (``sigma_raw``, length min(r, c)), PyTorch's own names, in
memory and in the state dict alike, so ``load_state_dict``, ``torch.func.functional_call`` and
safetensors see the parameters ``named_parameters()`` lists. Files written by spectral-analysis 0.1,
which saved them as ``u_reflectors``, ``v_reflectors``, ``sigma_raw``, still load.
:func:`svd_factors` reads them by what they hold.

Initialization (``init``):
- ``"truncate"`` (default): the full decomposition of the current weight with only the first m1
  (m2) reflectors kept, so the leading m1 - 1 left (m2 - 1 right) singular vectors are exact (the
  paper's Lemma 1), and singular values clamped into the map's range; works on any weight.
- ``"exact"``: :func:`svd_decompose` with the given counts; ``ValueError`` saying why when the weight
  is not in the image of ``M_{k1,k2}`` or its singular values fall outside the map's range.
- ``"random"``: Section 4's initialization, N(0, 1) reflector entries and every singular value at
  ``sigma*``; the current weight is ignored.
Assigning ``module.<name> = W`` later decomposes ``W`` by ``truncate`` (``exact`` if chosen). Where
``truncate`` changes an existing weight (singular values outside the band, fewer reflectors than a full
factorization needs), :func:`svd_parametrize` warns with the relative change.

Constraints: the sigmoid map keeps sigma in range by construction; the ``clip`` map needs
:func:`constrain_` after each optimizer step (the trainer calls it); the ``none`` map adds
:func:`spectral_penalty` ``||sigma - sigma*||^2`` to the loss.

``unit_reflectors=True`` keeps every packed reflector at unit length (a zero one, the identity, stays
zero): set so at initialization and projected back by :func:`constrain_` after each optimizer step, as
the authors' released code does after each Adam step (``l2_normalize`` of the Householder variables,
``rnn.py``). ``H(u)`` depends only on the
direction of ``u`` (Eq. 1), so W is unchanged; what changes is the step an optimizer takes on that
direction, which grows as ``1 / ||u||`` (a reflector drawn with N(0, 1) entries is about ``sqrt(n)`` long).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from spectral_analysis.linalg import (
    SigmaMap,
    normalize_reflectors,
    pack_reflectors,
    svd_compose_packed,
    svd_decompose,
    trapezoid_mask,
)
from spectral_analysis.nn.cuda_graphs import graphed_function

INIT_MODES = ("truncate", "exact", "random")
GRAPHED_DEVICE_TYPES = ("cuda",)
"""Where :func:`graph_weight_formation` replays W's formation: CUDA graphs exist on CUDA devices only (the
CPU tests stand the capture in by a twin and add the CPU here)."""
SAVED_NAMES = ("u_reflectors", "v_reflectors", "sigma_raw")
SigmaSpec = SigmaMap | tuple[float, float] | None


def as_sigma_map(sigma: SigmaSpec) -> SigmaMap:
    """``(sigma_star, r)`` -> the sigmoid map on ``[sigma* - r, sigma* + r]``; ``None`` -> no constraint."""
    if isinstance(sigma, SigmaMap):
        return sigma
    if sigma is None:
        return SigmaMap("none")
    if isinstance(sigma, tuple | list) and len(sigma) == 2:
        return SigmaMap("sigmoid", float(sigma[0]), float(sigma[1]))
    raise ValueError(f"sigma must be (sigma_star, r), a SigmaMap or None, got {sigma!r}")


def random_reflectors(n: int, m: int) -> Tensor:
    """Packed ``(n, m)`` reflectors with N(0, 1) entries on the trapezoid, zeros above it."""
    Y = torch.randn(n, m)
    return Y * trapezoid_mask(n, m, dtype=Y.dtype)


def reflector_length_sum(n: int, m: int) -> int:
    """Free parameters of m reflectors u_n, ..., u_{n-m+1}: ``n + (n-1) + ... = m n - m(m-1)/2``."""
    return m * n - m * (m - 1) // 2


class SVDParametrization(nn.Module):
    """``(Yu, Yv, sigma_raw) -> U diag(sigma_map(sigma_raw)) V^T`` for an ``r x c`` weight."""

    def __init__(self, shape: tuple[int, int], m1: int | None = None, m2: int | None = None,
                 sigma_map: SigmaMap | None = None, init: str = "truncate",
                 block_size: int | None = None, unit_reflectors: bool = False) -> None:
        super().__init__()
        r, c = int(shape[0]), int(shape[1])
        p = min(r, c)
        self.shape = (r, c)
        self.m1 = p if m1 is None else m1
        self.m2 = p if m2 is None else m2
        for name, m, side in (("m1", self.m1, r), ("m2", self.m2, c)):
            if isinstance(m, bool) or not isinstance(m, int) or not 0 <= m <= side:
                raise ValueError(f"{name}={m!r} reflectors must be an integer in [0, {side}] for a "
                                 f"{r} x {c} weight")
        if init not in INIT_MODES:
            raise ValueError(f"init must be one of {INIT_MODES}, got {init!r}")
        self.sigma_map = sigma_map if sigma_map is not None else SigmaMap("none")
        self.init = init
        self.block_size = block_size
        self.unit_reflectors = bool(unit_reflectors)
        self.register_buffer("mask_u", trapezoid_mask(r, self.m1, dtype=torch.float32), persistent=False)
        self.register_buffer("mask_v", trapezoid_mask(c, self.m2, dtype=torch.float32), persistent=False)
        self.graph_formation = False  # graph_weight_formation
        self._formation_graph: tuple[tuple, Callable[..., Tensor]] | None = None

    def forward(self, Yu: Tensor, Yv: Tensor, sigma_raw: Tensor) -> Tensor:
        raw = (Yu, Yv, sigma_raw)
        if self.graph_formation and self._graphable(raw):
            return self._replayed(raw)
        return self.compose(*raw)

    def compose(self, Yu: Tensor, Yv: Tensor, sigma_raw: Tensor) -> Tensor:
        """Eq. 15 on the raw tensors: the masked reflectors and ``sigma_map(sigma_raw)`` composed."""
        return svd_compose_packed(Yu * self.mask_u.to(Yu.dtype), Yv * self.mask_v.to(Yv.dtype),
                                  self.sigma_map(sigma_raw), self.block_size)

    def _graphable(self, raw: tuple[Tensor, ...]) -> bool:
        """Replayed only for the module's own parameters (a ``functional_call``'s tensors are formed
        eagerly: a graph reads its inputs where it captured them), all trained, under autograd, on CUDA."""
        device = raw[0].device.type
        return (device in GRAPHED_DEVICE_TYPES and torch.is_grad_enabled()
                and not torch.is_autocast_enabled(device)
                and all(isinstance(t, nn.Parameter) and t.requires_grad and t.numel() for t in raw))

    def _replayed(self, raw: tuple[Tensor, ...]) -> Tensor:
        key = tuple((t.data_ptr(), t.shape, t.dtype, t.device) for t in raw)
        if self._formation_graph is None or self._formation_graph[0] != key:  # first use, or moved
            self._formation_graph = None
            try:
                self._formation_graph = (key, graphed_function(self.compose, *raw))
            except (RuntimeError, AssertionError) as error:
                r, c = self.shape
                why = (f"capturing the formation of a {r} x {c} W as a CUDA graph failed ({error}); "
                       f"graph_weight_formation(model, False) forms it eagerly")
                raise RuntimeError(why) from error
        return self._formation_graph[1](*raw)

    def singular_values(self, sigma_raw: Tensor) -> Tensor:
        """The singular values of the weight, exactly, descending: ``|sigma_map(sigma_raw)|``."""
        return self.sigma_map(sigma_raw).abs().sort(descending=True).values

    def singular_value_bound(self) -> float | None:
        """The largest singular value the map allows (``None`` for the unconstrained ``none`` map)."""
        if self.sigma_map.kind == "none":
            return None
        return max(abs(b) for b in self.sigma_map.bounds)

    def penalty(self, sigma_raw: Tensor) -> Tensor:
        """The soft constraint ``||sigma - sigma*||^2`` for the ``none`` map, zero for the others."""
        if self.sigma_map.kind == "none":
            return self.sigma_map.penalty(sigma_raw)
        return sigma_raw.new_zeros(())

    def parameter_count(self) -> int:
        """Free parameters (Section 4): the reflector lengths plus min(r, c) singular values."""
        r, c = self.shape
        return reflector_length_sum(r, self.m1) + reflector_length_sum(c, self.m2) + min(r, c)

    @torch.no_grad()
    def right_inverse(self, W: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if tuple(W.shape) != self.shape:
            raise ValueError(f"weight has shape {tuple(W.shape)}, parametrization expects {self.shape}")
        if W.device.type != "meta" and not torch.isfinite(W).all():  # a meta weight has no values to check
            raise ValueError("the weight holds NaN or inf; it has no SVD form")
        r, c = self.shape
        if self.init == "random":
            Yu, Yv = random_reflectors(r, self.m1), random_reflectors(c, self.m2)
            sigma_raw = self.sigma_map.inverse(torch.full((min(r, c),), self.sigma_map.sigma_star))
            return self._packed(Yu, Yv, sigma_raw, W)
        if self.init == "exact":
            u, v, sigma = svd_decompose(W.double(), self.m1, self.m2)
        else:
            u, v, sigma = svd_decompose(W.double())
            u, v = u[len(u) - self.m1:], v[len(v) - self.m2:]
            low, high = self.sigma_map.bounds
            margin = 1e-3 * (high - low) if self.sigma_map.kind == "sigmoid" else 0.0
            sigma = sigma.clamp(low + margin, high - margin)
        sigma_raw = self.sigma_map.inverse(sigma)
        Yu = pack_reflectors(u, r) if u else torch.zeros(r, 0)
        Yv = pack_reflectors(v, c) if v else torch.zeros(c, 0)
        return self._packed(Yu, Yv, sigma_raw, W)

    def _packed(self, Yu: Tensor, Yv: Tensor, sigma_raw: Tensor, W: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The raw tensors on ``W``'s device and dtype, reflectors at unit length if so chosen."""
        Yu, Yv, sigma_raw = (t.to(W.device, W.dtype) for t in (Yu, Yv, sigma_raw))
        if self.unit_reflectors:
            Yu, Yv = normalize_reflectors(Yu), normalize_reflectors(Yv)
        return Yu, Yv, sigma_raw


def _load_with_names(plist: nn.Module, state_dict: dict, prefix: str, *_: object) -> None:
    """Read a file of spectral-analysis 0.1, whose state dicts named the raw tensors ``SAVED_NAMES``."""
    for i, name in enumerate(SAVED_NAMES):
        if prefix + name in state_dict:
            state_dict[f"{prefix}original{i}"] = state_dict.pop(prefix + name)


def svd_parametrize(module: nn.Module, name: str = "weight", m1: int | None = None,
                    m2: int | None = None, sigma: SigmaSpec = (1.0, 0.1), init: str = "truncate",
                    block_size: int | None = None, unit_reflectors: bool = False) -> nn.Module:
    """Put ``module.<name>`` (a 2-D weight) in SVD form, in place; returns ``module``.

    ``m1``, ``m2``: reflectors of U and V (default min(r, c), enough for every matrix, Theorem 4);
    ``sigma``: ``(sigma_star, r)`` for the sigmoid range, a :class:`SigmaMap`, or ``None``;
    ``init``, ``unit_reflectors``: see the module docstring.

    ```python
    >>> import torch
    >>> layer = svd_parametrize(torch.nn.Linear(6, 4), sigma=(1.0, 0.05), init="random")
    >>> s = torch.linalg.svdvals(layer.weight.detach())
    >>> bool(s.min() >= 0.95 - 1e-6 and s.max() <= 1.05 + 1e-6)
    True

    ```
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"{type(module).__name__} has no tensor attribute {name!r}")
    if weight.dim() != 2:
        raise ValueError(f"{type(module).__name__}.{name} has shape {tuple(weight.shape)}; "
                         "the SVD parametrization needs a 2-D weight")
    if parametrize.is_parametrized(module, name):
        raise ValueError(f"{type(module).__name__}.{name} is already parametrized")
    param = SVDParametrization(tuple(weight.shape), m1, m2, as_sigma_map(sigma), init, block_size,
                               unit_reflectors)
    before = weight.detach().clone()
    parametrize.register_parametrization(module, name, param)
    if init == "random":
        param.init = "truncate"
    else:
        _warn_if_moved(module, name, param, before)
    module.parametrizations[name].register_load_state_dict_pre_hook(_load_with_names)
    return module


MOVED_TOLERANCE = 1e-4  # relative Frobenius change a float32 round trip stays well under


def _warn_if_moved(module: nn.Module, name: str, param: SVDParametrization, before: Tensor) -> None:
    """Warn when the SVD form is not the weight it replaced, and say why."""
    after = getattr(module, name).detach()
    scale = float(before.norm())
    change = float((after - before).norm()) / scale if scale > 0 else float(after.norm())
    if change <= MOVED_TOLERANCE:
        return
    sigma = torch.linalg.svdvals(before.double())
    low, high = param.sigma_map.bounds
    reasons = []
    if param.sigma_map.kind != "none" and (sigma.min() < low or sigma.max() > high):
        reasons.append(f"its singular values [{float(sigma.min()):.3g}, {float(sigma.max()):.3g}] were "
                       f"clamped into the band [{low:.3g}, {high:.3g}] (sigma=None keeps them)")
    if min(param.m1, param.m2) < min(param.shape):
        reasons.append(f"m1={param.m1}, m2={param.m2} reflectors, fewer than min(r, c) = {min(param.shape)}, "
                       "keep only the leading singular vectors (Lemma 1)")
    owner = type(module).__name__.removeprefix("Parametrized")
    warnings.warn(f"svd_parametrize changed {owner}.{name} by {change:.3g} (relative "
                  f"Frobenius norm): {'; '.join(reasons) or 'its SVD form differs'}", stacklevel=3)


def _svd_parametrization(module: nn.Module, name: str) -> tuple[SVDParametrization, nn.Module]:
    if not parametrize.is_parametrized(module, name):
        raise ValueError(f"{type(module).__name__}.{name} is not parametrized")
    plist = module.parametrizations[name]
    if not isinstance(plist[0], SVDParametrization):
        raise ValueError(f"{type(module).__name__}.{name} is not SVD-parametrized")
    return plist[0], plist


def svd_factors(module: nn.Module, name: str = "weight") -> dict[str, Tensor]:
    """The factors of an SVD-parametrized weight by name: masked ``u_reflectors``, ``v_reflectors``,
    ``sigma_raw`` and ``sigma`` (the diagonal of Eq. 6, differentiable).

    ```python
    >>> import torch
    >>> factors = svd_factors(svd_parametrize(torch.nn.Linear(3, 5)))
    >>> sorted(factors), tuple(factors["sigma"].shape)
    (['sigma', 'sigma_raw', 'u_reflectors', 'v_reflectors'], (3,))

    ```
    """
    param, plist = _svd_parametrization(module, name)
    Yu, Yv, raw = plist.original0, plist.original1, plist.original2
    return {"u_reflectors": Yu * param.mask_u.to(Yu.dtype), "v_reflectors": Yv * param.mask_v.to(Yv.dtype),
            "sigma_raw": raw, "sigma": param.sigma_map(raw)}


def svd_singular_values(module: nn.Module, name: str = "weight") -> Tensor:
    """Singular values of an SVD-parametrized weight, descending, read off ``sigma_raw`` (no SVD)."""
    param, plist = _svd_parametrization(module, name)
    return param.singular_values(plist.original2.detach())


def svd_parametrizations(model: nn.Module) -> Iterator[tuple[nn.Module, str, SVDParametrization]]:
    """Every SVD-parametrized weight in ``model``: ``(owner module, tensor name, parametrization)``."""
    for module in model.modules():
        if parametrize.is_parametrized(module):
            for name, plist in module.parametrizations.items():
                if isinstance(plist[0], SVDParametrization):
                    yield module, name, plist[0]


def spectral_penalty(model: nn.Module) -> Tensor:
    """Sum of ``||sigma - sigma*||^2`` over the weights with the ``none`` map (zero for the others)."""
    terms = [param.penalty(module.parametrizations[name].original2)
             for module, name, param in svd_parametrizations(model)]
    if terms:
        return torch.stack(terms).sum()
    return next(model.parameters()).new_zeros(())


@torch.no_grad()
def constrain_(model: nn.Module) -> nn.Module:
    """Project every SVD weight's ``sigma_raw`` into its map's range (the ``clip`` map needs this after
    each optimizer step; the sigmoid map is in range by construction), and its reflectors back to unit
    length where ``unit_reflectors`` is set."""
    for module, name, param in svd_parametrizations(model):
        raw = module.parametrizations[name]
        param.sigma_map.project_(raw.original2)
        if param.unit_reflectors:
            raw.original0.copy_(normalize_reflectors(raw.original0))
            raw.original1.copy_(normalize_reflectors(raw.original1))
    return model


def graph_weight_formation(model: nn.Module, enabled: bool = True) -> nn.Module:
    """Form every SVD weight of ``model`` on a GPU by replaying its formation from the reflectors, forward
    and backward, as CUDA graphs (:func:`~spectral_analysis.nn.cuda_graphs.graphed_function`), captured at
    the first training forward and again when the parameters move: the eager formation is a few dozen
    kernel launches a step, which the host, not the GPU, takes its time over. Evaluation (no autograd),
    the CPU and tensors other than the module's own parameters (``torch.func.functional_call``) form W
    eagerly. ``enabled=False`` drops the graphs.

    >>> from spectral_analysis.nn import build_model
    >>> model = graph_weight_formation(build_model("spectral", 1, 8, 2, m1=2, m2=2))
    """
    for _, _, param in svd_parametrizations(model):
        param.graph_formation, param._formation_graph = enabled, None
    return model


LEGACY_NAMES = ("u_reflectors", "v_reflectors", "sigma_hat")


def accept_legacy_names(owner: nn.Module, name: str = "weight") -> None:
    """Let ``owner`` load files written before the one mechanism, which kept the factors as its own
    parameters ``u_reflectors``, ``v_reflectors``, ``sigma_hat``."""
    def hook(module: nn.Module, state_dict: dict, prefix: str, *_: object) -> None:
        for old, new in zip(LEGACY_NAMES, SAVED_NAMES, strict=True):
            if prefix + old in state_dict:
                state_dict[f"{prefix}parametrizations.{name}.{new}"] = state_dict.pop(prefix + old)

    owner.register_load_state_dict_pre_hook(hook)
