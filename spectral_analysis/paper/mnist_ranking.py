"""Paper check: Fig. 3's caption, "Spectral-RNN constantly yields the highest test accuracy", at reduced
size: pixel MNIST and permuted MNIST at 4 pixels a step (196 steps; the paper uses 392 and 784), hidden
size 32, 400 Adam steps (lr 1e-3, batch 50), seed 0, RNN, IRNN, oRNN, Spectral-RNN and LSTM; test
accuracy on 1000 images. Without ``quick``: the paper's 784 steps, hidden size 128, 2000 steps.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from spectral_analysis.checks import CheckRecord
from spectral_analysis.train import TrainConfig, train

MODELS = ("rnn", "irnn", "ornn", "spectral", "lstm")
TEST_BATCHES = 20  # of 50 images


def final_test_accuracy(task: str, pixels_per_step: int, hidden: int, steps: int) -> dict[str, float]:
    """Each model's test accuracy after ``steps`` Adam steps on ``task`` (``mnist``, ``permuted-mnist``)."""
    accuracy = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            result = train(
                TrainConfig(
                    model=model,
                    task=task,
                    out=str(Path(tmp) / model),
                    hidden=hidden,
                    steps=steps,
                    lr=1e-3,
                    task_options={"pixels_per_step": pixels_per_step},
                    record_every=10,
                    eval_every=steps,
                    checkpoint_every=steps,
                    eval_batches=TEST_BATCHES,
                    progress=False,
                    seed=0,
                )
            )
            accuracy[model] = float(result["test"]["accuracy"])
    return accuracy


def run(quick: bool = True) -> list[CheckRecord]:
    pixels, hidden, steps = (4, 32, 400) if quick else (1, 128, 2000)
    records = []
    for task, name in (("mnist", "pixel MNIST"), ("permuted-mnist", "permuted MNIST")):
        accuracy = final_test_accuracy(task, pixels, hidden, steps)
        best = max(accuracy, key=accuracy.__getitem__)
        ranking = ", ".join(f"{m} {a:.3f}" for m, a in sorted(accuracy.items(), key=lambda x: -x[1]))
        records.append(
            CheckRecord(
                "ICML Section 7.2 (Fig. 3)",
                f"Spectral-RNN yields the highest test accuracy on {name}",
                "holds" if best == "spectral" else "differs",
                f"{name}, {784 // pixels} steps ({pixels} pixels a step), n = {hidden}, {steps} Adam steps, "
                "seed 0; "
                f"test accuracy on {TEST_BATCHES * 50} images, best first: {ranking}",
                {"test_accuracy": accuracy, "steps_per_sequence": 784 // pixels},
            )
        )
    return records
