"""Feed-forward nets of the depth experiment (Section 5, Fig. 5): MLP, ResNet and their SVD versions.

- MLP (Eq. 16): ``h_0 = phi(W_in x + b)``, ``h_l = phi(W_l h_{l-1} + b_l)`` for l = 1..L,
  ``y = W_out h_L``.
- ResNet: the same with the L hidden layers in L/2 residual blocks of two layers (He et al.
  2016), ``h <- phi(h + W_2 phi(W_1 h + b_1) + b_2)``.
- Spectral-MLP / Spectral-ResNet: every weight, rectangular ones included, is
  :class:`SpectralLinear`, ``W = U Sigma_hat V^T`` by Eq. 15 with ``min(r, c)`` reflectors on each
  side by default (Theorem 4: enough for every ``r x c`` matrix), singular values in the sigma
  map's range. With ``plain_ends`` the input and output layers are plain (the paper does not say
  which layers it constrains; constrained output weights bound the logits by ``(1 + r) ||h_L||``).

``num_layers`` counts the hidden layers L after the input layer (the paper's "L layers").
Plain weights are initialized N(0, 1/fan_in) (the papers sample Gaussian weights; for a square layer the
variance of TensorFlow's default Glorot initializer), biases 0; an MLP's or ResNet's with ``init = "he"``
N(0, g^2/fan_in), g the gain that keeps phi's output scale (He et al. 2015; ``nn.init.calculate_gain``).

Training composes the hidden SVD weights in one batched call (:func:`stacked_svd_weights`: every
hidden layer's reflectors stacked, one compact-WY product for all): a training step of the Fig. 5
nets is 1.3x faster than with L separate compositions (``benchmarks/feedforward_cpu.json``).
Evaluation without gradients reads each layer's ``weight``, which ``parametrize.cached()`` keeps for a
whole split. Tests hold the two routes together.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn

from spectral_analysis.linalg import SigmaMap
from spectral_analysis.nn.activations import activate, check_activation
from spectral_analysis.nn.arguments import check_positive_sizes
from spectral_analysis.nn.parametrize import (
    SVDParametrization,
    accept_legacy_names,
    constrain_,
    spectral_penalty,
    svd_parametrize,
    svd_singular_values,
)
from spectral_analysis.vocabulary import DEFAULT_LEAK, FEEDFORWARD_INITS


class SpectralLinear(nn.Linear):
    """``y = W x + b`` with ``W = U Sigma_hat V^T`` (Eq. 15): an ``nn.Linear`` whose ``weight`` is
    :func:`svd_parametrize`'d (m1 reflectors for U, m2 for V, Section 4's random initialization;
    ``unit_reflectors`` as there)."""

    def __init__(self, in_features: int, out_features: int, m1: int | None = None, m2: int | None = None,
                 sigma_map: SigmaMap | None = None, bias: bool = True, unit_reflectors: bool = False) -> None:
        super().__init__(in_features, out_features, bias=bias)
        p = min(in_features, out_features)
        m1, m2 = (p if m is None else min(m, p) for m in (m1, m2))
        svd_parametrize(self, "weight", m1, m2, sigma_map if sigma_map is not None else SigmaMap(), "random",
                        unit_reflectors=unit_reflectors)
        accept_legacy_names(self)
        if bias:
            nn.init.zeros_(self.bias)
        self.m1, self.m2, self.sigma_map = m1, m2, self.svd.sigma_map

    @property
    def svd(self) -> SVDParametrization:
        """The parametrization of ``weight`` (the one SVD mechanism)."""
        return self.parametrizations.weight[0]

    def singular_values(self) -> Tensor:
        return svd_singular_values(self)

    def weight_parameter_count(self) -> int:
        return self.svd.parameter_count()


def _svd_signature(layer: nn.Module) -> tuple | None:
    if not isinstance(layer, SpectralLinear):
        return None
    svd = layer.svd
    return svd.shape, svd.m1, svd.m2, svd.sigma_map, svd.block_size


def stacked_svd_weights(layers: list[nn.Module]) -> Tensor | None:
    """The weights ``(L, r, c)`` of ``layers`` composed in one batched call of their SVD parametrization
    (Eq. 15 for each, reflectors and singular values stacked); ``None`` unless every layer is a
    :class:`SpectralLinear` of one shape, reflector counts and sigma map."""
    signatures = {_svd_signature(layer) for layer in layers}
    if not layers or None in signatures or len(signatures) > 1:
        return None
    raw = [layer.parametrizations.weight for layer in layers]
    return layers[0].svd(*(torch.stack([getattr(p, f"original{k}") for p in raw]) for k in range(3)))


def plain_linear(in_features: int, out_features: int, bias: bool = True, gain: float = 1.0) -> nn.Linear:
    """An ``nn.Linear`` with weights N(0, gain^2 / fan_in) and a zero bias."""
    layer = nn.Linear(in_features, out_features, bias=bias)
    nn.init.normal_(layer.weight, std=gain * in_features ** -0.5)
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


def initial_gain(init: str, activation: str, leak: float) -> float:
    """The plain weights' gain for ``init`` (:data:`~spectral_analysis.vocabulary.FEEDFORWARD_INITS`): 1
    for ``lecun``; for ``he``, the one that keeps ``phi``'s output scale through a layer (He et al. 2015),
    ``sqrt(2 / (1 + leak^2))`` for the leaky ReLU. Example: ``initial_gain("he", "relu", 0.0)`` is
    ``sqrt(2)``."""
    if init not in FEEDFORWARD_INITS:
        raise ValueError(f"unknown feed-forward init {init!r}; expected one of {FEEDFORWARD_INITS}")
    check_activation(activation, leak)
    if init == "lecun":
        return 1.0
    if activation == "leaky_relu":
        return nn.init.calculate_gain("leaky_relu", leak)
    return nn.init.calculate_gain(activation if activation in ("relu", "tanh") else "linear")


def _weight_count(layer: nn.Module) -> int:
    return layer.weight_parameter_count() if isinstance(layer, SpectralLinear) else layer.weight.numel()


class FeedForwardNet(nn.Module):
    """MLP (``residual=False``) or ResNet (``residual=True``); ``make_linear(in, out, bias)`` builds
    each hidden layer (``nn.Linear`` or :class:`SpectralLinear`), ``make_end_linear`` the input and
    output layers (default: ``make_linear``)."""

    def __init__(self, input_size: int, hidden_size: int, output_size: int, num_layers: int = 2,
                 activation: str = "leaky_relu", leak: float = DEFAULT_LEAK, residual: bool = False,
                 output_bias: bool = True,
                 make_linear: Callable[[int, int, bool], nn.Module] = plain_linear,
                 make_end_linear: Callable[[int, int, bool], nn.Module] | None = None) -> None:
        super().__init__()
        check_positive_sizes(input_size=input_size, hidden_size=hidden_size, output_size=output_size)
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 0:
            raise ValueError(f"num_layers must be an integer >= 0, got {num_layers!r}")
        if residual and num_layers % 2:
            raise ValueError(f"a ResNet arranges its hidden layers in blocks of two: num_layers must be "
                             f"even, got {num_layers}")
        check_activation(activation, leak)
        self.input_size, self.hidden_size, self.output_size = input_size, hidden_size, output_size
        self.num_layers, self.residual = num_layers, residual
        self.activation, self.leak = activation, float(leak)
        make_end_linear = make_end_linear or make_linear
        self.input_layer = make_end_linear(input_size, hidden_size, True)
        self.hidden_layers = nn.ModuleList([make_linear(hidden_size, hidden_size, True)
                                            for _ in range(num_layers)])
        self.output = make_end_linear(hidden_size, output_size, output_bias)

    def _phi(self, z: Tensor) -> Tensor:
        return activate(z, self.activation, self.leak)

    def forward(self, x: Tensor, return_hidden: bool = False):
        """``x (B, n_i)`` -> ``(B, n_y)``; with ``return_hidden`` also the hidden activations
        ``(L + 1, B, n)`` after the input layer and after every hidden layer (or block)."""
        if not isinstance(x, Tensor) or x.dim() != 2 or x.shape[-1] != self.input_size:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"expected input of shape (batch, {self.input_size}), got {shape}")
        h = self._phi(self.input_layer(x))
        hidden = [h]
        linears = self._hidden_linears()
        if self.residual:
            for first, second in zip(linears[::2], linears[1::2], strict=True):
                h = self._phi(h + second(self._phi(first(h))))
                hidden.append(h)
        else:
            for linear in linears:
                h = self._phi(linear(h))
                hidden.append(h)
        y = self.output(h)
        return (y, torch.stack(hidden)) if return_hidden else y

    def _hidden_linears(self) -> list[Callable[[Tensor], Tensor]]:
        """The hidden layers as maps ``h -> W h + b``: with gradients on, SVD weights from
        :func:`stacked_svd_weights` (one batched composition); else each layer itself."""
        layers = list(self.hidden_layers)
        weights = stacked_svd_weights(layers) if torch.is_grad_enabled() else None
        if weights is None:
            return layers
        return [partial(nn.functional.linear, weight=W, bias=layer.bias)
                for W, layer in zip(weights.unbind(0), layers, strict=True)]

    def weight_matrices(self) -> list[Tensor]:
        """Dense weights: input layer, hidden layers, output layer."""
        return [layer.weight for layer in (self.input_layer, *self.hidden_layers, self.output)]

    def singular_values(self) -> list[Tensor]:
        """Per weight (same order as :meth:`weight_matrices`): exact from sigma for spectral layers."""
        return [layer.singular_values() if isinstance(layer, SpectralLinear)
                else torch.linalg.svdvals(layer.weight.detach())
                for layer in (self.input_layer, *self.hidden_layers, self.output)]

    def spectral_penalty(self) -> Tensor:
        return spectral_penalty(self)

    def constrain_(self) -> None:
        constrain_(self)

    def parameter_counts(self) -> dict[str, int]:
        """``transition``: the hidden-to-hidden weights (the depth); ``input``/``output``: the first and
        last weights; ``bias``: every bias."""
        layers = (self.input_layer, *self.hidden_layers, self.output)
        counts = {"transition": sum(_weight_count(layer) for layer in self.hidden_layers),
                  "input": _weight_count(self.input_layer),
                  "output": _weight_count(self.output),
                  "bias": sum(layer.bias.numel() for layer in layers if layer.bias is not None)}
        counts["total"] = sum(counts.values())
        return counts
