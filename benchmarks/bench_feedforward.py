"""The Fig. 5 nets' training step: the hidden SVD weights composed in one batched call or layer by layer.

A whole training step (forward, cross entropy, backward, Adam), float32, one thread, freed memory kept
as in training, side by side (medians of interleaved repeats; read the ratio):
- ``batched``: ``FeedForwardNet`` as it trains, the hidden weights from ``stacked_svd_weights``;
- ``per layer``: each ``SpectralLinear`` composing its own weight (the batched call patched out).
Cases: the ``fig5-depth`` catalog's nets on flattened MNIST (width 128, batch 128), L = 30 and 100.

    python benchmarks/bench_feedforward.py --out benchmarks/feedforward_cpu.json
"""

from __future__ import annotations

from unittest.mock import patch

import torch
from report import as_in_training, benchmark_parser, side_by_side, write_report

from spectral_analysis.nn import build_model, feedforward

CASES = [("spectral-mlp", 30), ("spectral-mlp", 100), ("spectral-resnet", 100)]


def routes(name: str, depth: int) -> dict:
    model = build_model(name, 784, 128, 10, num_layers=depth)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, labels = torch.rand(128, 784), torch.randint(0, 10, (128,))

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), labels).backward()
        optimizer.step()

    def per_layer() -> None:
        with patch.object(feedforward, "stacked_svd_weights", lambda layers: None):
            step()

    return {"batched": step, "per layer": per_layer}


def main() -> None:
    args = benchmark_parser(__doc__, repeats=5).parse_args()
    as_in_training()
    cases = []
    for name, depth in CASES:
        cases.append(side_by_side({"model": name, "L": depth, "width": 128, "B": 128}, routes(name, depth),
                                  args.repeats, {"per_layer_over_batched": ("per layer", "batched")}))
    write_report(args.out, "cpu", "feed-forward training step (forward, backward, Adam), 1 thread", cases)


if __name__ == "__main__":
    main()
