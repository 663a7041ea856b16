"""The gradient's norm over all parameters, and clipping by it, right where float32 cannot square the
gradient.

``torch.nn.utils.clip_grad_norm_`` sums squares in the gradients' own dtype: from entries of about 1.8e19
on, float32 reads the norm as ``inf`` although every entry is finite, and clipping by that norm zeroes the
gradient instead of scaling it to ``max_norm``. A KRU adding run (T = 100, step 17,890) met exactly this:
a forward pass whose loss was 3.4e17 and a gradient of norm 4.3e21 (float64), read as ``inf``.
:func:`clip_gradients` takes the norm again in float64 when float32 overflows, and clips by that one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class GradientNorm:
    """The 2-norm of every parameter's gradient together (``value``, before clipping) and whether float32
    overflows squaring it (``overflows``): an optimizer's running averages of squared gradients (RMSprop,
    Adam) would then turn ``inf`` and freeze those weights for good, unless the gradient is clipped."""

    value: float
    overflows: bool


def clip_gradients(parameters: Iterable[nn.Parameter], max_norm: float | None,
                   max_value: float | None = None) -> GradientNorm:
    """The gradient's norm before clipping (:class:`GradientNorm`), the gradients scaled in place to
    ``max_norm`` where their norm is larger, or each entry clipped to ``[-max_value, max_value]`` (Theano's
    ``T.clip``, as the uRNN authors' training scripts clip their baselines; ``None``: no clipping).
    Non-finite entries give a non-finite norm, left as is.

    Example: ``clip_gradients(model.parameters(), None, max_value=1.0).value``."""
    parameters = [p for p in parameters if p.grad is not None]
    if not parameters:
        return GradientNorm(0.0, False)
    grads = [p.grad for p in parameters]
    norm = torch.nn.utils.get_total_norm(grads)
    overflows = not bool(torch.isfinite(norm)) and all(bool(torch.isfinite(g).all()) for g in grads)
    if overflows:
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64)
                                                     for g in grads]))
    value = float(norm)
    if max_norm is not None and math.isfinite(value) and value > max_norm:
        torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, norm)
    if max_value is not None:
        torch.nn.utils.clip_grad_value_(parameters, max_value)
    return GradientNorm(value, overflows)
