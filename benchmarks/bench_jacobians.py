"""All Jacobian products J(t) = dh^(T)/dh^(t), t = 0 .. T: backward recursion against per-t autograd.

Side by side in one run on the same model and input (Spectral-RNN, leaky_relu, float32, one sequence):
- ``recursion``: :func:`jacobian_products` (one step Jacobian ``D W`` and one matmul a step,
  rescaled), every ``J(t)`` kept, no singular values (what the autograd twin also returns);
- ``recursion_with_spectra``: the same plus all singular values of every ``J(t)`` (what ``analyze`` runs);
- ``table``: :func:`jacobian_table` (``sa.jacobians``), the spectra as a long-form DataFrame;
- ``autograd_vectorized``: :func:`jacobians_by_autograd` with ``vectorize=True`` (one batched
  backward of ``s_t -> s_T`` per t);
- ``autograd``: the same with PyTorch's default ``vectorize=False`` (n backward passes per t); timed
  on the first ``--autograd-steps`` values of t and extrapolated by the exact cost model
  sum over t of (T - t) steps (it takes minutes at full size).

    python benchmarks/bench_jacobians.py --out benchmarks/jacobians_cpu.json
"""

from __future__ import annotations

import argparse

import torch
from report import seconds, write_report

from spectral_analysis.analysis import jacobian_products, jacobians_by_autograd
from spectral_analysis.analysis.jacobians import jacobian_table
from spectral_analysis.nn import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--T", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--autograd-steps", type=int, default=4,
                        help="values of t timed for the non-vectorized autograd twin")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    n, T = args.n, args.T
    model = build_model("spectral", 2, n, 10, m1=n, m2=n)
    x = torch.randn(1, T, 2)
    recursion = jacobian_products(model, x, keep_matrices=True, spectra=False).matrices
    vectorized = jacobians_by_autograd(model, x, vectorize=True)
    error = float((recursion - vectorized).abs().max() / vectorized.abs().max())
    case = {"n": n, "T": T, "max_relative_difference": error,
            "recursion_s": seconds(lambda: jacobian_products(model, x, keep_matrices=True, spectra=False),
                                   args.repeats),
            "recursion_with_spectra_s": seconds(lambda: jacobian_products(model, x), args.repeats),
            "table_s": seconds(lambda: jacobian_table(model, x), args.repeats),
            "autograd_vectorized_s": seconds(lambda: jacobians_by_autograd(model, x, vectorize=True), 1)}
    k = args.autograd_steps
    partial = seconds(lambda: jacobians_by_autograd(model, x, times=k), 1)
    work_all, work_part = sum(T - t for t in range(T + 1)), sum(T - t for t in range(k))
    case["autograd_first_t_s"] = partial
    case["autograd_extrapolated_s"] = partial * work_all / work_part
    case["table_over_recursion_with_spectra"] = case["table_s"] / case["recursion_with_spectra_s"]
    case["autograd_vectorized_over_recursion"] = case["autograd_vectorized_s"] / case["recursion_s"]
    case["autograd_over_recursion"] = case["autograd_extrapolated_s"] / case["recursion_s"]
    case["autograd_vectorized_over_recursion_with_spectra"] = (case["autograd_vectorized_s"]
                                                               / case["recursion_with_spectra_s"])
    for key, value in case.items():
        print(f"{key:>48}: {value:.4g}" if isinstance(value, float) else f"{key:>48}: {value}")
    write_report(args.out, "cpu", "all J(t) = dh^(T)/dh^(t) of one sequence: recursion vs per-t autograd",
                 [case])


if __name__ == "__main__":
    main()
