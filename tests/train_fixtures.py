"""Shared by the training tests: a small Spectral-RNN run's configuration and its log's rows."""

import json
from pathlib import Path

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
