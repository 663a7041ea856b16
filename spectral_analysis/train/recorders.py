"""What the trainer records about the weights: singular values and the spectral margin (Fig. 4)."""

from __future__ import annotations

from torch import Tensor, nn


def weight_singular_values(model: nn.Module) -> list[Tensor]:
    """Singular values, descending, of every transition matrix of a recurrent model (exact from sigma
    for the structured ones), or of every weight of a feed-forward net."""
    if hasattr(model, "transitions"):
        return [t.singular_values() for t in model.transitions]
    if hasattr(model, "num_layers") and hasattr(model, "transition_matrices"):
        return [model.singular_values(layer) for layer in range(model.num_layers)]
    return model.singular_values()


def spectral_margin(singular_values: list[Tensor]) -> float:
    """``max_i |sigma_i - 1|`` over all the matrices (Fig. 4)."""
    return max(float((s - 1.0).abs().max()) for s in singular_values)
