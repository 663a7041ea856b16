"""Paper-scale trials sharing one GPU: training throughput (steps a second, all processes together) of
one trial configuration run as K processes side by side on CUDA, each with its time loop by route R:

- ``scan``: the eager scan (``auto``'s route for leaky ReLU on CUDA), two kernel launches a time step
  each way;
- ``graph``: the same scan with both loops replayed as CUDA graphs (``nn.cuda_graphs``).

A lent card ran twelve such trials side by side at 100% utilization (docs/howto/experiments.md); this
says how much of that the host launches cost, alone and shared. Arrangements are interleaved over
``--repeats`` and the medians kept (bench_trial_parallelism's timing: two warm-up steps, then
``--steps`` steps).

    python benchmarks/bench_gpu_sharing.py fig3-mnist/spectral_taskmnist_pixels_per_step1 \\
        --processes 1 12 --routes scan graph --out benchmarks/gpu_sharing_cuda.json
"""

from __future__ import annotations

import statistics

import torch
from bench_trial_parallelism import throughput
from report import benchmark_parser, write_report


def main() -> None:
    parser = benchmark_parser(__doc__, repeats=1)
    parser.add_argument("configurations", nargs="+", metavar="EXPERIMENT/KEY")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 12])
    parser.add_argument("--routes", nargs="+", default=["scan", "graph"])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu_sharing.py needs a CUDA device")
    cases = []
    for configuration in args.configurations:
        arrangements = [(k, route) for k in args.processes for route in args.routes]
        rates: dict[str, list[float]] = {f"{k}x{route}": [] for k, route in arrangements}
        for _ in range(args.repeats):
            for k, route in arrangements:
                rates[f"{k}x{route}"].append(throughput(configuration, k, 1, args.steps, "cuda", route))
        median = {name: round(statistics.median(values), 3) for name, values in rates.items()}
        case = {"configuration": configuration, "steps": args.steps, "repeats": args.repeats,
                "gpu": torch.cuda.get_device_name(), "steps_per_second": median}
        if {"scan", "graph"} <= set(args.routes):
            case["graph_over_scan"] = {k: round(median[f"{k}xgraph"] / median[f"{k}xscan"], 3)
                                       for k in args.processes}
        print(configuration, median, case.get("graph_over_scan"), flush=True)
        cases.append(case)
    write_report(args.out, "cuda", "paper-scale trials sharing one GPU: K processes x time-loop route "
                 "(steps a second, all processes together)", cases)


if __name__ == "__main__":
    main()
