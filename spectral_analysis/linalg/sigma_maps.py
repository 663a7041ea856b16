"""Singular-value maps of Section 4: raw parameters ``sigma_hat`` -> singular values ``sigma``.

- ``sigmoid`` (Eq. 7, Vorontsov et al. 2017): ``sigma = 2r (f(sigma_hat) - 0.5) + sigma_star``, f the
  logistic sigmoid, so ``sigma`` lies in ``[sigma_star - r, sigma_star + r]`` for any raw value
  (the open interval in exact arithmetic; in floating point the sigmoid saturates to the ends).
- ``clip``: ``sigma = clamp(sigma_hat, sigma_star - r, sigma_star + r)`` (hard clipping);
  :meth:`SigmaMap.project_` clamps the raw parameter itself after an optimizer step.
- ``none``: ``sigma = sigma_hat`` with the penalty ``||sigma - sigma_star||^2`` (the paper's
  ``||sigma - 1||^2`` for the default ``sigma_star = 1``) to add to the loss.

``r = 0`` is allowed for ``sigmoid`` and ``clip``: every singular value is pinned to ``sigma_star``
(with ``sigma_star = 1``, W is orthogonal, the oRNN case of Section 4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from spectral_analysis.vocabulary import SIGMA_MAP_KINDS


@dataclass(frozen=True)
class SigmaMap:
    """A singular-value map: ``kind`` in ``sigmoid|clip|none``, centre ``sigma_star``, radius ``r``."""

    kind: str = "sigmoid"
    sigma_star: float = 1.0
    r: float = 0.1

    def __post_init__(self) -> None:
        if self.kind not in SIGMA_MAP_KINDS:
            raise ValueError(f"unknown sigma map {self.kind!r}; expected one of {SIGMA_MAP_KINDS}")
        if not math.isfinite(self.sigma_star):
            raise ValueError(f"sigma_star must be finite, got {self.sigma_star}")
        if self.kind != "none" and not (math.isfinite(self.r) and self.r >= 0):
            raise ValueError(f"radius r must be a finite number >= 0 for the {self.kind!r} map, got {self.r}")

    @property
    def bounds(self) -> tuple[float, float]:
        """The interval the map's output lies in (``(-inf, inf)`` for ``none``)."""
        if self.kind == "none":
            return (-math.inf, math.inf)
        return (self.sigma_star - self.r, self.sigma_star + self.r)

    def __call__(self, sigma_hat: Tensor) -> Tensor:
        if self.kind == "sigmoid":
            return 2.0 * self.r * (torch.sigmoid(sigma_hat) - 0.5) + self.sigma_star
        if self.kind == "clip":
            low, high = self.bounds
            return sigma_hat.clamp(low, high)
        return sigma_hat

    def derivative(self, sigma_hat: Tensor) -> Tensor:
        """``d sigma / d sigma_hat`` elementwise (Algorithm 1's ``d diag(Sigma) / d sigma_hat``)."""
        if self.kind == "sigmoid":
            s = torch.sigmoid(sigma_hat)
            return 2.0 * self.r * s * (1.0 - s)
        if self.kind == "clip":
            low, high = self.bounds
            return ((sigma_hat >= low) & (sigma_hat <= high)).to(sigma_hat.dtype)
        return torch.ones_like(sigma_hat)

    def inverse(self, sigma: Tensor) -> Tensor:
        """Raw values that map to ``sigma``; ``ValueError`` naming the values outside the range."""
        low, high = self.bounds
        if self.kind != "none" and self.r == 0:
            inside = sigma == self.sigma_star
        elif self.kind == "sigmoid":
            inside = (sigma > low) & (sigma < high)
        else:
            inside = (sigma >= low) & (sigma <= high)
        if sigma.device.type != "meta" and not bool(inside.all()):  # meta: shapes only, no values
            bad = sigma[~inside].flatten()[:5].tolist()
            interval = "open interval" if self.kind == "sigmoid" else "interval"
            raise ValueError(
                f"singular values {bad} lie outside the {interval} [{low}, {high}] of the "
                f"{self.kind!r} sigma map (sigma_star={self.sigma_star}, r={self.r})")
        if self.kind == "sigmoid":
            if self.r == 0:  # every raw value maps to sigma_star; pick the centre
                return torch.zeros_like(sigma)
            return torch.logit((sigma - self.sigma_star) / (2.0 * self.r) + 0.5)
        return sigma.clone()

    def penalty(self, sigma_hat: Tensor) -> Tensor:
        """``||sigma - sigma_star||^2``, the soft constraint used with the unconstrained map."""
        return ((self(sigma_hat) - self.sigma_star) ** 2).sum()

    @torch.no_grad()
    def project_(self, sigma_hat: Tensor) -> Tensor:
        """Clamp the raw parameter into range in place (projected gradient step for ``clip``)."""
        if self.kind == "clip":
            low, high = self.bounds
            sigma_hat.clamp_(low, high)
        return sigma_hat
