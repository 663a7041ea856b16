"""Per-matrix spectra of any ``nn.Module`` or state dict: one row per weight matrix, keyed by the
module's own parameter names (``spectral-analysis spectra``; WeightWatcher's table, which skips recurrent
layers). A plain PyTorch file is read as its state dict (:func:`state_dict_matrices`).

What is read:

- the toolkit's recurrent models: each layer's transition ``W`` (dense, materialized from its factors),
  its input weights and the read-out; the toolkit's feed-forward nets: each linear layer;
- any other module, walked by ``named_modules()``: ``nn.Linear``, ``nn.Embedding``, convolutions
  (one ``out x in`` slice per kernel position, pooled, as WeightWatcher reshapes them), ``nn.RNN`` /
  ``nn.LSTM`` / ``nn.GRU`` (``weight_ih_l0``, ``weight_hh_l0``, ...), ``nn.MultiheadAttention``'s
  ``in_proj_weight``, and any other 2-D parameter. A parametrized weight (``torch.nn.utils.parametrize``,
  :func:`~spectral_analysis.nn.svd_parametrize`) is read as the weight it computes, under its own name.

Gated weights are split by gate (``gate`` column): an LSTM's ``i, f, g, o`` blocks are ``input``,
``forget``, ``cell``, ``output``; a GRU's ``r, z, n`` are ``reset``, ``update``, ``new``; attention's
``query``, ``key``, ``value``.

Columns, this toolkit's: ``sigma_max`` (the spectral norm ``||W||_2``), ``sigma_min``,
``condition_number``, ``frobenius_norm``, ``spectral_margin`` ``max_i |sigma_i - 1|`` (the papers').
WeightWatcher's, with its meanings (weightwatcher 0.7.7, ``analyze()`` defaults): the eigenvalues are
``lambda_i = sigma_i^2`` of every slice, pooled (a ``Conv2d``'s halved: its ``conv2d_norm``);
``num_evals``, ``norm`` (``sum lambda_i``, i.e. ``||W||_F^2``), ``log_norm``, ``spectral_norm``
(``lambda_max``, i.e. ``sigma_max^2``), ``log_spectral_norm``, ``stable_rank`` (``norm / lambda_max``),
and its power-law fit of the eigenvalues above ``1e-5`` (:func:`power_law_fit`): ``alpha``, ``xmin``,
``xmax``, ``D``, ``num_pl_spikes``, ``alpha_weighted`` (``alpha * log10 lambda_max``), made only with at
least :data:`MIN_EVALS_FOR_ALPHA` eigenvalues (WeightWatcher skips such layers).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from spectral_analysis.io import load_weights
from spectral_analysis.io.importers import CELL_KEY
from spectral_analysis.io.importers import GATES as ROWS_PER_UNIT

logger = logging.getLogger(__name__)

MIN_EVALS_FOR_ALPHA = 8  # weightwatcher 0.7.7's DEFAULT_MIN_EVALS
EVALS_THRESHOLD = 1e-5  # eigenvalues at or below are left out of the fit (WeightWatcher's EVALS_THRESH)
SMALL_TAIL = 20  # below this many eigenvalues WeightWatcher 0.7.7 fits with its small-N estimator
GATES = {"LSTM": ("input", "forget", "cell", "output"), "GRU": ("reset", "update", "new"),
         "attention": ("query", "key", "value")}


@dataclass
class WeightMatrix:
    """One row's matrix: ``slices`` (float64, detached; several for a convolution, one otherwise)."""

    name: str
    kind: str
    gate: str | None
    slices: list[Tensor]
    conv2d: bool = False

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.slices[0].shape)


def _dense(W: Tensor) -> Tensor:
    return W.detach().to(torch.float64).cpu()


def _gated(name: str, kind: str, W: Tensor, gates: tuple[str, ...] | None) -> list[WeightMatrix]:
    if not gates:
        return [WeightMatrix(name, kind, None, [_dense(W)])]
    return [WeightMatrix(name, kind, gate, [_dense(block)])
            for gate, block in zip(gates, W.chunk(len(gates), dim=0), strict=True)]


