"""Training trajectories read from a run's ``metrics.jsonl`` (the trainer's ``train`` lines).

Per recorded step: the singular values of every transition matrix, the spectral margin
``max_i |sigma_i - 1|`` (Fig. 4), the condition number ``sigma_max / sigma_min`` of each matrix,
``||dL/dh^(0)||`` (Fig. 1 and 4) and the largest gradient norm over all parameters since the previous
record (a burst that blew up the optimizer's state shows there). An analyzer never trains: it only reads
what the run wrote.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spectral_analysis.atomic import read_text_file


@dataclass
class Trajectory:
    """One run's recorded dynamics; arrays are indexed by recorded step."""

    model: str
    run: str
    steps: np.ndarray  # (S,)
    singular_values: list[np.ndarray]  # per matrix, (S, k) descending
    spectral_margin: np.ndarray  # (S,)
    grad_h0_norm: np.ndarray  # (S,), nan where not recorded
    grad_norm_peak: np.ndarray  # (S,), nan where not recorded (runs before 2026-11-28)

    @property
    def condition_numbers(self) -> list[np.ndarray]:
        with np.errstate(divide="ignore"):
            return [s[:, 0] / s[:, -1] for s in self.singular_values]

    def rows(self) -> list[dict[str, Any]]:
        """Long-form table: one row per recorded step (the plotting layer's input)."""
        conditions = self.condition_numbers
        return [{"model": self.model, "run": self.run, "step": int(step),
                 "spectral_margin": float(self.spectral_margin[i]),
                 "sigma_max": float(max(s[i, 0] for s in self.singular_values)),
                 "sigma_min": float(min(s[i, -1] for s in self.singular_values)),
                 "condition_number": float(max(c[i] for c in conditions)),
                 "grad_h0_norm": float(self.grad_h0_norm[i]),
                 "grad_norm_peak": float(self.grad_norm_peak[i])}
                for i, step in enumerate(self.steps)]


def read_trajectory(run_dir: str | Path) -> Trajectory:
    """The trajectory of the run in ``run_dir`` (``metrics.jsonl`` and ``config.json``)."""
    run = Path(run_dir)
    log = run / "metrics.jsonl"
    if not log.is_file():
        raise ValueError(f"{run} holds no metrics.jsonl: not a run directory of spectral-analysis train")
    model = "unknown"
    config = run / "config.json"
    if config.is_file():
        model = json.loads(read_text_file(config, "run configuration", limit=2 ** 24)).get(
            "model", {}).get("name", model)
    lines = []
    for number, text in enumerate(read_text_file(log, "run log").splitlines(), 1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{log}:{number} is not JSON ({error})") from None
        if line.get("phase") == "train" and "singular_values" in line:
            lines.append(line)
    if not lines:
        raise ValueError(f"{log} has no recorded train lines with singular values")
    matrices = len(lines[0]["singular_values"])
    svals = [np.array([line["singular_values"][k] for line in lines], dtype=np.float64)
             for k in range(matrices)]

    def recorded(key: str) -> np.ndarray:
        return np.array([math.nan if line.get(key) is None else line[key] for line in lines],
                        dtype=np.float64)

    return Trajectory(model, str(run), np.array([line["step"] for line in lines]), svals,
                      np.array([line["spectral_margin"] for line in lines], dtype=np.float64),
                      recorded("grad_h0_norm"), recorded("grad_norm_peak"))


def trajectory_table(run_dirs: list[str | Path]) -> list[dict[str, Any]]:
    """The long-form rows of several runs (e.g. RNN and Spectral-RNN) in one table, keyed by model."""
    return [row for run in run_dirs for row in read_trajectory(run).rows()]
