"""KRU's time loop at its papers' sizes: W applied factor by factor against W materialized once.

Forward + backward of a full sequence, float32, one thread, side by side (medians of interleaved
repeats; read the ratios):
- ``structured``: ``recurrence="reflector"``, W h by ``kron_matvec`` at every step, W never formed;
- ``dense``: ``recurrence="scan"``, W formed once per pass from its factors, then the scan.
Cases: KRU's copy problem (N = 128 complex, T = 1000, batch 20, symbol ids) and adding problem
(N = 512 complex, T = 100 and 200, batch 50), with 2 x 2 complex factors.

    python benchmarks/bench_kru_recurrence.py --out benchmarks/kru_recurrence_cpu.json
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from report import write_report

from spectral_analysis.nn import build_model

CASES = [("copy", 128, 1000, 20), ("adding", 512, 100, 50), ("adding", 512, 200, 50)]


def seconds(model: torch.nn.Module, x: torch.Tensor) -> float:
    start = time.perf_counter()
    model(x).square().mean().backward()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cases = []
    for task, n, T, B in CASES:
        ni, ny = (10, 10) if task == "copy" else (2, 1)
        x = torch.randint(0, ni, (B, T)) if task == "copy" else torch.randn(B, T, ni)
        models = {route: build_model("kru", ni, n, ny, complex=True, recurrence=mode)
                  for route, mode in (("structured", "reflector"), ("dense", "scan"))}
        models["dense"].load_state_dict(models["structured"].state_dict())
        times: dict[str, list[float]] = {route: [] for route in models}
        for _ in range(args.repeats):
            for route, model in models.items():
                times[route].append(seconds(model, x))
        med = {route: statistics.median(v) for route, v in times.items()}
        case = {"task": task, "N": n, "T": T, "B": B, "seconds": med,
                "structured_over_dense": med["structured"] / med["dense"]}
        cases.append(case)
        print(f"{task} N={n} T={T} B={B}: structured {med['structured']:.3f} s, dense {med['dense']:.3f} s "
              f"({case['structured_over_dense']:.1f}x)", flush=True)
    write_report(args.out, "cpu", "KRU forward + backward, full sequence, 1 thread", cases)


if __name__ == "__main__":
    main()
