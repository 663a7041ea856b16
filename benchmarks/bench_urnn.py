"""The uRNN's training pass: its one-node scan against the autograd loop and the per-step reference.

Forward + backward of a full sequence (float32, one thread, freed memory kept as in training), side by
side (medians of interleaved repeats; read the ratios):
- ``run``: ``UnitaryRNN.run``, each layer's factors and the input projections of all steps computed
  once, the state kept complex, the time loop one autograd node (``nn.unitary_scan``, since 2026-11-25);
- ``loop``: the same with ``recurrence="loop"``, autograd through every step (``run`` until 2026-11-25);
- ``step_function``: the per-step view the analyzers use (``step_function``), which converts the state
  between real and complex forms and rebuilds the factors at every step (``run`` until 2026-11-24).
Case: ICML Table 2's uRNN row, pixel MNIST (T = 784, n = 512, batch 128), and a shorter T.

    python benchmarks/bench_urnn.py --out benchmarks/urnn_cpu.json
"""

from __future__ import annotations

import torch
from report import as_in_training, benchmark_parser, saved_bytes, side_by_side, write_report

from spectral_analysis.nn import build_model

CASES = [("pixel MNIST, Table 2 uRNN", 784, 128, 512), ("pixel MNIST, first 100 steps", 100, 128, 512)]


def routes(length: int, batch: int, n: int) -> dict:
    model = build_model("urnn", 1, n, 10)
    x = torch.rand(batch, length, 1)
    labels = torch.randint(0, 10, (batch,))

    def loss(outputs: torch.Tensor) -> None:
        torch.nn.functional.cross_entropy(outputs[:, -1], labels).backward()

    def run() -> None:
        loss(model.run(x).outputs)

    def loop() -> None:
        loss(model.run(x, recurrence="loop").outputs)

    def step_function() -> None:
        step, state, states = model.step_function(), model.flat_state(model.start_state(batch)), []
        for t in range(length):
            state = step(state, x[:, t])
            states.append(state)
        loss(model.readout(torch.stack(states, dim=1)))

    return {"run": run, "loop": loop, "step_function": step_function}


def main() -> None:
    args = benchmark_parser(__doc__, repeats=3).parse_args()
    as_in_training()
    cases = []
    for name, length, batch, n in CASES:
        timed = routes(length, batch, n)
        case = side_by_side({"case": name, "T": length, "B": batch, "n": n}, timed, args.repeats,
                            {"loop_over_run": ("loop", "run"),
                             "step_function_over_run": ("step_function", "run")})
        case["saved_for_backward_gib"] = {route: saved_bytes(fn) / 2**30 for route, fn in timed.items()}
        cases.append(case)
        print("  saved for backward " + ", ".join(f"{route} {gib:.2f} GiB"
                                                 for route, gib in case["saved_for_backward_gib"].items()))
    write_report(args.out, "cpu", "uRNN forward + backward of a sequence, 1 thread", cases)


if __name__ == "__main__":
    main()
