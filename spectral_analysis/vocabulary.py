"""The toolkit's names and their defaults, in one module that imports nothing heavy (no torch, numpy,
matplotlib): the command line builds its whole parser from these in a fraction of a second, and every
module that implements a name imports it from here.
"""

from __future__ import annotations

from typing import Any

# the non-linearities phi of Eq. 4 (spectral_analysis.nn.activations)
ACTIVATIONS = ("relu", "leaky_relu", "tanh", "abs", "identity")
# complex units' modReLU (spectral_analysis.nn.modrelu): the uRNN's, and complex KRU's as its paper has it
MODRELU = "modrelu"
DEFAULT_LEAK = 0.2  # tf.nn.leaky_relu's default alpha; the ICML paper's experiments ran on TensorFlow

# the registered models and every option with its default (spectral_analysis.nn.registry)
# dropout on the non-recurrent connections (spectral_analysis.nn.dropout): zeroing probability and kind
DROPOUT_KINDS = ("standard", "locked")
_DROPOUT = {"dropout": 0.0, "dropout_kind": "standard"}
_RECURRENT = {"activation": "leaky_relu", "leak": DEFAULT_LEAK, "num_layers": 1, "recurrence": "auto",
              "output_bias": False, "input_std": None, "embedding": None, **_DROPOUT}
_SIGMA = {"sigma_map": "sigmoid", "sigma_star": 1.0, "r": 0.1, "unit_reflectors": False}
_FEEDFORWARD = {"activation": "leaky_relu", "leak": DEFAULT_LEAK, "num_layers": 2, "output_bias": True}
MODEL_OPTIONS: dict[str, dict[str, Any]] = {
    # bias_pair: Eq. 4's b held as nn.RNN holds it, b_ih + b_hh (spectral_analysis.nn.recurrent.BiasPair)
    "rnn": {**_RECURRENT, "init": "gaussian", "init_std": None, "bias_pair": False},
    # ICML Section 7: "initialized to be orthogonal"
    "irnn": {**_RECURRENT, "init": "orthogonal", "bias_pair": False},
    "lstm": {"num_layers": 1, "recurrence": "auto", "output_bias": False, "forget_bias": 1.0,
             "input_std": None, "init": "gaussian", "embedding": None, **_DROPOUT},
    "gru": {"num_layers": 1, "recurrence": "auto", "output_bias": False, "input_std": None, "embedding": None,
            **_DROPOUT},
    "ornn": {**_RECURRENT, "m": None, "unit_reflectors": False},
    "spectral": {**_RECURRENT, "m1": None, "m2": None, **_SIGMA},
    "kru": {**_RECURRENT, "activation": "relu", "factor_sizes": None, "complex": False},
    "dizzy": {**_RECURRENT, "activation": "abs", "rotations": None, "svd": False},
    "urnn": {"output_bias": True, "num_layers": 1, "input_std": None, "embedding": None},
    # init: the plain weights' Gaussian, N(0, 1/fan_in) ("lecun") or He et al.'s (2015) for phi ("he")
    "mlp": {**_FEEDFORWARD, "init": "lecun"},
    "resnet": {**_FEEDFORWARD, "init": "lecun"},
    "spectral-mlp": {**_FEEDFORWARD, "m1": None, "m2": None, **_SIGMA, "plain_ends": False},
    "spectral-resnet": {**_FEEDFORWARD, "m1": None, "m2": None, **_SIGMA, "plain_ends": False},
}
MODEL_NAMES = tuple(MODEL_OPTIONS)
RECURRENT_MODELS = ("rnn", "irnn", "lstm", "gru", "ornn", "spectral", "kru", "dizzy", "urnn")
# time-loop kernels (nn.time_loop)
RECURRENCES = ("auto", "torch", "scan", "graph", "fused", "loop", "reflector")
DENSE_INITS = ("gaussian", "identity", "orthogonal")  # a dense transition's initializations
LSTM_INITS = ("gaussian", "orthogonal", "identity-orthogonal")  # the LSTM's recurrent weights' (nn.lstm)
FEEDFORWARD_INITS = ("lecun", "he")  # an MLP's or ResNet's plain weights' (nn.feedforward.plain_linear)
SIGMA_MAP_KINDS = ("sigmoid", "clip", "none")  # Eq. 7's sigmoid map, a clip, or none

# tasks and training (spectral_analysis.data, spectral_analysis.train)
MNIST_VARIANTS = ("mnist", "permuted-mnist", "mnist-flat")
TASK_NAMES = ("addition", "copy", *MNIST_VARIANTS, "ucr", "ptb", "jsb")
PTB_LEVELS = ("word", "char")  # Penn Treebank's tokens: ICML Table 3's words, KRU Table 3's characters
OPTIMIZER_NAMES = ("adam", "rmsprop", "sgd")
# what a sequence task's training objective does over the scored steps: their mean (PyTorch's
# word_language_model), or their sum, averaged over the batch only (Zaremba et al. 2014; TensorFlow's PTB)
SEQUENCE_LOSSES = ("mean", "sum-over-steps")
# calibrate: the share of the reference's gain over the constant predictor a baseline may fall short of
# (spectral_analysis.experiments.calibration.allowed_excess)
CALIBRATION_MARGIN = 0.1
SCALES = ("paper", "budget", "smoke")  # experiment scales of the catalog, in the order their evidence is read
SWEEP_BACKENDS = ("ray", "processes")  # the runner: Ray Tune, or plain local processes
MAX_SEEDS = 1000  # seeds of one grid configuration, in a catalog or --seeds
MAX_TRIALS = 100_000  # trials of one grid: a larger one is refused before it is expanded
REQUIRED_SCALES = ("paper", "smoke")  # every experiment declares these; "budget" only the GPU tier

# subjects and certificates (spectral_analysis.io, spectral_analysis.analysis.certify)
ARCHITECTURES = ("rnn_tanh", "rnn_relu", "gru", "lstm")  # plain PyTorch cells the importers read
OBJECTIVES = ("classic", "quadratic", "lambda")  # PAC-Bayes training objectives
PRIORS = ("init", "learned")
MEANS = ("checkpoint", "fitted")  # a certificate's Q: centred on the subject, or its mean fitted from there

# the bounds (spectral_analysis.analysis.bound_report)
DEFAULT_DELTA = 0.05

# the linear-RNN landscape run's sizes and budgets (spectral_analysis.paper.landscape.LandscapeConfig)
LANDSCAPE_DEFAULTS: dict[str, Any] = {
    "hidden": 3, "length": 3, "outputs": None, "starts": 12, "seed": 0, "e": 1.0, "high": 2.5, "noise": 0.1,
    "samples": 1000, "iterations": 1500, "monte_carlo": 200_000,
}
