"""Models layer: transitions, recurrent and feed-forward nets, SVD parametrization hooks, the registry."""

from spectral_analysis.nn.feedforward import FeedForwardNet, SpectralLinear
from spectral_analysis.nn.gru import GRUNet
from spectral_analysis.nn.lstm import LSTMNet
from spectral_analysis.nn.parametrize import (
    SVDParametrization,
    constrain_,
    graph_weight_formation,
    reflector_length_sum,
    spectral_penalty,
    svd_factors,
    svd_parametrizations,
    svd_parametrize,
    svd_singular_values,
)
from spectral_analysis.nn.recurrent import RecurrentModel, RecurrentNet, RecurrentRun
from spectral_analysis.nn.registry import build_model
from spectral_analysis.nn.transitions import (
    DenseTransition,
    HouseholderTransition,
    SpectralTransition,
    Transition,
)
from spectral_analysis.vocabulary import (
    ACTIVATIONS,
    DEFAULT_LEAK,
    MODEL_NAMES,
    MODEL_OPTIONS,
    RECURRENCES,
    RECURRENT_MODELS,
)

__all__ = [
    "ACTIVATIONS", "DEFAULT_LEAK", "MODEL_NAMES", "MODEL_OPTIONS", "RECURRENCES", "RECURRENT_MODELS",
    "DenseTransition", "FeedForwardNet", "GRUNet", "HouseholderTransition", "LSTMNet", "RecurrentModel",
    "RecurrentNet", "RecurrentRun", "SVDParametrization", "SpectralLinear", "SpectralTransition",
    "Transition", "build_model", "constrain_", "graph_weight_formation", "reflector_length_sum",
    "spectral_penalty", "svd_factors", "svd_parametrize", "svd_parametrizations", "svd_singular_values",
]
