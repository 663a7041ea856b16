"""Two pieces of a recurrent training step around the time loop, each against the route it replaced.

Forward + backward, float32, one thread, freed memory kept as in training, side by side (medians of
interleaved repeats; read the ratios):
- input projection ``M x_t + b`` of every step: ``nn.input_projection`` (``x M^T`` with ``M^T``
  contiguous, so autograd forms ``dL/dM^T = x^T G``) against ``F.linear`` (whose ``dL/dM = G^T x``
  is a narrow GEMM);
- read-out of a last-step task: ``RecurrentRun.last_outputs`` (only ``y_T``) against ``outputs`` (every
  ``y_t``, then the last one taken);
- a whole training step (forward, loss, backward): as the trainer runs it now, with ``F.linear`` patched
  back in for the projection, and with every step read out.
Cases: the catalog's adding problem (KRU N = 512 complex and RNN n = 128, batch 50), pixel MNIST
(Spectral-RNN n = 128, batch 128).

    python benchmarks/bench_training_pieces.py --out benchmarks/training_pieces_cpu.json
"""

from __future__ import annotations

from unittest.mock import patch

import torch
from report import as_in_training, benchmark_parser, interleaved_medians, write_report

from spectral_analysis.nn import build_model, recurrent
from spectral_analysis.nn.recurrent import input_projection

CASES = [("adding, KRU", "kru", 2, 512, 1, 100, 50), ("adding, KRU", "kru", 2, 512, 1, 750, 50),
         ("adding, RNN", "rnn", 2, 128, 1, 750, 50),
         ("pixel MNIST, Spectral-RNN", "spectral", 1, 128, 10, 784, 128)]


def projection_routes(x: torch.Tensor, M: torch.Tensor, b: torch.Tensor) -> dict:
    G = torch.randn(x.shape[1], x.shape[0], M.shape[0])

    def ours() -> None:
        torch.autograd.grad(input_projection(x.transpose(0, 1), M, b), (M, b), G)

    def f_linear() -> None:
        torch.autograd.grad(torch.nn.functional.linear(x.transpose(0, 1), M, b), (M, b), G)

    return {"input_projection": ours, "F.linear": f_linear}


def readout_routes(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor) -> dict:
    run = model.run(x)
    hidden = run.hidden[-1].detach().transpose(0, 1).contiguous().requires_grad_()  # (T, B, n), as scanned

    def loss(outputs: torch.Tensor) -> torch.Tensor:
        y = outputs[:, -1]
        return torch.nn.functional.mse_loss(y, target) if target.is_floating_point() else \
            torch.nn.functional.cross_entropy(y, target)

    def last() -> None:
        loss(model.output(hidden.transpose(0, 1)[:, -1:])).backward()

    def every() -> None:
        loss(model.output(hidden.transpose(0, 1))).backward()

    def step() -> None:
        loss(model.run(x).last_outputs()).backward()

    def step_f_linear() -> None:
        with patch.object(recurrent, "input_projection", torch.nn.functional.linear):
            loss(model.run(x).last_outputs()).backward()

    def step_every() -> None:
        loss(model.run(x).outputs).backward()

    return {"readout last": last, "readout every": every, "step": step,
            "step, F.linear projection": step_f_linear, "step, every read-out": step_every}


def main() -> None:
    args = benchmark_parser(__doc__, repeats=5).parse_args()
    as_in_training()
    cases = []
    for label, name, n_i, n, n_y, length, batch in CASES:
        torch.manual_seed(0)
        model = build_model(name, n_i, n, n_y, **({"complex": True} if name == "kru" else {}))
        x = torch.rand(batch, length, n_i)
        target = torch.randn(batch, n_y) if n_y == 1 else torch.randint(0, n_y, (batch,))
        M, b = model.input_weights[0], model.biases[0]
        seconds = interleaved_medians(projection_routes(x, M, b), args.repeats)
        seconds |= interleaved_medians(readout_routes(model, x, target), args.repeats)
        case = {"case": label, "model": name, "N": n, "T": length, "B": batch, "n_i": n_i, "seconds": seconds,
                "F.linear_over_input_projection": seconds["F.linear"] / seconds["input_projection"],
                "readout_every_over_last": seconds["readout every"] / seconds["readout last"],
                "step_f_linear_over_step": seconds["step, F.linear projection"] / seconds["step"],
                "step_every_readout_over_step": seconds["step, every read-out"] / seconds["step"]}
        cases.append(case)
        print(f"{label:28s} T={length:4d}  F.linear/ours {case['F.linear_over_input_projection']:.2f}x  "
              f"read-out every/last {case['readout_every_over_last']:.2f}x  "
              f"step with F.linear {case['step_f_linear_over_step']:.2f}x, reading every step "
              f"{case['step_every_readout_over_step']:.2f}x  (step {seconds['step']:.3f} s)")
    write_report(args.out, "cpu", "input projection, read-out and whole step, forward + backward, 1 thread",
                 cases)


if __name__ == "__main__":
    main()
