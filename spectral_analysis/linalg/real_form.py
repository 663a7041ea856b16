"""The real form of complex vectors and matrices: ``z = x + iy`` as ``(x; y)``, and a complex matrix W as
``[[Re W, -Im W], [Im W, Re W]]``, so that ``real_matrix(W) @ real_vector(z) = real_vector(W z)``.
KRU's complex factors and the uRNN run on it, so every analyzer sees a real network."""

from __future__ import annotations

import torch
from torch import Tensor


def real_vector(z: Tensor) -> Tensor:
    """``(..., n)`` complex -> ``(..., 2n)`` real ``(Re z; Im z)``."""
    return torch.cat([z.real, z.imag], dim=-1)


def complex_vector(h: Tensor) -> Tensor:
    """The inverse of :func:`real_vector`: ``(..., 2n)`` real -> ``(..., n)`` complex."""
    n = h.shape[-1] // 2
    return torch.complex(h[..., :n], h[..., n:])


def real_matrix(W: Tensor) -> Tensor:
    """``(n, n)`` complex -> ``(2n, 2n)`` real ``[[Re W, -Im W], [Im W, Re W]]``."""
    return torch.cat([torch.cat([W.real, -W.imag], dim=1), torch.cat([W.imag, W.real], dim=1)], dim=0)
