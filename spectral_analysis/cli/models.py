"""``spectral-analysis params``: parameter counts of a registered model, by component.

The model flags (``--activation``, ``--m1``, ...) are shared with the commands that build models;
only the flags a user gives reach :func:`~spectral_analysis.nn.build_model`, so a flag the model
does not take is an error naming the options it accepts.
"""

from __future__ import annotations

import argparse
from typing import Any

from spectral_analysis.cli.common import add_output_arguments, emit, real
from spectral_analysis.vocabulary import (
    ACTIVATIONS,
    DENSE_INITS,
    DROPOUT_KINDS,
    FEEDFORWARD_INITS,
    LSTM_INITS,
    MODEL_NAMES,
    MODRELU,
    RECURRENCES,
    SIGMA_MAP_KINDS,
)

MODEL_FLAGS: dict[str, dict[str, Any]] = {
    "activation": {"choices": (*ACTIVATIONS, MODRELU), "help": "phi of Eq. 4 (default leaky_relu); modrelu: "
                   "complex KRU's units as its paper has them (Arjovsky et al.'s)"},
    "leak": {"type": real, "help": "leaky_relu leak in [0, 1] (default 0.2)"},
    "m": {"type": int, "help": "oRNN reflectors (default n)"},
    "m1": {"type": int, "help": "Spectral reflectors for U (default n)"},
    "m2": {"type": int, "help": "Spectral reflectors for V (default n)"},
    "r": {"type": real, "help": "singular values in [sigma* - r, sigma* + r] (default 0.1)"},
    "sigma_star": {"type": real, "help": "centre sigma* of the singular values (default 1)"},
    "sigma_map": {"choices": SIGMA_MAP_KINDS, "help": "Eq. 7 sigmoid, clip or none"},
    "unit_reflectors": {"action": argparse.BooleanOptionalAction, "help": "Spectral and oRNN: Householder "
                        "vectors back to unit length after each optimizer step (the authors' code)"},
    "input_std": {"type": real, "help": "std of the input weight M's Gaussian entries (default "
                  "1/sqrt(fan-in))"},
    "embedding": {"type": int, "help": "a word embedding of this width factors M = A E^T (a language model's "
                  "nn.Embedding before its recurrent layer; default none)"},
    "num_layers": {"type": int, "help": "stacked recurrent layers / hidden layers of an MLP"},
    "recurrence": {"choices": RECURRENCES, "help": "time-loop route (default auto)"},
    "init": {"choices": tuple(dict.fromkeys(DENSE_INITS + LSTM_INITS + FEEDFORWARD_INITS)),
             "help": f"RNN/IRNN transition init ({', '.join(DENSE_INITS)}); LSTM recurrent weights' "
                     f"({', '.join(LSTM_INITS)}); MLP/ResNet weights' ({', '.join(FEEDFORWARD_INITS)})"},
    "init_std": {"type": real, "help": "RNN: std of the gaussian transition init (default 1/sqrt(n))"},
    "bias_pair": {"action": argparse.BooleanOptionalAction, "help": "RNN/IRNN: the bias held as nn.RNN holds "
                  "it, b_ih + b_hh (Adam moves the sum twice as fast)"},
    "dropout": {"type": real, "help": "probability of zeroing a unit of each layer's input and the "
                "read-out's while training (default 0; never on W h)"},
    "dropout_kind": {"choices": DROPOUT_KINDS, "help": "standard: a fresh mask each step; locked: one mask "
                     "per sequence (variational)"},
    "forget_bias": {"type": real, "help": "LSTM forget-gate bias init (default 1)"},
    "output_bias": {"action": argparse.BooleanOptionalAction, "help": "bias on the read-out Y"},
    "factor_sizes": {"type": int, "nargs": "+", "help": "KRU factor sizes p_f, product = hidden size "
                     "(default all 2)"},
    "complex": {"action": argparse.BooleanOptionalAction, "help": "KRU complex factors (real form, size 2n)"},
    "rotations": {"type": int, "help": "DizzyRNN packed rotations K (default all: n - 1, n for odd n)"},
    "svd": {"action": argparse.BooleanOptionalAction, "help": "DizzyRNN Section 5: U diag(sigma) V^T"},
    "plain_ends": {"action": argparse.BooleanOptionalAction, "help": "Spectral-MLP/-ResNet: plain input and "
                   "output layers, SVD-parameterized hidden layers only"},
}


def add_model_flags(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """``--model NAME`` and every model option as a flag (default: the model's own default)."""
    parser.add_argument("--model", required=required, choices=MODEL_NAMES)
    for option, spec in MODEL_FLAGS.items():
        parser.add_argument("--" + option.replace("_", "-"), dest=option, default=None, **spec)


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """The model options the user set on the command line."""
    return {k: getattr(args, k) for k in MODEL_FLAGS if getattr(args, k) is not None}


def cmd_params(args: argparse.Namespace) -> int:
    from spectral_analysis.nn import build_model

    model = build_model(args.model, args.inputs, args.hidden, args.outputs, **model_options(args))
    counts = model.parameter_counts()
    payload = {"model": args.model, "inputs": args.inputs, "hidden": args.hidden, "outputs": args.outputs,
               "options": model.config["options"], **counts}

    def text(p: dict) -> str:
        lines = [f"{p['model']}: n_i={p['inputs']}, n={p['hidden']}, n_y={p['outputs']}"]
        keys = ("transition", "input", "output", "bias", "start_state", "total")  # start_state: modReLU nets
        lines += [f"  {key:<11} {p[key]:>12,d}" for key in keys if key in p]
        return "\n".join(lines)

    emit(args, payload, text, lambda p: [{k: v for k, v in p.items() if k != "options"}])
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    params = sub.add_parser("params", help="parameter counts of a model by component")
    add_model_flags(params)
    params.add_argument("--inputs", type=int, required=True, help="input size n_i")
    params.add_argument("--hidden", type=int, required=True, help="hidden size n")
    params.add_argument("--outputs", type=int, required=True, help="output size n_y")
    add_output_arguments(params)
    params.set_defaults(func=cmd_params)