def _toolkit_matrices(model: nn.Module) -> list[WeightMatrix] | None:
    """The toolkit's own models: dense transitions from their factors, gates split; else ``None``."""
    if hasattr(model, "transition_matrix") and hasattr(model, "input_weights"):
        gated = hasattr(model, "recurrent_weights")
        gates = GATES.get(type(model).__name__.removesuffix("Net")) if gated else None
        found = []
        for layer in range(model.num_layers):
            name = f"recurrent_weights.{layer}" if gated else f"transitions.{layer}"
            found += _gated(name, "transition", model.transition_matrix(layer), gates)
            found += _gated(f"input_weights.{layer}", "input", model.input_weights[layer], gates)
        return [*found, WeightMatrix("output.weight", "output", None, [_dense(model.output.weight)])]
    if hasattr(model, "weight_matrices") and hasattr(model, "hidden_layers"):
        hidden = [(f"hidden_layers.{i}.weight", "hidden", layer.weight)
                  for i, layer in enumerate(model.hidden_layers)]
        layers = [("input_layer.weight", "input", model.input_layer.weight), *hidden,
                  ("output.weight", "output", model.output.weight)]
        return [WeightMatrix(name, kind, None, [_dense(W)]) for name, kind, W in layers]
    return None


def _conv_slices(module: nn.modules.conv._ConvNd) -> list[Tensor]:
    """WeightWatcher's reshaping: one ``out x in`` matrix per kernel position."""
    W = _dense(module.weight)
    if module.transposed:  # (in, out / groups, *kernel)
        W = W.transpose(0, 1)
    return [W[(slice(None), slice(None), *index)] for index in np.ndindex(*W.shape[2:])]


def _module_matrices(path: str, module: nn.Module) -> tuple[list[WeightMatrix], set[str]]:
    """The matrices a module holds itself (not its children's), and the tensor names they cover."""
    prefix = f"{path}." if path else ""
    if isinstance(module, nn.RNNBase):
        gates = GATES.get(module.mode)
        found = []
        for tensor_name in module._flat_weights_names:
            W = getattr(module, tensor_name)
            if tensor_name.startswith("weight_") and W is not None:
                kind = {"ih": "input", "hh": "transition", "hr": "projection"}[tensor_name[7:9]]
                found += _gated(prefix + tensor_name, kind, W, None if kind == "projection" else gates)
        return found, set(module._flat_weights_names)
    if isinstance(module, nn.modules.conv._ConvNd):
        return ([WeightMatrix(prefix + "weight", "conv", None, _conv_slices(module),
                              isinstance(module, nn.Conv2d))], {"weight"})
    if isinstance(module, nn.Linear | nn.Embedding):
        kind = "linear" if isinstance(module, nn.Linear) else "embedding"
        return [WeightMatrix(prefix + "weight", kind, None, [_dense(module.weight)])], {"weight"}
    if isinstance(module, nn.MultiheadAttention) and module.in_proj_weight is not None:
        return (_gated(prefix + "in_proj_weight", "attention", module.in_proj_weight, GATES["attention"]),
                {"in_proj_weight"})
    return [], set()


def weight_matrices(model: nn.Module) -> list[WeightMatrix]:
    """Every weight matrix of ``model`` in module order, named as its parameters are (module docstring).

    ```python
    >>> [m.name for m in weight_matrices(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()))]
    ['0.weight']

    ```
    """
    with torch.no_grad():
        toolkit = _toolkit_matrices(model)
        if toolkit is not None:
            return toolkit
        found: list[WeightMatrix] = []
        for path, module in model.named_modules():
            if isinstance(module, parametrize.ParametrizationList) or ".parametrizations." in f".{path}.":
                continue  # the raw tensors behind a parametrized weight; the weight itself is read below
            matrices, covered = _module_matrices(path, module)
            found += matrices
            for tensor_name, tensor in _own_tensors(module):
                if tensor_name not in covered and tensor.dim() == 2:
                    found.append(WeightMatrix(f"{path}.{tensor_name}" if path else tensor_name, "matrix",
                                              None, [_dense(tensor)]))
    if not found:
        raise ValueError(f"a {type(model).__name__} holds no weight matrix (Linear, Conv, Embedding, "
                         "RNN/LSTM/GRU, attention or any 2-D parameter); for a checkpoint file, read it "
                         "with spectral_analysis.load(path) and pass its .model")
    return found


