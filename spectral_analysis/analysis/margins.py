"""Classification margins and the empirical margin loss of Definition 1 (ICML, Section 6)."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor


def classification_margins(outputs: Tensor, labels: Tensor) -> Tensor:
    """``f(x)[y] - max_{j != y} f(x)[j]`` per sample, from outputs ``(N, n_y)`` and labels ``(N,)``."""
    if outputs.dim() != 2 or labels.shape != outputs.shape[:1]:
        raise ValueError(f"margins need outputs (N, classes) and labels (N,), got {tuple(outputs.shape)} "
                         f"and {tuple(labels.shape)}")
    if outputs.shape[1] < 2:
        raise ValueError("margins need at least two classes")
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= outputs.shape[1]):
        raise ValueError(f"labels must lie in [0, {outputs.shape[1]})")
    true = outputs.gather(1, labels.long().unsqueeze(1)).squeeze(1)
    others = outputs.scatter(1, labels.long().unsqueeze(1), float("-inf"))
    return true - others.max(dim=1).values


def margin_loss(margins: Tensor, gamma: float) -> float:
    """``L^_gamma``: the fraction of samples with margin ``<= gamma`` (``gamma = 0``: the error rate, ties
    counted as errors, as in Definition 1)."""
    if margins.numel() == 0:
        raise ValueError("no samples to compute a margin loss on")
    return float((margins <= gamma).to(torch.float64).mean())


def margin_quantile(margins: Tensor, quantile: float) -> float:
    """The ``quantile`` of the margins (Jiang et al. 2019 use the 10th percentile); must be > 0."""
    if not (math.isfinite(quantile) and 0.0 < quantile < 1.0):
        raise ValueError(f"margin quantile must lie in (0, 1), got {quantile}")
    gamma = float(np.quantile(margins.detach().cpu().numpy(), quantile))
    if not gamma > 0:
        raise ValueError(f"the {quantile:g} quantile of the training margins is {gamma:.4g} <= 0: more than "
                         f"a fraction {quantile:g} of the training samples are misclassified; give a larger "
                         f"quantile or a margin with --margin")
    return gamma
