"""Paper check: the depth experiment of ICML Section 7.2 (Fig. 5) at reduced size.

The paper: MLPs on flattened MNIST, leaky ReLU, hidden width 128, 30-100 layers after the input layer;
"MLP is not able to function around L ~ 35 and ResNet with L ~ 70. On the other hand, the SVD based
methods are resilient to increasing depth and thus achieve higher precision."

Quick: width 64, depths 10 and 40, 300 Adam steps (lr 1e-3, batch 50); otherwise width 128, depths 30,
60 and 100, 2000 steps. Accuracy is measured on 1000 test images. Every model also reports its forward
gain ``log10 ||h_L|| / ||h_0||`` (mean over 200 test images) before and after training: how much the
signal shrinks or grows through the depth.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spectral_analysis.checks import CheckRecord
from spectral_analysis.data import load_task
from spectral_analysis.nn import build_model
from spectral_analysis.nn.activations import DEFAULT_LEAK
from spectral_analysis.train import TrainConfig, load_checkpoint, train
from spectral_analysis.train.evaluation import RunLog

MODELS = ("mlp", "resnet", "spectral-mlp", "spectral-resnet")
SPECTRAL = ("spectral-mlp", "spectral-resnet")
PLAIN_ENDS = " (plain ends)"  # key suffix of the SVD nets with plain input and output layers
READINGS = {"": "every layer SVD-parameterized", PLAIN_ENDS: "plain input and output layers"}
TEST_BATCHES = 20  # of 50 images
SOURCE = "ICML Section 7.2 (Fig. 5)"


@dataclass
class DepthRun:
    """One model at one depth: final test accuracy, the validation curve and the forward gain before and
    after training."""

    accuracy: float
    steps: np.ndarray
    valid_accuracy: np.ndarray
    log10_gain_at_init: float
    log10_gain_trained: float


def forward_gain(model: torch.nn.Module, inputs: torch.Tensor) -> float:
    """Mean over the batch of ``log10 ||h_L|| / ||h_0||``: h_0 after the input layer, h_L after the last
    hidden layer (or block)."""
    with torch.no_grad():
        _, hidden = model(inputs, return_hidden=True)
    norms = hidden.double().norm(dim=-1)
    return float(torch.log10(norms[-1] / norms[0]).mean())


def depth_sweep(
    depths: tuple[int, ...],
    hidden: int,
    steps: int,
    models: tuple[str, ...] = MODELS,
    options: dict[str, Any] | None = None,
    seed: int = 0,
) -> dict[str, dict[int, DepthRun]]:
    """Train each feed-forward model of Fig. 5 on flattened MNIST at each depth (``runs[model][depth]``),
    with the model ``options`` (e.g. ``plain_ends``) on top of the depth; the leak is the models' default."""
    task = load_task("mnist-flat")
    probe = task.test.inputs[:200]
    runs: dict[str, dict[int, DepthRun]] = {m: {} for m in models}
    with tempfile.TemporaryDirectory() as tmp:
        for depth in depths:
            for model in models:
                model_options: dict[str, Any] = {"num_layers": depth, **(options or {})}
                torch.manual_seed(seed)  # the trainer seeds the same way: gain of the net it starts from
                gain = forward_gain(
                    build_model(model, task.input_size, hidden, task.output_size, **model_options), probe
                )
                out = Path(tmp) / f"{model}-{depth}"
                result = train(
                    TrainConfig(
                        model=model,
                        task="mnist-flat",
                        out=str(out),
                        hidden=hidden,
                        steps=steps,
                        lr=1e-3,
                        model_options=model_options,
                        record_every=10,
                        eval_every=max(steps // 10, 1),
                        checkpoint_every=steps,
                        eval_batches=TEST_BATCHES,
                        progress=False,
                        seed=seed,
                    )
                )
                curve = [line for line in RunLog(out / "metrics.jsonl").read() if line["phase"] == "valid"]
                runs[model][depth] = DepthRun(
                    float(result["test"]["accuracy"]),
                    np.array([c["step"] for c in curve]),
                    np.array([c["accuracy"] for c in curve]),
                    gain,
                    forward_gain(load_checkpoint(out / "last.safetensors").model, probe),
                )
    return runs


def fig5_runs(
    depths: tuple[int, ...], hidden: int, steps: int, seed: int = 0
) -> dict[str, dict[int, DepthRun]]:
    """MLP and ResNet, and their SVD versions in the two readings of the paper: every layer
    SVD-parameterized, and plain input and output layers (keys suffixed :data:`PLAIN_ENDS`)."""
    runs = depth_sweep(depths, hidden, steps, models=MODELS, seed=seed)
    ends = depth_sweep(depths, hidden, steps, models=SPECTRAL, options={"plain_ends": True}, seed=seed)
    return {**runs, **{m + PLAIN_ENDS: v for m, v in ends.items()}}


def _drop(runs: dict[int, DepthRun]) -> float:
    """Accuracy lost from the shallowest to the deepest net."""
    return runs[min(runs)].accuracy - runs[max(runs)].accuracy


def records_from_runs(runs: dict[str, dict[int, DepthRun]], size: str) -> list[CheckRecord]:
    """Two claims, each judged in both readings: Spectral-MLP beats MLP at the deepest L, and the SVD nets
    lose no more accuracy from the shallowest to the deepest L than their plain twins (tolerance 0.02)."""
    depths = sorted(next(iter(runs.values())))
    deep = depths[-1]
    table = "; ".join(
        f"{m}: " + ", ".join(f"L = {d} {r.accuracy:.3f}" for d, r in v.items()) for m, v in runs.items()
    )
    gains = ", ".join(
        f"{m} {v[deep].log10_gain_at_init:.2f} -> {v[deep].log10_gain_trained:.2f}" for m, v in runs.items()
    )
    numbers = {
        key: {m: {d: getattr(r, key) for d, r in v.items()} for m, v in runs.items()}
        for key in ("accuracy", "log10_gain_at_init", "log10_gain_trained")
    }
    drops = {m: _drop(v) for m, v in runs.items()}
    records = []
    for suffix, reading in READINGS.items():
        mlp, spectral = runs["mlp"][deep].accuracy, runs["spectral-mlp" + suffix][deep].accuracy
        records.append(
            CheckRecord(
                SOURCE,
                f"Spectral-MLP trains at depths where plain MLP fails (L = {deep}; {reading})",
                "holds" if spectral > mlp else "differs",
                f"{size}: {table}. At L = {deep}, Spectral-MLP ({reading}) {spectral:.3f} against MLP "
                f"{mlp:.3f}. "
                f"Forward gain log10 ||h_L||/||h_0|| at L = {deep}, at init -> trained: {gains}",
                {**numbers, "deepest": deep},
            )
        )
        pairs = {f"spectral-{p}{suffix}": p for p in ("mlp", "resnet")}
        resilient = {s: drops[s] <= drops[p] + 0.02 for s, p in pairs.items()}
        records.append(
            CheckRecord(
                SOURCE,
                f"the SVD-based nets are resilient to increasing depth: they lose no more accuracy from "
                f"L = {depths[0]} to L = {deep} than MLP and ResNet ({reading})",
                "holds" if all(resilient.values()) else "differs",
                f"{size}: accuracy lost from L = {depths[0]} to L = {deep}: "
                + ", ".join(f"{m} {drops[m]:.3f}" for m in ("mlp", "resnet", *pairs))
                + "; as claimed for "
                + (", ".join(s for s, ok in resilient.items() if ok) or "neither")
                + " (tolerance 0.02)",
                {"accuracy_drop": {m: drops[m] for m in ("mlp", "resnet", *pairs)}},
            )
        )
    return records


def run(quick: bool = True) -> list[CheckRecord]:
    depths, hidden, steps = ((10, 40), 64, 300) if quick else ((30, 60, 100), 128, 2000)
    size = (
        f"flattened MNIST, width {hidden}, {steps} Adam steps, leaky ReLU (leak {DEFAULT_LEAK}), "
        f"sigma in [0.9, 1.1], seed 0; test accuracy on {TEST_BATCHES * 50} images"
    )
    return records_from_runs(fig5_runs(depths, hidden, steps), size)
