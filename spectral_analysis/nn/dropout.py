"""Dropout on the non-recurrent connections of a recurrent net (Zaremba et al. 2014, "Recurrent Neural
Network Regularization", Section 3.2): on each layer's input (the embedded symbol for layer 1, the hidden
states of the layer below for the others) and on the read-out's input, never on ``W h_{t-1}``.

Two kinds (:data:`~spectral_analysis.vocabulary.DROPOUT_KINDS`):

- ``standard``: a fresh mask for every element of every step (Zaremba et al.; ``nn.functional.dropout``);
- ``locked``: one mask per sequence and unit, the same at every step (the variational dropout of Gal &
  Ghahramani 2016 on these connections; Merity et al. 2018's ``LockedDropout``).

Kept units are scaled by ``1 / (1 - p)``, so evaluation (``model.eval()``) uses the weights as they are.
"""

from __future__ import annotations

import math

from torch import Tensor, nn

from spectral_analysis.vocabulary import DROPOUT_KINDS


def check_dropout(p: float, kind: str) -> None:
    """``ValueError`` naming the problem for a probability outside [0, 1) or an unknown kind."""
    if isinstance(p, bool) or not isinstance(p, int | float) or not math.isfinite(p) or not 0.0 <= p < 1.0:
        raise ValueError(f"dropout is the probability of zeroing a unit, in [0, 1), got {p!r}")
    if kind not in DROPOUT_KINDS:
        raise ValueError(f"unknown dropout_kind {kind!r}; expected one of {DROPOUT_KINDS}")


def sequence_dropout(x: Tensor, p: float, kind: str, training: bool, time_dim: int = 1) -> Tensor:
    """``x`` with dropout ``p`` of ``kind`` when ``training`` (``x`` itself otherwise); ``time_dim`` is the
    axis a ``locked`` mask is shared along.

    ```python
    >>> import torch
    >>> x = torch.ones(2, 5, 3)
    >>> y = sequence_dropout(x, 0.5, "locked", training=True)
    >>> bool((y == y[:, :1]).all()), sorted(set(y.flatten().tolist())) <= [0.0, 2.0]
    (True, True)

    ```
    """
    if not training or p == 0.0:
        return x
    if kind == "standard":
        return nn.functional.dropout(x, p, training=True)
    shape = list(x.shape)
    shape[time_dim] = 1
    return x * x.new_empty(shape).bernoulli_(1.0 - p).div_(1.0 - p)
