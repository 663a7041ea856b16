"""KRU's Kronecker product with 2 x 2 factors against a dense matvec (Jose et al., Section 3.1).

Side by side in one run, float32, complex factors (KRU's choice) and real ones, per batch size B:
- ``factored``: :func:`kron_matvec`, W never formed (O(n log n) per vector);
- ``dense``: ``h @ W^T`` with W formed beforehand (O(n^2) per vector; the forming is not timed);
- ``form``: forming W from its factors once (:func:`kron_matrix`).

    python benchmarks/bench_kronecker.py --out benchmarks/kronecker_cpu.json
"""

from __future__ import annotations

import argparse
import math

import torch
from report import seconds, write_report

from spectral_analysis.linalg import kron_matrix, kron_matvec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    cases = []
    for dtype in (torch.complex64, torch.float32):
        for n in args.n:
            factors = [torch.randn(2, 2, dtype=dtype, device=args.device) for _ in range(int(math.log2(n)))]
            W = kron_matrix(factors)
            for B in args.batch:
                h = torch.randn(B, n, dtype=dtype, device=args.device)
                error = float((kron_matvec(factors, h) - h @ W.mT).abs().max() / (h @ W.mT).abs().max())

                factored = seconds(lambda f=factors, x=h: (kron_matvec(f, x), sync()), args.repeats)
                dense = seconds(lambda x=h, M=W: (x @ M.mT, sync()), args.repeats)
                form = seconds(lambda f=factors: (kron_matrix(f), sync()), args.repeats)
                cases.append({"dtype": str(dtype).replace("torch.", ""), "n": n, "batch": B,
                              "factored_s": factored, "dense_s": dense, "form_s": form,
                              "dense_over_factored": dense / factored, "max_relative_difference": error})
                print(f"{cases[-1]['dtype']:>9} n={n:5d} B={B:3d}: factored {factored * 1e6:9.1f} us, dense "
                      f"{dense * 1e6:9.1f} us (x{dense / factored:6.2f}), forming W {form * 1e3:8.2f} ms, "
                      f"rel diff {error:.1e}")
    write_report(args.out, args.device, "kron_matvec (2 x 2 factors) vs dense matvec", cases)


if __name__ == "__main__":
    main()
