"""Argument checks that every model constructor shares, so a bad size or scale is named in one
``ValueError`` before any tensor is built."""

from __future__ import annotations

import math


def check_positive_sizes(**sizes: object) -> None:
    """``ValueError`` naming the first of ``sizes`` that is not a positive integer (a bool is not one).

    >>> check_positive_sizes(input_size=1, hidden_size=0)
    Traceback (most recent call last):
    ValueError: hidden_size must be a positive integer, got 0
    """
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def check_input_std(input_std: float | None) -> None:
    """``ValueError`` unless ``input_std`` (the input weights' standard deviation) is None or a finite
    number > 0."""
    if input_std is not None and (isinstance(input_std, bool) or not isinstance(input_std, int | float)
                                  or not math.isfinite(input_std) or input_std <= 0):
        raise ValueError(f"input_std must be a finite number > 0 (or None for 1/sqrt(fan-in)), "
                         f"got {input_std!r}")


def layer_input_stds(fan_ins: list[int], input_std: float | None, fan_scale: int = 1) -> list[float]:
    """The standard deviation each layer's input weight starts at: ``input_std`` for the first layer's,
    the network's input matrix (a vocabulary's word embedding), ``1/sqrt(fan_scale * fan-in)`` for the
    layers above it, whose inputs are the hidden states below, and for the first where ``input_std`` is
    None.

    >>> layer_input_stds([10000, 128], 0.0577)
    [0.0577, 0.08838834764831845]
    """
    return [input_std if layer == 0 and input_std is not None else (fan_scale * fan_in) ** -0.5
            for layer, fan_in in enumerate(fan_ins)]
