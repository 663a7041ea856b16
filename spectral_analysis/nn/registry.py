"""Named models: ``build_model(name, input_size, hidden_size, output_size, **options)``.

For ``kru`` with ``complex=True`` and for ``urnn``, ``hidden_size`` is the number N of complex units; the
net runs on their real form, so ``model.hidden_size`` is 2N (see :mod:`spectral_analysis.nn.peer_transitions`
and :mod:`spectral_analysis.nn.urnn`). ``kru`` with ``activation="modrelu"`` is the modReLU net of
:mod:`spectral_analysis.nn.modrelu_rnn`, as the uRNN is.

Every option has a default, listed in :data:`MODEL_OPTIONS`; an option a model does not take is an
error that names the accepted ones. The built model carries ``model.config`` (name, sizes and every
resolved option), from which :func:`build_model` rebuilds the same architecture (checkpoints use it).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import nn

from spectral_analysis.linalg import SigmaMap
from spectral_analysis.nn.feedforward import FeedForwardNet, SpectralLinear, initial_gain, plain_linear
from spectral_analysis.nn.gru import GRUNet
from spectral_analysis.nn.lstm import LSTMNet
from spectral_analysis.nn.modrelu_rnn import ModReLURNN
from spectral_analysis.nn.peer_transitions import GivensSVDTransition, GivensTransition, KroneckerTransition
from spectral_analysis.nn.recurrent import RecurrentNet
from spectral_analysis.nn.transitions import DenseTransition, HouseholderTransition, SpectralTransition
from spectral_analysis.nn.urnn import UnitaryRNN
from spectral_analysis.vocabulary import MODEL_NAMES, MODEL_OPTIONS, MODRELU

MAX_LAYERS = 1000  # layers of one model
MAX_PARAMETERS = 10 ** 8  # weights of one model: 400 MB in float32, under 2 GB with Adam's moments


def resolve_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """Defaults of ``name`` updated with ``options``; ``ValueError`` for an unknown name or option."""
    if name not in MODEL_OPTIONS:
        raise ValueError(f"unknown model {name!r}; expected one of {MODEL_NAMES}")
    accepted = MODEL_OPTIONS[name]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"model {name!r} does not take option(s) {unknown}; it accepts {sorted(accepted)}")
    return {**accepted, **options}


def _build(name: str, ni: int, n: int, ny: int, o: dict[str, Any]) -> nn.Module:
    if name == "urnn":
        return UnitaryRNN(ni, n, ny, o["output_bias"], o["num_layers"], o["input_std"], o["embedding"])
    if name == "lstm":
        return LSTMNet(ni, n, ny, o["num_layers"], o["forget_bias"], o["recurrence"], o["output_bias"],
                       o["dropout"], o["dropout_kind"], o["input_std"], o["init"], o["embedding"])
    if name == "gru":
        return GRUNet(ni, n, ny, o["num_layers"], o["recurrence"], o["output_bias"], o["dropout"],
                      o["dropout_kind"], o["input_std"], o["embedding"])
    if name in ("mlp", "resnet", "spectral-mlp", "spectral-resnet"):
        if name in ("mlp", "resnet"):
            gain = initial_gain(o["init"], o["activation"], o["leak"])
            make_linear = {"make_linear": partial(plain_linear, gain=gain)}
        else:
            sigma_map = SigmaMap(o["sigma_map"], o["sigma_star"], o["r"])

            def spectral_linear(i: int, j: int, bias: bool) -> SpectralLinear:
                return SpectralLinear(i, j, o["m1"], o["m2"], sigma_map, bias, o["unit_reflectors"])
            make_linear = {"make_linear": spectral_linear,
                           "make_end_linear": plain_linear if o["plain_ends"] else spectral_linear}
        return FeedForwardNet(ni, n, ny, o["num_layers"], o["activation"], o["leak"],
                              residual=name.endswith("resnet"), output_bias=o["output_bias"], **make_linear)
    layers = o["num_layers"]
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise ValueError(f"num_layers must be a positive integer, got {layers!r}")
    if name in ("rnn", "irnn"):
        transitions = [DenseTransition(n, o["init"], o.get("init_std")) for _ in range(layers)]
    elif name == "ornn":
        transitions = [HouseholderTransition(n, o["m"], o["unit_reflectors"]) for _ in range(layers)]
    elif name == "kru":
        sizes = o["factor_sizes"]
        transitions = [KroneckerTransition(n, None if sizes is None else list(sizes), bool(o["complex"]))
                       for _ in range(layers)]
        if o["activation"] == MODRELU:
            if not o["complex"] or o["dropout"]:
                raise ValueError("KRU's modReLU acts on complex units (complex=True), without dropout")
            return ModReLURNN(transitions, ni, ny, o["output_bias"], o["recurrence"], o["input_std"],
                             o["embedding"])
    elif name == "dizzy":
        kind = GivensSVDTransition if o["svd"] else GivensTransition
        transitions = [kind(n, o["rotations"]) for _ in range(layers)]
    else:
        sigma_map = SigmaMap(o["sigma_map"], o["sigma_star"], o["r"])
        transitions = [SpectralTransition(n, o["m1"], o["m2"], sigma_map, o["unit_reflectors"])
                       for _ in range(layers)]
    return RecurrentNet(transitions, ni, ny, o["activation"], o["leak"], o["recurrence"], o["output_bias"],
                        o["input_std"], o["dropout"], o["dropout_kind"], o.get("bias_pair", False),
                        o["embedding"])


def build_model(name: str, input_size: int, hidden_size: int, output_size: int, **options: Any) -> nn.Module:
    """A registered model (see :data:`MODEL_NAMES`) with its options; sets ``model.config``.

    ```python
    >>> import torch
    >>> model = build_model("spectral", 1, 32, 1, m1=8, m2=8, r=0.01)
    >>> options = model.config["options"]
    >>> tuple(model(torch.randn(4, 10, 1)).shape), options.get("r")
    ((4, 10, 1), 0.01)

    ```
    """
    resolved = resolve_options(name, options)
    layers = resolved.get("num_layers", 1)
    if not isinstance(layers, int) or isinstance(layers, bool) or not 0 <= layers <= MAX_LAYERS:
        # 0: a feed-forward net with no hidden layer; a recurrent model refuses it itself
        raise ValueError(f"num_layers must be an integer in [0, {MAX_LAYERS}], got {layers!r}")
    # no model of the registry has more than 8 L (n + 1) (n + n_i + n_y + 1) weights (an LSTM has 4 gates,
    # a uRNN 2n real units); only one that could exceed the limit is counted exactly, on the meta device
    ceiling = 8 * max(layers, 1) * (hidden_size + 1) * (hidden_size + input_size + output_size + 1)
    if ceiling > MAX_PARAMETERS and torch.get_default_device().type != "meta":
        with torch.device("meta"):
            size = sum(t.numel() for t in _build(name, input_size, hidden_size, output_size,
                                                 resolved).state_dict().values())
        if size > MAX_PARAMETERS:
            raise ValueError(f"a {name} with input {input_size}, hidden {hidden_size}, output {output_size} "
                             f"and these options has {size} weights, more than the {MAX_PARAMETERS} built")
    model = _build(name, input_size, hidden_size, output_size, resolved)
    model.config = {"name": name, "input_size": input_size, "hidden_size": hidden_size,
                    "output_size": output_size, "options": resolved}
    return model
