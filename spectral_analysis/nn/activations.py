"""The non-linearities phi of Eq. 4: relu, leaky_relu (with its leak), tanh, abs and identity.

``leaky_relu(z) = max(leak * z, z)`` for ``0 <= leak <= 1`` as in the earlier version's Fig. 2
(leak = 0 is relu, leak = 1 the identity); ``identity`` gives the linear RNN of the theory
(earlier version, Section 6); ``abs`` is DizzyRNN's norm-preserving non-linearity.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from spectral_analysis.vocabulary import ACTIVATIONS, DEFAULT_LEAK


def check_activation(name: str, leak: float = DEFAULT_LEAK) -> None:
    """``ValueError`` naming the problem for an unknown activation or a leak outside [0, 1]."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; expected one of {ACTIVATIONS}")
    if name == "leaky_relu" and not (math.isfinite(leak) and 0.0 <= leak <= 1.0):
        raise ValueError(f"leak must lie in [0, 1] (leaky_relu(z) = max(leak z, z)), got {leak}")


def activate(z: Tensor, name: str, leak: float = DEFAULT_LEAK) -> Tensor:
    """``phi(z)`` (out of place, differentiable by autograd)."""
    if name == "relu":
        return torch.relu(z)
    if name == "leaky_relu":
        return torch.nn.functional.leaky_relu(z, leak)
    if name == "tanh":
        return torch.tanh(z)
    if name == "abs":
        return z.abs()
    return z


def activate_(z: Tensor, name: str, leak: float = DEFAULT_LEAK) -> Tensor:
    """``phi(z)`` in place (no autograd), for the scan's forward pass."""
    if name == "relu":
        return z.relu_()
    if name == "leaky_relu":
        return torch.nn.functional.leaky_relu_(z, leak)
    if name == "tanh":
        return z.tanh_()
    if name == "abs":
        return z.abs_()
    return z


def derivative(z: Tensor, name: str, leak: float = DEFAULT_LEAK) -> Tensor:
    """``phi'(z)`` from the pre-activation, with autograd's values at the kinks (relu'(0) = 0,
    leaky_relu'(0) = leak, abs'(0) = 0)."""
    if name == "relu":
        return (z > 0).to(z.dtype)
    if name == "leaky_relu":
        return torch.where(z > 0, torch.ones_like(z), torch.full_like(z, leak))
    if name == "tanh":
        return 1.0 - torch.tanh(z) ** 2
    if name == "abs":
        return torch.sign(z)
    return torch.ones_like(z)


def derivative_from_output(h: Tensor, name: str, leak: float = DEFAULT_LEAK) -> Tensor:
    """``phi'(z)`` read off ``h = phi(z)`` (relu, leaky_relu with leak > 0, tanh, identity).

    At z = 0 the values match PyTorch's autograd: relu'(0) = 0, leaky_relu'(0) = leak.
    ``abs`` is not invertible from its output; use ``torch.sgn(z)`` with the stored z instead.
    """
    if name == "relu" or (name == "leaky_relu" and leak == 0.0):
        return (h > 0).to(h.dtype)
    if name == "leaky_relu":
        return torch.where(h > 0, torch.ones_like(h), torch.full_like(h, leak))
    if name == "tanh":
        return 1.0 - h * h
    if name == "identity":
        return torch.ones_like(h)
    raise ValueError(f"the derivative of {name!r} cannot be read off its output")