def state_dict_matrices(state: Mapping[str, Tensor]) -> list[WeightMatrix]:
    """Every weight matrix of a state dict under its own keys, in key order: each 2-D floating tensor,
    an ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` cell's ``weight_ih_l*`` / ``weight_hh_l*`` split by gate
    (``4n`` rows an LSTM's, ``3n`` a GRU's, ``n`` the square ``weight_hh``'s width). A tensor of more
    dimensions is not read (a state dict does not say whether it is a convolution's or a transposed
    one's kernel), nor are a parametrized weight's factors (``*.parametrizations.*``, whose weight the
    state dict does not hold): a warning names them, and the module itself (:func:`spectral_table`) reads
    them.

    ```python
    >>> [(m.name, m.gate) for m in state_dict_matrices(torch.nn.GRU(2, 3).state_dict())][:2]
    [('weight_ih_l0', 'reset'), ('weight_ih_l0', 'update')]

    ```
    """
    found, skipped, raw = [], [], []
    for key, tensor in state.items():
        if not tensor.is_floating_point() or tensor.dim() < 2:
            continue
        if "parametrizations." in key:
            raw.append(key)
            continue
        if tensor.dim() > 2:
            skipped.append(f"{key} {tuple(tensor.shape)}")
            continue
        cell = CELL_KEY.match(key)
        if cell is None:
            found.append(WeightMatrix(key, "matrix", None, [_dense(tensor)]))
            continue
        prefix, _, part, suffix = cell.groups()
        kind = {"ih": "input", "hh": "transition", "hr": "projection"}[part]
        gates = None if part == "hr" else _cell_gates(state, prefix, suffix, tensor)
        found += _gated(key, kind, tensor, gates)
    if skipped:
        logger.warning("not read (a kernel of more than 2 dimensions; pass the module itself to read it): %s",
                       ", ".join(skipped))
    if raw:
        logger.warning("not read (the factors of a parametrized weight, not the weight they compute; pass "
                       "the module itself to read it): %s", ", ".join(raw))
    if not found:
        raise ValueError(f"the state dict holds no weight matrix (2-D floating tensor) among {len(state)} "
                         "entries")
    return found


def _cell_gates(state: Mapping[str, Tensor], prefix: str, suffix: str, W: Tensor) -> tuple[str, ...] | None:
    """The gates of a cell weight with ``W.shape[0]`` rows: the hidden size ``n`` is the width of the
    layer's ``weight_hh`` (of its ``weight_hr``, an LSTM with ``proj_size``); ``4n`` rows an LSTM's."""
    width = state.get(f"{prefix}weight_hr{suffix}", state.get(f"{prefix}weight_hh{suffix}"))
    if width is None or width.dim() != 2:
        return None
    family = next((f for f, rows in ROWS_PER_UNIT.items() if W.shape[0] == rows * width.shape[1]), "")
    return GATES.get(family.upper())


def _own_tensors(module: nn.Module) -> list[tuple[str, Tensor]]:
    """A module's own parameters, a parametrized one as the tensor it computes."""
    own = [(name, p) for name, p in module.named_parameters(recurse=False)]
    if parametrize.is_parametrized(module):
        own += [(name, getattr(module, name)) for name in module.parametrizations]
    return own


def power_law_fit(evals: np.ndarray) -> dict[str, float | int | None]:
    """WeightWatcher's power-law fit of the eigenvalues above ``1e-5`` (weightwatcher 0.7.7,
    ``WW_powerlaw.WWFit``): for each candidate ``xmin`` the maximum-likelihood exponent of the tail above
    it, ``alpha = 1 + n / sum log(x_j / xmin)``, and the ``xmin`` whose Kolmogorov-Smirnov distance ``D``
    is least; with fewer than 20 eigenvalues its small-sample variant, ``n - 1`` for ``n`` over tails of
    at least 8 (the ``xmin`` it keeps is still the one of least ``D``). ``None`` values with fewer than
    :data:`MIN_EVALS_FOR_ALPHA` eigenvalues.

    ```python
    >>> fit = power_law_fit(np.random.default_rng(0).pareto(2.0, 2000) + 1.0)  # density ~ x^-3
    >>> round(fit["alpha"], 1)
    3.0

    ```
    """
    x = np.sort(np.asarray(evals, dtype=np.float64))
    x = x[x > EVALS_THRESHOLD]
    if len(x) < MIN_EVALS_FOR_ALPHA:
        return {"alpha": None, "xmin": None, "xmax": None, "D": None, "num_pl_spikes": None}
    small = len(x) < SMALL_TAIL
    log_x = np.log(x)
    tail_sums = np.cumsum(log_x[::-1])[::-1]  # sum of log x_j for j >= i
    best, chosen = math.inf, None
    for i in range(len(x) - 1):
        n = len(x) - i
        spread = tail_sums[i] - n * log_x[i]
        if spread <= 1e-12 or (small and n < 8):
            continue
        alpha = 1 + ((n - 1) if small else n) / spread
        if alpha <= 1:
            continue
        D = float(np.max(np.abs(1 - (x[i:] / x[i]) ** (1 - alpha) - np.arange(n) / n)))
        if best > D:
            best, chosen = D, (alpha, x[i], D)
    if chosen is None:
        return {"alpha": None, "xmin": None, "xmax": None, "D": None, "num_pl_spikes": None}
    alpha, xmin, D = chosen
    return {"alpha": float(alpha), "xmin": float(xmin), "xmax": float(x[-1]), "D": D,
            "num_pl_spikes": int((x >= xmin).sum())}


