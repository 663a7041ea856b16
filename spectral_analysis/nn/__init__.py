"""Models layer: SVD parametrization hooks (and, in later issues, the recurrent and feed-forward nets)."""

from spectral_analysis.nn.parametrize import SVDParametrization, svd_parametrize, svd_singular_values

__all__ = ["SVDParametrization", "svd_parametrize", "svd_singular_values"]
