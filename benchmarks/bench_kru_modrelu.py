"""What KRU's modReLU units cost: its time loop with modReLU against the same loop with ReLU on the real
and imaginary parts, and the modReLU scan against its autograd twin.

Forward + backward of a full sequence of KRU's transition (2 x 2 complex factors, real form 2N),
float32, one thread, freed memory kept as in training, side by side (medians of interleaved repeats;
read the ratios):
- ``crelu``: the route ``auto`` takes for ReLU (the dense scan below a real-form size of 512, the
  two-block scan from it);
- ``modrelu``: the same route with modReLU (``KroneckerTransition.modrelu_scan``);
- ``modrelu_loop``: the reference, autograd through every step on complex states (only up to
  ``--skip-loop-above``).
Cases: KRU's copy problem (N = 128, T = 1000, batch 20) and adding problem (N = 512, T = 200 and 750,
batch 50).

    python benchmarks/bench_kru_modrelu.py --out benchmarks/kru_modrelu_cpu.json
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from report import as_in_training, benchmark_parser, sequence_cases, write_report

from spectral_analysis.linalg import complex_vector, real_vector
from spectral_analysis.nn.modrelu import modrelu
from spectral_analysis.nn.peer_transitions import KroneckerTransition

CASES = [("copy", 128, 1000, 20), ("adding", 512, 200, 50), ("adding", 512, 750, 50)]


def routes(n: int, T: int, B: int) -> dict[str, Callable[[], torch.Tensor]]:
    """The three routes' forward passes, on KRU's transition of size ``n`` and a random sequence."""
    transition = KroneckerTransition(n, complex_factors=True)
    xp = torch.randn(T, B, 2 * n, requires_grad=True)
    h0 = torch.randn(B, 2 * n) / n**0.5
    b = torch.empty(n).uniform_(-0.01, 0.01).requires_grad_()

    def modrelu_loop() -> torch.Tensor:
        h, states = complex_vector(h0), []
        for u in complex_vector(xp).unbind(0):
            h = modrelu(transition.complex_apply(h) + u, b)
            states.append(h)
        return real_vector(torch.stack(states))

    return {"crelu": lambda: transition.scan(xp, h0, "relu", 0.0),
            "modrelu": lambda: transition.modrelu_scan(xp, h0, b), "modrelu_loop": modrelu_loop}


def main() -> None:
    parser = benchmark_parser(__doc__, repeats=3)
    parser.add_argument("--skip-loop-above", type=int, default=200,
                        help="time the autograd loop only up to this T (it is the slowest)")
    args = parser.parse_args()
    as_in_training()
    cases = sequence_cases(CASES, routes, args.repeats, {"modrelu_over_crelu": ("modrelu", "crelu"),
                                                         "loop_over_modrelu": ("modrelu_loop", "modrelu")},
                           "modrelu_loop", args.skip_loop_above)
    write_report(args.out, "cpu", "KRU transition with modReLU and with CReLU, forward + backward, full "
                 "sequence, 1 thread", cases)


if __name__ == "__main__":
    main()
