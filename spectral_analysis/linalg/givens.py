"""Packed Givens rotations (DizzyRNN, Section 4): an orthogonal W as ``P_1 P_2 ... P_K``.

``R_ab(theta)`` (a < b) is the identity except ``cos`` at (a, a), (b, b), ``sin`` at (a, b) and
``-sin`` at (b, a): ``y_a = cos x_a + sin x_b``, ``y_b = -sin x_a + cos x_b``. A packed rotation rotates
n/2 disjoint pairs at once; the round-robin schedule of :func:`packed_pairs` gives n - 1 packed
rotations (n even; n for odd n, with one coordinate left alone in each) covering every pair exactly
once, so K = n - 1 of them reach SO(n) and have ``n (n - 1) / 2`` angles in all.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def packed_pairs(n: int) -> list[tuple[list[int], list[int]]]:
    """The round-robin schedule: for each packed rotation, its pairs as index lists ``(a's, b's)``."""
    if n < 2:
        raise ValueError(f"Givens rotations need n >= 2, got {n}")
    players = list(range(n)) + ([None] if n % 2 else [])
    m = len(players)
    rounds = []
    for _ in range(m - 1):
        pairs = [(players[i], players[m - 1 - i]) for i in range(m // 2)]
        kept = [tuple(sorted(p)) for p in pairs if None not in p]
        rounds.append(([a for a, _ in kept], [b for _, b in kept]))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def rotation_count(n: int) -> int:
    """The number of packed rotations in the full schedule (n - 1, or n for odd n)."""
    return len(packed_pairs(n))


def apply_packed_rotation(h: Tensor, a: Tensor, b: Tensor, theta: Tensor) -> Tensor:
    """One packed rotation applied to ``h (..., n)``: index tensors ``a``, ``b``, one angle per pair."""
    c, s = torch.cos(theta), torch.sin(theta)
    ha, hb = h[..., a], h[..., b]
    out = h.clone()
    out[..., a] = c * ha + s * hb
    out[..., b] = -s * ha + c * hb
    return out


def givens_apply(angles: Sequence[Tensor], schedule: list[tuple[list[int], list[int]]], h: Tensor) -> Tensor:
    """``P_1 ... P_K h`` (P_K first) for angles ``[theta_1, ..., theta_K]``, one tensor per packed rotation
    (the first K rotations of ``schedule``)."""
    if len(angles) > len(schedule):
        raise ValueError(f"{len(angles)} packed rotations given, but the schedule has {len(schedule)}")
    for theta, (a, b) in reversed(list(zip(angles, schedule[: len(angles)], strict=True))):
        index_a = torch.tensor(a, device=h.device)
        index_b = torch.tensor(b, device=h.device)
        h = apply_packed_rotation(h, index_a, index_b, theta)
    return h


def givens_apply_transpose(
    angles: Sequence[Tensor], schedule: list[tuple[list[int], list[int]]], h: Tensor
) -> Tensor:
    """``(P_1 ... P_K)^T h``: each ``P_k^T`` is the packed rotation by ``-theta``, applied P_1 first."""
    if len(angles) > len(schedule):
        raise ValueError(f"{len(angles)} packed rotations given, but the schedule has {len(schedule)}")
    for theta, (a, b) in zip(angles, schedule[: len(angles)], strict=True):
        h = apply_packed_rotation(
            h, torch.tensor(a, device=h.device), torch.tensor(b, device=h.device), -theta
        )
    return h


def givens_matrix(angles: Sequence[Tensor], schedule: list[tuple[list[int], list[int]]], n: int) -> Tensor:
    """The dense ``P_1 ... P_K`` (rows of the identity pushed through :func:`givens_apply`, transposed)."""
    eye = torch.eye(n, dtype=angles[0].dtype, device=angles[0].device)
    return givens_apply(angles, schedule, eye).mT
