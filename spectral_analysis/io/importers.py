"""PyTorch ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` state dicts as the toolkit's own recurrent models.

The architecture is read off the keys and shapes: ``weight_hh_l0`` of ``n x n`` (RNN), ``3n x n``
(GRU) or ``4n x n`` (LSTM), ``num_layers`` from ``weight_hh_l{k}``, biases from ``bias_ih_l0``; a head
is the one 2-D ``*.weight`` of width n outside the recurrent module (or the one ``head_prefix``
names). The weights are copied exactly:

- RNN (``h' = phi(W_ih x + b_ih + W_hh h + b_hh)``) -> ``rnn`` (Eq. 4) with ``b = b_ih + b_hh``;
- LSTM -> ``lstm`` with ``b = b_ih + b_hh`` (PyTorch adds both to every gate);
- GRU -> ``gru`` with both biases kept (``b_hn`` sits inside the reset gate's product);
- an RNN whose ``weight_hh_l*`` are SVD-parametrized in memory -> ``spectral`` with the same factors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch import Tensor

from spectral_analysis.nn import RecurrentModel, SVDParametrization, build_model
from spectral_analysis.vocabulary import ARCHITECTURES

GATES = {"rnn": 1, "gru": 3, "lstm": 4}  # rows of weight_hh per hidden unit
# an nn.RNN/GRU/LSTM cell's own tensor: (the module's prefix, weight or bias, ih/hh/hr, _l<layer>[_reverse])
CELL_KEY = re.compile(r"^(.*?)(weight|bias)_(ih|hh|hr)(_l\d+(?:_reverse)?)$")

SVDFactors = tuple[SVDParametrization, Tensor, Tensor, Tensor]  # parametrization, Yu, Yv, sigma_raw


class SubjectError(ValueError):
    """A model that cannot be imported; the message is one line naming the keys or the reason."""


def in_cell(key: str, prefix: str) -> bool:
    """Whether ``key`` is one of the recurrent module's own weights (``weight_ih_l0``, ``bias_hh_l1``...)."""
    cell = CELL_KEY.match(key)
    return cell is not None and cell.group(1) == prefix


def recurrent_prefix(state: dict[str, Tensor]) -> str:
    """The prefix of the one recurrent module's keys (``"rnn."``, or ``""`` for a bare module)."""
    cells = (CELL_KEY.match(k) for k in state)
    prefixes = sorted({m.group(1) for m in cells if m and m.group(2, 3) == ("weight", "hh")})
    if not prefixes and any(k.endswith(".u_reflectors") or k.endswith(".original0") for k in state):
        raise SubjectError("the file holds SVD-parametrized weights (u_reflectors, v_reflectors, sigma_raw) "
                           "but not their sigma map: pass the module itself, spectral_analysis.load(model)")
    if not prefixes:
        raise SubjectError("no recurrent weights: expected keys like 'weight_hh_l0' (nn.RNN, nn.GRU, "
                           f"nn.LSTM); found {sorted(state)[:6]}")
    if len(prefixes) > 1:
        raise SubjectError(f"several recurrent modules (weight_hh_l0 under {prefixes}); import one at a time")
    return prefixes[0]


@dataclass
class Layout:
    """What the keys say: the cell family, its sizes and the keys relative to ``prefix``."""

    prefix: str
    family: str  # rnn | gru | lstm
    activation: str | None  # tanh | relu for an RNN
    layers: int
    n: int
    keys: dict[str, Tensor]
    has_bias: bool
    dropped_input: str | None = None  # a weight outside that may feed the module: symbol ids are refused


