"""Shared by the training tests: a small Spectral-RNN run's configuration, its log's rows, and a constant
classifier (the certificates' closed case)."""

import json
from pathlib import Path

import torch

from spectral_analysis.nn import build_model
from spectral_analysis.train import TrainConfig


def small_config(out: Path, **overrides) -> TrainConfig:
    """A 24-step Spectral-RNN run on the adding problem (n = 12) into ``out``, with ``overrides``."""
    base = dict(model="spectral", task="addition", out=str(out), hidden=12, batch_size=16,
                model_options={"m1": 4, "m2": 6, "r": 0.05},
                task_options={"length": 12, "train_size": 160, "valid_size": 32, "test_size": 32},
                steps=24, record_every=4, eval_every=8, checkpoint_every=5, progress=False)
    base.update(overrides)
    return TrainConfig(**base)


def log_lines(out: Path) -> list[dict]:
    """The rows of ``out``'s ``metrics.jsonl``."""
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def constant_classifier() -> torch.nn.Module:
    """An RNN whose weights are all zero but its output bias: it answers class 0 to every sequence."""
    model = build_model("rnn", 1, 3, 2, output_bias=True)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.output.bias.copy_(torch.tensor([1.0, 0.0]))
    return model