def matrix_row(matrix: WeightMatrix) -> dict[str, object]:
    """The row of one matrix (module docstring)."""
    for W in matrix.slices:
        if W.dim() != 2 or 0 in W.shape:
            raise ValueError(f"{matrix.name}: expected a non-empty 2-D matrix, got shape {tuple(W.shape)}")
        if not bool(torch.isfinite(W).all()):
            raise ValueError(f"{matrix.name}: the matrix has non-finite entries")
    sigma = np.concatenate([torch.linalg.svdvals(W).numpy() for W in matrix.slices])
    top, bottom = float(sigma.max()), float(sigma.min())
    evals = np.sort(sigma ** 2) * (0.5 if matrix.conv2d else 1.0)
    norm, lambda_max = float(evals.sum()), float(evals.max())
    fit = power_law_fit(evals)
    r, c = matrix.shape
    return {"name": matrix.name, "kind": matrix.kind, "gate": matrix.gate, "N": max(r, c), "M": min(r, c),
            "rf": len(matrix.slices), "sigma_max": top, "sigma_min": bottom,
            "condition_number": top / bottom if bottom > 0 else math.inf,
            "frobenius_norm": float(np.sqrt((sigma ** 2).sum())),
            "spectral_margin": float(np.abs(sigma - 1.0).max()),
            "num_evals": len(evals), "norm": norm, "log_norm": math.log10(norm) if norm > 0 else -math.inf,
            "spectral_norm": lambda_max,
            "log_spectral_norm": math.log10(lambda_max) if lambda_max > 0 else -math.inf,
            "stable_rank": norm / lambda_max if lambda_max > 0 else 0.0, **fit,
            "alpha_weighted": fit["alpha"] * math.log10(lambda_max)
            if fit["alpha"] is not None and lambda_max > 0 else None}


def spectral_table(model: nn.Module | Mapping[str, Tensor] | str | Path) -> pd.DataFrame:
    """One row per weight matrix (per gate for gated weights) of ``model``, keyed by ``name`` and
    ``gate``: a module, a :func:`spectral_analysis.load` subject, a state dict, or a model file (a
    toolkit checkpoint, a ``zoo:`` name, or a plain PyTorch file read under its own keys,
    :func:`state_dict_matrices`).

    ```python
    >>> table = spectral_table(torch.nn.LSTM(3, 8))
    >>> table[["name", "gate"]].head(2).values.tolist()
    [['weight_ih_l0', 'input'], ['weight_ih_l0', 'forget']]

    ```
    """
    if isinstance(model, str | Path):
        model = load_weights(model)
    if isinstance(model, Mapping):
        if not all(isinstance(v, Tensor) for v in model.values()):
            raise TypeError("spectral_table takes a state dict of tensors; this mapping holds other values")
        return pd.DataFrame([matrix_row(m) for m in state_dict_matrices(model)])
    model = getattr(model, "model", model) if not isinstance(model, nn.Module) else model
    if not isinstance(model, nn.Module):
        raise TypeError("spectral_table takes an nn.Module, a loaded subject, a state dict or a model file, "
                        f"got {type(model).__name__}")
    return pd.DataFrame([matrix_row(m) for m in weight_matrices(model)])
