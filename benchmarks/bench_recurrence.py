"""Forward + backward time of a full sequence: Spectral-RNN against PyTorch's own ``nn.RNN``.

Side by side in one run (medians of interleaved repeats; read the ratios, not the seconds):
- ``nn_rnn_relu``: ``nn.RNN(nonlinearity="relu")`` + a linear read-out, the unit of the targets;
- ``rnn_relu``: the toolkit's plain RNN (dense W) by its default route, the scan;
- ``spectral_relu``: ``build_model("spectral", ...)`` with its default route (``auto``: the scan on
  CPU, PyTorch's fused kernel / cuDNN on CUDA), W materialized once per pass from its m1 + m2
  reflectors;
- ``spectral_leaky_relu``: the same model with leaky ReLU by the eager ``scan`` (``auto``'s route on
  CPU; on CUDA ``auto`` takes ``graph``, timed beside it);
- ``spectral_relu_torch_kernel``: the same model forced through PyTorch's fused kernel;
- ``spectral_leaky_relu_graph`` (CUDA only): the leaky-ReLU model with its scan replayed as CUDA graphs
  (``recurrence="graph"``);
- ``spectral_reflector``: the paper's per-step reflector loop (Algorithm 1), the reference
  (fewer repeats: it is slow). It stores every reflector's input for its backward, (m1 + m2) T B n
  numbers (105 GB at n = m = 512, T = 784, B = 64), so it runs only for n <= --reflector-max-n.

    python benchmarks/bench_recurrence.py --out benchmarks/recurrence_cpu.json [--device cuda]
        [--cases 64:16 128:16 256:16 512:16 512:512] [--lengths 100 784] [--threads N]

Threads and the load average are recorded per case.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import torch
from report import write_report
from torch import nn

from spectral_analysis.nn import build_model
from spectral_analysis.threads import set_threads


def fwd_bwd_seconds(step: Callable[[], torch.Tensor], device: str) -> float:
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    start = time.perf_counter()
    step().backward()
    sync()
    return time.perf_counter() - start


def make_case(n: int, m: int, T: int, B: int, device: str) -> dict[str, Callable[[], torch.Tensor]]:
    ni, ny = 1, 10
    x = torch.randn(B, T, ni, device=device)
    rnn = nn.RNN(ni, n, nonlinearity="relu", batch_first=True).to(device)
    read_out = nn.Linear(n, ny, bias=False).to(device)
    with torch.no_grad():  # keep the relu recurrence stable over 784 steps
        rnn.weight_hh_l0.copy_(torch.linalg.qr(torch.randn(n, n))[0])

    def nn_rnn() -> torch.Tensor:
        return read_out(rnn(x)[0]).square().mean()

    def spectral(activation: str, recurrence: str) -> Callable[[], torch.Tensor]:
        model = build_model("spectral", ni, n, ny, m1=m, m2=m, activation=activation,
                            recurrence=recurrence).to(device)
        return lambda: model(x).square().mean()

    plain = build_model("rnn", ni, n, ny, activation="relu").to(device)
    return {"nn_rnn_relu": nn_rnn,
            "rnn_relu": lambda: plain(x).square().mean(),
            "spectral_relu": spectral("relu", "auto"),
            "spectral_leaky_relu": spectral("leaky_relu", "scan"),
            "spectral_relu_torch_kernel": spectral("relu", "torch"),
            "spectral_reflector": spectral("relu", "reflector")} | (
        {"spectral_leaky_relu_graph": spectral("leaky_relu", "graph")} if device.startswith("cuda") else {})


def bench_case(n: int, m: int, T: int, B: int, repeats: int, reflector_repeats: int, device: str) -> dict:
    steps = make_case(n, m, T, B, device)
    if not reflector_repeats:
        del steps["spectral_reflector"]
    fast = {k: v for k, v in steps.items() if k != "spectral_reflector"}
    times: dict[str, list[float]] = {k: [] for k in steps}
    for step in fast.values():  # warm-up
        fwd_bwd_seconds(step, device)
    for i in range(repeats):  # interleaved, so drift hits every method alike
        for name, step in fast.items():
            times[name].append(fwd_bwd_seconds(step, device))
        if i < reflector_repeats:
            times["spectral_reflector"].append(fwd_bwd_seconds(steps["spectral_reflector"], device))
    med = {k: statistics.median(v) for k, v in times.items() if v}
    base = med["nn_rnn_relu"]
    result = {"n": n, "m1": m, "m2": m, "T": T, "B": B, "seconds": med,
              "rnn_relu_over_nn_rnn": med["rnn_relu"] / base,
              "spectral_relu_over_nn_rnn": med["spectral_relu"] / base,
              "spectral_leaky_relu_over_nn_rnn": med["spectral_leaky_relu"] / base,
              "spectral_torch_kernel_over_nn_rnn": med["spectral_relu_torch_kernel"] / base}
    if "spectral_leaky_relu_graph" in med:
        result["leaky_relu_graph_over_scan"] = med["spectral_leaky_relu_graph"] / med["spectral_leaky_relu"]
    if "spectral_reflector" in med:
        result["reflector_over_spectral_relu"] = med["spectral_reflector"] / med["spectral_relu"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["128:16", "512:512"],
                        help="hidden size and reflector count m1 = m2, as n:m")
    parser.add_argument("--lengths", type=int, nargs="+", default=[784], help="sequence lengths T")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--reflector-repeats", type=int, default=1)
    parser.add_argument("--reflector-max-n", type=int, default=128)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: the free cores)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    threads = set_threads(args.threads)
    torch.manual_seed(0)
    cases = []
    for spec, T in ((spec, T) for spec in args.cases for T in args.lengths):
        n, m = (int(v) for v in spec.split(":"))
        reflector_repeats = args.reflector_repeats if n <= args.reflector_max_n else 0
        case = bench_case(n, m, T, args.batch, args.repeats, reflector_repeats, args.device)
        case.update({"threads": threads, "load_average": os.getloadavg()[0]})
        cases.append(case)
        print(f"n={n:4d} T={T:4d} m1=m2={m:4d}: rnn relu {case['rnn_relu_over_nn_rnn']:.3f} x nn.RNN, "
              f"spectral relu {case['spectral_relu_over_nn_rnn']:.3f} x nn.RNN, "
              f"leaky_relu {case['spectral_leaky_relu_over_nn_rnn']:.3f} x, via torch kernel "
              f"{case['spectral_torch_kernel_over_nn_rnn']:.3f} x, graph/scan "
              f"{case.get('leaky_relu_graph_over_scan', float('nan')):.3f}; reflector loop "
              f"{case.get('reflector_over_spectral_relu', float('nan')):.1f} x slower", flush=True)
    write_report(args.out, args.device, "forward + backward, full sequence", cases)


if __name__ == "__main__":
    main()