def read_layout(state: dict[str, Tensor], arch: str | None, assumptions: list[str],
                recorded_activation: str | None = None) -> Layout:
    """Infer (or check the forced ``arch`` against) the recurrent module's layout. An ``nn.RNN``'s
    non-linearity is not in its weights: ``arch``, else the one the file records
    (``recorded_activation``), else :class:`SubjectError`."""
    prefix = recurrent_prefix(state)
    keys = {k[len(prefix):]: v for k, v in state.items() if in_cell(k, prefix)}
    if any(k.endswith("_reverse") for k in keys):
        raise SubjectError(f"a bidirectional module ({prefix}weight_hh_l0_reverse): Eq. 4 runs one "
                           "direction; import each direction's weights as a model of its own")
    if any(k.startswith("weight_hr_l") for k in keys):
        raise SubjectError(f"an LSTM with proj_size ({prefix}weight_hr_l0) cannot be imported")
    layers = 0
    while f"weight_hh_l{layers}" in keys:
        layers += 1
    W0 = keys["weight_hh_l0"]
    n = int(W0.shape[-1])
    inferred = next((f for f, g in GATES.items() if W0.dim() == 2 and W0.shape[0] == g * n), None)
    if inferred is None:
        raise SubjectError(f"{prefix}weight_hh_l0 has shape {tuple(W0.shape)}: not n x n (RNN), 3n x n (GRU) "
                           "or 4n x n (LSTM)")
    assumptions.append(f"recurrent weights under {prefix or '(no prefix)'!r}: {layers} layer(s), n = {n}")
    if arch is None and inferred == "rnn":
        if recorded_activation is None:
            raise SubjectError("the file holds an nn.RNN, whose non-linearity (tanh or relu) a state_dict "
                               "does not record, and reading one for the other changes every output: give "
                               "--arch rnn_tanh or --arch rnn_relu (arch= in Python)")
        arch = f"rnn_{recorded_activation}"
        assumptions.append(f"activation {recorded_activation}, as the file's hyper_parameters record it")
    arch = arch or inferred
    family = "rnn" if arch.startswith("rnn") else arch
    if family != inferred:
        raise SubjectError(f"--arch (arch=) {arch} needs {prefix}weight_hh_l0 with {GATES[family]}n = "
                           f"{GATES[family] * n} rows, but it is {tuple(W0.shape)} (a {inferred})")
    has_bias = "bias_ih_l0" in keys
    names = {f"{w}_{k}_l{i}" for i in range(layers) for k in ("ih", "hh")
             for w in (("weight", "bias") if has_bias else ("weight",))}
    missing = sorted(names - set(keys))
    if missing:
        raise SubjectError(f"the {family} weights are incomplete: missing {[prefix + k for k in missing]}")
    rows = GATES[family] * n
    for i in range(layers):
        W, M = keys[f"weight_hh_l{i}"], keys[f"weight_ih_l{i}"]
        if tuple(W.shape) != (rows, n) or M.dim() != 2 or M.shape[0] != rows or (i and M.shape[1] != n):
            raise SubjectError(f"{prefix}weight_hh_l{i} {tuple(W.shape)} and {prefix}weight_ih_l{i} "
                               f"{tuple(M.shape)} do not fit a {family} with n = {n}")
    activation = arch.split("_")[1] if family == "rnn" else None
    return Layout(prefix, family, activation, layers, n, keys, has_bias)


def find_head(state: dict[str, Tensor], layout: Layout, head_prefix: str | None,
              assumptions: list[str]) -> tuple[Tensor, Tensor | None]:
    """The read-out ``(weight (n_y, n), bias)``: the named or the one ``nn.Linear`` of width n outside the
    recurrent module; the identity (``y_t = h_t``) when there is none. A weight named as an embedding is
    never taken for the read-out, and neither is one without a bias as wide as the recurrent module's
    input too (it may be the embedding that feeds it): that one must be named."""
    n, prefix = layout.n, layout.prefix
    n_i = int(layout.keys["weight_ih_l0"].shape[1])
    if head_prefix is not None:
        name = head_prefix if head_prefix.endswith(".") else head_prefix + "."
        weight = state.get(f"{name}weight")
        if weight is None or weight.dim() != 2 or weight.shape[1] != n:
            found = None if weight is None else tuple(weight.shape)
            raise SubjectError(f"--head-prefix (head_prefix=) {head_prefix!r}: expected {name}weight of "
                               f"shape (n_y, {n}), found {found}")
        candidates = [name]
    else:
        candidates = sorted(k[:-len("weight")] for k, v in state.items() if k.endswith("weight")
                            and not in_cell(k, prefix) and v.dim() == 2 and v.shape[1] == n
                            and "emb" not in k.lower())
        unclear = [c for c in candidates if n_i == n and f"{c}bias" not in state]
        if unclear and len(candidates) == 1:
            shape = tuple(state[unclear[0] + "weight"].shape)
            raise SubjectError(f"{unclear[0]}weight {shape} has no bias and is as wide as the recurrent "
                               "module's input: it may be the embedding that feeds it rather than the "
                               "read-out; name the read-out with --head-prefix")
        if len(candidates) > 1:
            raise SubjectError(f"several possible heads {[c + 'weight' for c in candidates]}: name one with "
                               "--head-prefix")
    outside = sorted(k for k in state if not in_cell(k, prefix)
                     and not (candidates and k in (f"{candidates[0]}weight", f"{candidates[0]}bias")))
    if outside:
        assumptions.append(f"ignored (not the recurrent module or its head): {outside[:6]}")
    feeding = [k for k in outside if k.endswith("weight") and state[k].dim() == 2 and n_i in state[k].shape]
    if feeding:
        layout.dropped_input = f"{feeding[0]} {tuple(state[feeding[0]].shape)}"
        assumptions.append(f"{layout.dropped_input} may feed the recurrent module (an embedding or a "
                           "projection): it is not imported, so the model refuses symbol ids")
    if not candidates:
        assumptions.append("no nn.Linear head found: the read-out is the identity, y_t = h_t")
        return torch.eye(n, dtype=layout.keys["weight_hh_l0"].dtype), None
    name = candidates[0]
    weight, bias = state[f"{name}weight"], state.get(f"{name}bias")
    with_bias = " with bias" if bias is not None else ""
    assumptions.append(f"head found under {name!r}: {tuple(weight.shape)}{with_bias}")
    return weight, bias


