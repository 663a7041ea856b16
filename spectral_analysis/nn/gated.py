"""What the gated models (LSTM, GRU) offer the analyzers in place of a transition: their layers hold stacked
gate weights, unconstrained, whose spectra come from ``svdvals``."""

from __future__ import annotations

import torch
from torch import Tensor


class GatedWeights:
    """What a gated model (LSTM, GRU), whose layers hold stacked gate weights ``recurrent_weights``
    ``(gates * n, n)``, offers in place of a transition: unconstrained weights, svdvals for spectra."""

    def transition_matrix(self, layer: int = 0) -> Tensor:
        """The stacked recurrent weight of ``layer`` (every gate's block)."""
        return self.recurrent_weights[layer]

    def transition_matrices(self) -> list[Tensor]:
        return list(self.recurrent_weights)

    def singular_values(self, layer: int = 0) -> Tensor:
        return torch.linalg.svdvals(self.recurrent_weights[layer].detach())

    def spectral_penalty(self) -> Tensor:
        return self.biases[0].new_zeros(())

    def constrain_(self) -> None:
        """Nothing to project: gated weights are unconstrained."""

    def transition_parameter_count(self) -> int:
        return sum(w.numel() for w in self.recurrent_weights)
