"""Forward + backward time of materializing a product of m Householder reflectors (n x n).

Compares, side by side in one run (medians of interleaved repeats; ratios, not absolute times,
are what to read on a noisy machine):
- ``blocked``: the compact-WY product (spectral_analysis.linalg.packed_reflector_product);
- ``sequential``: m rank-one updates (packed_reflector_product_sequential, the reference);
- ``torch``: torch.linalg.householder_product (LAPACK orgqr and its autograd backward);
- ``fused`` (CUDA with Triton, n <= 128): the one-launch kernels of
  spectral_analysis.linalg.fused_householder, what the SVD map forms U and V with there;
- ``matmul``: one n x n matmul, forward + backward, the unit of the targets.

    python benchmarks/bench_householder.py --out benchmarks/householder_cpu.json [--device cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from report import write_report

from spectral_analysis.linalg import (
    normalize_reflectors,
    packed_reflector_product,
    packed_reflector_product_sequential,
    trapezoid_mask,
)
from spectral_analysis.linalg.svd_map import fused_product_unavailable


def torch_product(Y: torch.Tensor) -> torch.Tensor:
    """The same n x n product through torch.linalg.householder_product: unit pivots, tau = 2 p^2,
    and n - m zero columns with tau = 0 (identity reflectors) so that orgqr returns all of Q."""
    n, m = Y.shape
    Yn = normalize_reflectors(Y)
    pivots = torch.diagonal(Yn[:m, :m])
    V = torch.nn.functional.pad(Yn / pivots, (0, n - m))
    tau = torch.nn.functional.pad(2 * pivots**2, (0, n - m))
    return torch.linalg.householder_product(V, tau)


def fwd_bwd_seconds(fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor]) -> float:
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    sync = torch.cuda.synchronize if inputs[0].is_cuda else (lambda: None)
    sync()
    start = time.perf_counter()
    out = fn(*leaves)
    out.backward(torch.ones_like(out))
    sync()
    return time.perf_counter() - start


def bench_case(n: int, m: int, repeats: int, device: str, block_sizes: list[int]) -> dict:
    gen = torch.Generator().manual_seed(n + m)
    Y = (torch.randn(n, m, generator=gen) * trapezoid_mask(n, m, dtype=torch.float32)).to(device)
    A, B = (torch.randn(n, n, generator=gen).to(device) for _ in range(2))
    methods: dict[str, tuple[Callable, list]] = {"matmul": (lambda a, b: a @ b, [A, B])}
    for b in block_sizes:
        methods[f"blocked_b{b}"] = (lambda y, b=b: packed_reflector_product(y, b), [Y])
    methods["sequential"] = (packed_reflector_product_sequential, [Y])
    methods["torch"] = (torch_product, [Y])
    if not fused_product_unavailable(Y):
        from spectral_analysis.linalg.fused_householder import fused_reflector_product
        methods["fused"] = (fused_reflector_product, [Y])
    times: dict[str, list[float]] = {k: [] for k in methods}
    for fn, inputs in methods.values():  # warm-up
        fwd_bwd_seconds(fn, inputs)
    for _ in range(repeats):  # interleaved, so drift hits every method alike
        for name, (fn, inputs) in methods.items():
            times[name].append(fwd_bwd_seconds(fn, inputs))
    med = {k: statistics.median(v) for k, v in times.items()}
    best_block = min(block_sizes, key=lambda b: med[f"blocked_b{b}"])
    blocked = med[f"blocked_b{best_block}"]
    return {
        "n": n, "m": m, "seconds": med, "best_block": best_block,
        "blocked_over_matmul": blocked / med["matmul"],
        "sequential_over_blocked": med["sequential"] / blocked,
        "torch_over_blocked": med["torch"] / blocked,
    } | ({"fused_over_blocked": med["fused"] / blocked, "fused_over_matmul": med["fused"] / med["matmul"]}
         if "fused" in med else {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 1024])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--blocks", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    torch.manual_seed(0)
    cases = []
    for n in args.sizes:
        for m in sorted({16, n // 2, n}):
            case = bench_case(n, m, args.repeats, args.device, args.blocks)
            cases.append(case)
            print(f"n={n:5d} m={m:5d}  blocked(b={case['best_block']}) = "
                  f"{case['blocked_over_matmul']:.2f} x matmul   sequential = "
                  f"{case['sequential_over_blocked']:.1f} x blocked   torch = "
                  f"{case['torch_over_blocked']:.1f} x blocked"
                  + (f"   fused = {case['fused_over_blocked']:.2f} x blocked"
                     if "fused_over_blocked" in case else ""), flush=True)
    write_report(args.out, args.device, "forward + backward", cases)


if __name__ == "__main__":
    main()
