"""KRU's time loop at its papers' sizes: three routes to the same hidden states.

Forward + backward of a full sequence of KRU's transition (2 x 2 complex factors, real form of size
2N), float32, one thread, freed memory kept (``allocator.keep_freed_memory``, as in training), side by
side (medians of interleaved repeats; read the ratios):
- ``structured``: the loop with W h by ``kron_matvec`` at every step, W never formed (Algorithm 1);
- ``dense``: W formed once per pass from its factors, then the dense scan;
- ``kronecker``: the two-block scan ``A X B^T`` (``nn.kronecker_scan``), W never formed.
Cases: KRU's copy problem (N = 128 complex, T = 1000, batch 20) and adding problem (N = 512 complex,
T = 100, 200 and 750, batch 50); plus N = 64 complex, where the dense scan should stay ahead.

    python benchmarks/bench_kru_recurrence.py --out benchmarks/kru_recurrence_cpu.json
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from report import as_in_training, benchmark_parser, sequence_cases, write_report

from spectral_analysis.nn.kronecker_scan import kronecker_scan
from spectral_analysis.nn.peer_transitions import KroneckerTransition
from spectral_analysis.nn.time_loop import recurrence_loop, recurrence_scan

CASES = [("copy", 64, 1000, 20), ("copy", 128, 1000, 20), ("adding", 512, 100, 50),
         ("adding", 512, 200, 50), ("adding", 512, 750, 50)]


def routes(n: int, T: int, B: int) -> dict[str, Callable[[], torch.Tensor]]:
    """The three routes' forward passes, on KRU's transition of size ``n`` and a random sequence."""
    transition = KroneckerTransition(n, complex_factors=True)
    xp = torch.randn(T, B, 2 * n, requires_grad=True)
    h0 = torch.zeros(B, 2 * n)

    def structured() -> torch.Tensor:
        return recurrence_loop(xp, h0, transition.apply_reference, "relu", 0.0)

    def dense() -> torch.Tensor:
        return recurrence_scan(xp, transition.matrix(), h0, "relu", 0.0)

    def kronecker() -> torch.Tensor:
        return kronecker_scan(xp, transition.factors(), h0, "relu", 0.0)

    return {"structured": structured, "dense": dense, "kronecker": kronecker}


def main() -> None:
    parser = benchmark_parser(__doc__, repeats=3)
    parser.add_argument("--skip-structured-above", type=int, default=200,
                        help="time the factor-by-factor loop only up to this T (it is the slowest)")
    args = parser.parse_args()
    as_in_training()
    cases = sequence_cases(CASES, routes, args.repeats, {"dense_over_kronecker": ("dense", "kronecker"),
                                                         "structured_over_dense": ("structured", "dense")},
                           "structured", args.skip_structured_above)
    write_report(args.out, "cpu", "KRU transition, forward + backward, full sequence, 1 thread", cases)


if __name__ == "__main__":
    main()
