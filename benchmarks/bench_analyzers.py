"""The analyzers at paper scale: a pixel-MNIST Spectral-RNN (n = 128, m1 = m2 = 16, T = 784).

Side by side in one run, with the toolkit's thread policy (the free cores; recorded with the load):
- ``forward``: one forward pass of the trainer's model over the whole training set, batches of 64,
  no graph (the floor the margins are measured against);
- ``bound``: ``bound --data train`` (margins of every training sequence, the empirical margin loss,
  the measured B and the explicit A.6 bound);
- ``analyze``: everything ``analyze`` computes on 8 test sequences (the bound with training
  margins, Lemma 3, Jacobian products with spectra, ||dL/dh_t||, Lyapunov exponents);
- ``jacobians_autograd``: every J(t) by one batched (vmapped) backward pass of autograd, the fair
  baseline of the backward recursion (the per-t recomputation the README once quoted costs O(T^2)),
  beside ``jacobians``, the recursion (both without spectra, float64).

    python benchmarks/bench_analyzers.py --out benchmarks/analyzers_cpu.json [--train-size N]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
from report import write_report

from spectral_analysis.analysis.bound_report import bound_report
from spectral_analysis.analysis.checkpoint_data import checkpoint_task, sample_batch
from spectral_analysis.analysis.jacobians import jacobian_products
from spectral_analysis.analysis.report import analyze_subject
from spectral_analysis.io import load
from spectral_analysis.threads import set_threads
from spectral_analysis.train import TrainConfig, train


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def jacobians_by_one_backward(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Every ``J(t) = dh_T/dh_t`` by one batched backward pass of autograd (``is_grads_batched``: the d
    rows of the identity as d vmapped cotangents); ``(B, T + 1, d, d)``."""
    step = model.step_function()
    s = model.flat_state(model.start_state(x.shape[0])).detach().requires_grad_()
    states = [s]
    for t in range(x.shape[1]):
        s = step(s, x[:, t])
        states.append(s)
    d = s.shape[-1]
    eye = torch.eye(d, dtype=s.dtype).unsqueeze(1).expand(d, s.shape[0], d)
    grads = torch.autograd.grad(s, states, grad_outputs=eye, is_grads_batched=True)  # each (d, B, d)
    return torch.stack(grads, dim=2).permute(1, 2, 0, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-size", type=int, default=None, help="default: all 50,000")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    threads = set_threads()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        options = {"pixels_per_step": 1} if args.train_size is None else {"train_size": args.train_size}
        train(TrainConfig(model="spectral", task="mnist", out=str(run), hidden=128,
                          model_options={"m1": 16, "m2": 16}, task_options=options, steps=1, batch_size=64,
                          eval_every=10**9, checkpoint_every=10**9, eval_batches=1, test_batches=1,
                          progress=False))
        subject = load(run / "last.safetensors")
        task = checkpoint_task(subject.metadata)
        model = subject.model

        def forward() -> None:
            with torch.no_grad():
                for start in range(0, len(task.train), 64):
                    model.run(task.train.inputs[start:start + 64])

        seconds = {}
        seconds["forward"], _ = timed(forward)
        seconds["bound"], report = timed(lambda: bound_report(subject, data="train", margin=1.0))
        seconds["analyze"], _ = timed(lambda: analyze_subject(subject))
        x, _ = sample_batch(task, task.test, 2, seed=0)
        x64, model64 = x.double(), model.double()
        seconds["jacobians"], _ = timed(lambda: jacobian_products(model64, x64, spectra=False))
        seconds["jacobians_autograd"], _ = timed(lambda: jacobians_by_one_backward(model64, x64))
    case = {"model": "spectral n = 128, m1 = m2 = 16", "task": "pixel MNIST, T = 784",
            "train_sequences": len(task.train), "threads": threads, "load_average_before": load_before,
            "seconds": seconds, "bound_over_forward": seconds["bound"] / seconds["forward"],
            "autograd_over_recursion": seconds["jacobians_autograd"] / seconds["jacobians"],
            "margin_loss": report["margin_loss"], "jacobian_samples": 2}
    print(case, flush=True)
    write_report(args.out, "cpu", "analyzers on a pixel-MNIST Spectral-RNN checkpoint", [case])


if __name__ == "__main__":
    main()