def spectral_layers(svd: dict[str, SVDFactors] | None, layout: Layout) -> list[SVDFactors] | None:
    """Every layer's SVD factors when all of an RNN's ``weight_hh_l*`` carry equal SVD settings."""
    if not svd or layout.family != "rnn":
        return None
    found = [svd.get(f"{layout.prefix}weight_hh_l{i}") for i in range(layout.layers)]
    if any(f is None for f in found):
        return None
    first = found[0][0]
    if any((f[0].m1, f[0].m2, f[0].sigma_map) != (first.m1, first.m2, first.sigma_map) for f in found):
        return None
    return found


def import_state_dict(state: dict[str, Tensor], arch: str | None = None, head_prefix: str | None = None,
                      svd: dict[str, SVDFactors] | None = None,
                      recorded_activation: str | None = None) -> tuple[RecurrentModel, str, list[str]]:
    """The toolkit model holding ``state``'s weights exactly, its architecture name and the assumptions
    made (``svd``: SVD factors of in-memory parametrized weights, by their state-dict key;
    ``recorded_activation``: an nn.RNN's non-linearity as the file records it, see :func:`read_layout`)."""
    if arch is not None and arch not in ARCHITECTURES:
        raise SubjectError(f"--arch (arch=) must be one of {ARCHITECTURES}, got {arch!r}")
    assumptions: list[str] = []
    layout = read_layout(state, arch, assumptions, recorded_activation)
    head_w, head_b = find_head(state, layout, head_prefix, assumptions)
    factors = spectral_layers(svd, layout)
    model = _empty_model(layout, int(layout.keys["weight_ih_l0"].shape[1]), int(head_w.shape[0]),
                         head_b is not None, factors, assumptions)
    model = model.to(layout.keys["weight_hh_l0"].dtype)
    _copy_weights(model, layout, factors)
    with torch.no_grad():
        model.output.weight.copy_(head_w)
        if head_b is not None:
            model.output.bias.copy_(head_b)
    if not layout.has_bias:
        assumptions.append("no biases (bias=False)")
    elif layout.family != "gru":
        assumptions.append("bias_ih and bias_hh summed into one bias per layer")
    model.symbol_ids_refused = layout.dropped_input
    architecture = layout.family if layout.family != "rnn" else f"rnn_{layout.activation}"
    return model, architecture, assumptions


def _empty_model(layout: Layout, ni: int, ny: int, output_bias: bool, factors: list[SVDFactors] | None,
                 assumptions: list[str]) -> RecurrentModel:
    common = {"num_layers": layout.layers, "output_bias": output_bias}
    if layout.family != "rnn":
        return build_model(layout.family, ni, layout.n, ny, **common)
    if factors is None:
        return build_model("rnn", ni, layout.n, ny, activation=layout.activation, **common)
    param = factors[0][0]
    sigma_map = param.sigma_map
    low, high = sigma_map.bounds
    assumptions.append(f"weight_hh is svd_parametrize'd: imported as a Spectral-RNN (m1 = {param.m1}, "
                       f"m2 = {param.m2}, sigma map {sigma_map.kind} on [{low:g}, {high:g}])")
    return build_model("spectral", ni, layout.n, ny, activation=layout.activation, m1=param.m1, m2=param.m2,
                       sigma_map=sigma_map.kind, sigma_star=sigma_map.sigma_star, r=sigma_map.r, **common)


@torch.no_grad()
def _copy_weights(model: RecurrentModel, layout: Layout, factors: list[SVDFactors] | None) -> None:
    keys, rows = layout.keys, GATES[layout.family] * layout.n
    for i in range(layout.layers):
        M = keys[f"weight_ih_l{i}"]
        zero = torch.zeros(rows, dtype=M.dtype)
        b_ih, b_hh = keys.get(f"bias_ih_l{i}", zero), keys.get(f"bias_hh_l{i}", zero)
        model.input_weights[i].copy_(M)
        if layout.family == "gru":
            model.biases[i].copy_(b_ih)
            model.recurrent_biases[i].copy_(b_hh)
        else:
            model.biases[i].copy_(b_ih + b_hh)
        if layout.family != "rnn":
            model.recurrent_weights[i].copy_(keys[f"weight_hh_l{i}"])
        elif factors is not None:
            plist = model.transitions[i].parametrizations.weight
            for j, factor in enumerate(factors[i][1:]):
                getattr(plist, f"original{j}").copy_(factor)
        else:
            model.transitions[i].weight.copy_(keys[f"weight_hh_l{i}"])
