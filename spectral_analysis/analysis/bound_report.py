"""The generalization bound of a checkpoint: Theorem 5, Corollary 1 and the explicit A.6 bound.

Conventions (README, "Analyzers"): biases are absorbed as in :mod:`spectral_analysis.analysis.network`;
``T`` is the trained length unless given; ``B`` (Assumption 1(a): ``||x_t|| <= B`` for every input) is
given, else the task's input-domain bound (pixels in [0, 1], one-hot symbols, the addition pairs),
else measured on the train and test sets (UCR, a user's sequences), said so in ``B_source``; gamma is
given, else the ``margin_quantile`` of the training margins (when data is used, default the 10th
percentile), else 1 (a pure complexity comparison, log10 G shifts by -2 log10 gamma).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from spectral_analysis.analysis.bounds import (
    complexity_term,
    gamma_grid_point,
    pac_bayes_bound,
    weight_norms,
)
from spectral_analysis.analysis.checkpoint_data import checkpoint_task, task_split
from spectral_analysis.analysis.margins import classification_margins, margin_loss, margin_quantile
from spectral_analysis.analysis.network import Eq17Network, eq17_network
from spectral_analysis.data import TaskData
from spectral_analysis.data.arrays import UserData
from spectral_analysis.io import Subject
from spectral_analysis.io.subjects import as_subject
from spectral_analysis.vocabulary import DEFAULT_DELTA

DEFAULT_QUANTILE = 0.1


MARGIN_RECHECK = 1e-3  # float32 margins this close to 0 (relative to the logits' scale) are redone in float64


def split_margins(model: torch.nn.Module, inputs: torch.Tensor, labels: torch.Tensor,
                  batch_size: int = 64, progress: bool = False) -> torch.Tensor:
    """Margins of the last-step outputs over a whole split (float64 values).

    Fast path: float32 through the model's own recurrence, no graph, the read-out applied to the last
    step only, in batches of 64 (faster per sequence than larger ones on a CPU: the (T, B, n) input
    projections stay in cache). A margin
    within ``MARGIN_RECHECK * (1 + max |logit|)`` of zero, where float32 rounding could flip its
    sign, is recomputed by the float64 twin (:func:`split_margins_reference`), so the margin loss at
    gamma = 0 (the error rate) is exact."""
    model32 = copy.deepcopy(model).to(torch.float32)
    device = next(model32.parameters()).device
    parts, scales = [], []
    with torch.no_grad():
        for start in tqdm(range(0, len(inputs), batch_size), desc="margins", disable=not progress,
                          leave=False):
            x = inputs[start:start + batch_size]
            x = (x.to(torch.float32) if x.is_floating_point() else x).to(device)
            outputs = model32.last_outputs(x).double().cpu()
            parts.append(classification_margins(outputs, labels[start:start + batch_size]))
            scales.append(outputs.abs().amax(dim=1))
    margins, scale = torch.cat(parts), torch.cat(scales)
    near = (margins.abs() <= MARGIN_RECHECK * (1 + scale)).nonzero().flatten()
    if len(near):
        margins[near] = split_margins_reference(model, inputs[near], labels[near])
    return margins


def split_margins_reference(model: torch.nn.Module, inputs: torch.Tensor, labels: torch.Tensor,
                            batch_size: int = 512) -> torch.Tensor:
    """The slow twin: margins with the model and inputs in float64."""
    model64 = copy.deepcopy(model).to(torch.float64)
    device = next(model64.parameters()).device
    parts = []
    with torch.no_grad():
        for start in range(0, len(inputs), batch_size):
            x = inputs[start:start + batch_size]
            x = (x.to(torch.float64) if x.is_floating_point() else x).to(device)
            outputs = model64.run(x).outputs[:, -1].cpu()
            parts.append(classification_margins(outputs, labels[start:start + batch_size]))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def _subsample(n: int, samples: int | None, seed: int) -> torch.Tensor | None:
    if samples is None or samples >= n:
        return None
    if samples < 2:
        raise ValueError(f"--samples (samples=) must be >= 2, got {samples}")
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:samples].sort().values


def _task_for_margins(subject: Subject, user_data: UserData | None) -> TaskData:
    if user_data is not None:
        return user_data.as_task(subject.model.output_size)
    task = checkpoint_task(subject.metadata)
    if task.kind != "classification-last":
        raise ValueError(f"margins need one class label per sequence (a classification-last task such as "
                         f"MNIST or UCR); task {task.name!r} is {task.kind}. Leave out --data and "
                         f"--margin-quantile to get G(w) alone")
    return task


def _recorded_task_bound(metadata: dict[str, Any]) -> tuple[float, str]:
    """B for a checkpoint used without data: its task's domain bound (rebuilt offline), else the bound
    it recorded (measured on its training inputs)."""
    try:
        return checkpoint_task(metadata).theorem_bound()
    except (ValueError, OSError, KeyError):
        return float(metadata["task"]["data_bound"]), "checkpoint metadata (measured on its training inputs)"


def bound_report(subject: Subject | nn.Module | str, data: str | None = None, margin: float | None = None,
                 quantile: float | None = None, delta: float = DEFAULT_DELTA, data_bound: float | None = None,
                 length: int | None = None, samples: int | None = None, seed: int = 0,
                 user_data: UserData | None = None, progress: bool = False) -> dict[str, Any]:
    """Every number of the bound for ``subject`` (see the module docstring for the defaults); with
    ``user_data`` its labelled sequences are the training sample (T, B and margins from them).

    ```python
    >>> import torch, spectral_analysis
    >>> report = bound_report(spectral_analysis.load(torch.nn.RNN(2, 4)), length=10, data_bound=1.0)
    >>> report["T"], report["h"], report["log10_G"] > 0
    (10, 4, True)

    ```
    """
    subject = as_subject(subject)
    if margin is not None and quantile is not None:
        raise ValueError("give either a margin or a margin quantile, not both")
    if margin is not None and not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"the margin gamma must be > 0, got {margin}")
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    if quantile is not None and not (math.isfinite(quantile) and 0.0 < quantile < 1.0):
        raise ValueError(f"margin quantile must lie in (0, 1), got {quantile}")
    if data_bound is not None and not (math.isfinite(data_bound) and data_bound > 0):
        raise ValueError(f"the data bound B must be > 0, got {data_bound}")
    meta = subject.metadata.get("task") or {}
    if user_data is not None:
        user_data.check_model(subject.model.input_size, subject.model.output_size)
        meta = {"name": "user data", "length": user_data.length}
    T = length if length is not None else meta.get("length")
    if T is None:
        raise ValueError("no sequence length T: give --length (length= in Python), or --inputs (user_data=), "
                         "whose sequences have one")
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ValueError(f"the sequence length T must be an integer >= 1, got {T!r}")
    use_data = data is not None or quantile is not None or bool(user_data and user_data.labels is not None)
    task = _task_for_margins(subject, user_data) if use_data else None
    net = eq17_network(subject.model, symbolic_inputs=bool(task and task.symbolic))
    report: dict[str, Any] = {"model": subject.metadata.get("model", {}).get("name", subject.architecture),
                              "subject": subject.describe(),
                              "task": meta.get("name"), "T": T, "delta": delta, **net.sizes,
                              "absorbed": {"constant_input": net.constant_input,
                                           "output_unit": net.output_unit}}
    if data_bound is not None:
        raw_B, source = data_bound, "given"
    elif task is not None and task.name != "user data":
        raw_B, source = task.theorem_bound()
    elif meta.get("name") and meta.get("name") != "user data" and meta.get("data_bound") is not None:
        raw_B, source = _recorded_task_bound(subject.metadata)
    elif user_data is not None:
        raw_B, source = user_data.data_bound(), ("measured on the given inputs (Assumption 1(a) is checked "
                                                 "only on that sample)")
    else:
        raise ValueError("no data bound B: the model does not record one; give --data-bound (data_bound=) or "
                         "--inputs (user_data=)")
    B = net.data_bound(raw_B)
    report.update({"B": B, "B_inputs": raw_B, "B_source": source})

    train_margins = None
    if task is not None:
        model = subject.model
        chosen = _subsample(len(task.train), samples, seed)
        x, y = task.train.inputs, task.train.targets
        if chosen is not None:
            x, y = x[chosen], y[chosen]
        train_margins = split_margins(model, x, y, progress=progress)
    gamma_from_data = False
    if margin is not None:
        gamma, gamma_source = margin, "given"
    elif train_margins is not None:
        q = DEFAULT_QUANTILE if quantile is None else quantile
        gamma, gamma_source = margin_quantile(train_margins, q), f"{q:g} quantile of the training margins"
        gamma_from_data = True
    else:
        gamma, gamma_source = 1.0, "default (no data)"
    report.update({"gamma": gamma, "gamma_source": gamma_source})

    norms = weight_norms(net)
    report["norms"] = {"W": norms.W, "M": norms.M, "Y": norms.Y, "W_frobenius": norms.W_frobenius,
                       "M_frobenius": norms.M_frobenius, "Y_frobenius": norms.Y_frobenius}
    theorem = complexity_term(norms, T, net.sizes["h"], B, gamma)
    report.update({"log10_G": theorem.log10_G, "factors": theorem.factors})
    report["W_norm_bound"] = net.singular_value_bound
    bound_W = net.singular_value_bound
    report["corollary1"] = (complexity_term(norms, T, net.sizes["h"], B, gamma, bound_W).as_dict()
                            if bound_W is not None else None)
    report.update({"margin_loss": None, "bound": None, "explicit": None})
    if train_margins is not None:
        margins = (train_margins if (data or "train") == "train"
                   else split_of_task_margins(model, task, data, samples, seed, progress))
        report.update({"data": data or "train", "m": len(train_margins),
                       "margin_loss": margin_loss(margins, gamma), "error_rate": margin_loss(margins, 0.0)})
        report.update(explicit_bound(net, T, B, gamma, gamma_from_data, delta, train_margins))
    return report


def split_of_task_margins(model: torch.nn.Module, task: TaskData, data: str, samples: int | None, seed: int,
                          progress: bool = False) -> torch.Tensor:
    """The data part: margins on the named split of ``task`` (a random subset of ``samples``, seeded)."""
    split = task_split(task, data)
    chosen = _subsample(len(split), samples, seed)
    x, y = split.inputs, split.targets
    if chosen is not None:
        x, y = x[chosen], y[chosen]
    return split_margins(model, x, y, progress=progress)


def explicit_bound(net: Eq17Network, T: int, B: float, gamma: float, gamma_from_data: bool, delta: float,
                   train_margins: torch.Tensor) -> dict[str, Any]:
    """The bound part: the explicit A.6 bound from the training margins (m = their count); a gamma
    read off the data is rounded down to the grid the union bound covers."""
    bound_gamma = gamma_grid_point(gamma)[0] if gamma_from_data else gamma
    train_loss = margin_loss(train_margins, bound_gamma)
    explicit = pac_bayes_bound(net, T, B, bound_gamma, train_loss, len(train_margins), delta, gamma_from_data)
    return {"train_margin_loss": train_loss, "bound_gamma": bound_gamma, "bound": explicit.bound,
            "vacuous": explicit.vacuous, "explicit": explicit.as_dict()}


def weights_arrays(subject: Subject) -> dict[str, Any]:
    """The dense W, M, Y exactly as the bound uses them, and the absorption flags (``weights`` command)."""
    net = eq17_network(subject.model)
    return {"W": net.W.cpu().numpy(), "M": net.M.cpu().numpy(), "Y": net.Y.cpu().numpy(),
            "activation": net.activation, "leak": net.leak, "constant_input": net.constant_input,
            "output_unit": net.output_unit}
