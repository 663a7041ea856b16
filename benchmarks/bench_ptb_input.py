"""Layer 0 of an embedded word-level model (Table 3): where the embedding ``E`` meets the weight ``A``.

With ``embedding = e`` the input weight is ``M = A E^T`` (``rows x 10,000``,
:mod:`spectral_analysis.nn.input_matrix`). Forward + backward of one training window through
``torch.lstm`` (PTB, T = 300, batch 20, n = e = 128, float32, one thread, freed memory kept as in
training), side by side (medians of interleaved repeats; read the ratios):
- ``embedded``: the words' rows ``E[ids]`` go in against ``A`` (``4n x e``), what
  :func:`~spectral_analysis.nn.input_matrix.symbol_vectors` hands the LSTM since 2026-12-07, and where
  dropout acts on the embedded word as Zaremba et al.'s;
- ``product_columns``: ``M = A E^T`` (``4n x 10,000``) formed, the words select its columns and
  ``torch.lstm`` gets ``I`` (``4n x 4n``): the route before, whose dropout acted on ``A E[w]``;
- ``read_out``: the same window's read-out and loss alone (``10,000 x n`` scores, cross entropy), the
  rest of a training step, for scale.

    python benchmarks/bench_ptb_input.py --out benchmarks/ptb_input_cpu.json
"""

from __future__ import annotations

import torch
from bench_lstm_symbols import lstm_backward
from report import as_in_training, benchmark_parser, side_by_side, write_report
from torch import nn

VOCABULARY, LENGTH, BATCH, HIDDEN = 10_000, 300, 20, 128


def routes() -> dict:
    embedding = torch.randn(VOCABULARY, HIDDEN, requires_grad=True)
    A = (torch.randn(4 * HIDDEN, HIDDEN) / HIDDEN**0.5).requires_grad_()
    w_hh = (torch.randn(4 * HIDDEN, HIDDEN) / HIDDEN**0.5).requires_grad_()
    bias = torch.zeros(4 * HIDDEN, requires_grad=True)
    read_out = (torch.randn(VOCABULARY, HIDDEN) / HIDDEN**0.5).requires_grad_()
    ids = torch.randint(0, VOCABULARY, (BATCH, LENGTH))
    targets = torch.randint(0, VOCABULARY, (BATCH, LENGTH))

    def embedded() -> None:
        lstm_backward(nn.functional.embedding(ids, embedding), A, w_hh, bias)

    def product_columns() -> None:
        lstm_backward(nn.functional.embedding(ids, (A @ embedding.T).T), torch.eye(4 * HIDDEN), w_hh, bias)

    def read_out_and_loss() -> None:
        hidden = torch.randn(BATCH, LENGTH, HIDDEN)
        nn.functional.cross_entropy((hidden @ read_out.T).flatten(0, 1), targets.flatten(),
                                    reduction="sum").backward()

    return {"embedded": embedded, "product_columns": product_columns, "read_out": read_out_and_loss}


def main() -> None:
    args = benchmark_parser(__doc__, repeats=5).parse_args()
    as_in_training()
    label = {"case": "Table 3 LSTM(1, 128), one PTB window", "vocabulary": VOCABULARY, "T": LENGTH,
             "B": BATCH, "n": HIDDEN, "e": HIDDEN}
    ratios = {"product_columns_over_embedded": ("product_columns", "embedded"),
              "read_out_over_embedded": ("read_out", "embedded")}
    case = side_by_side(label, routes(), args.repeats, ratios)
    write_report(args.out, "cpu", "layer 0 of an embedded PTB LSTM, forward + backward, 1 thread", [case])


if __name__ == "__main__":
    main()
