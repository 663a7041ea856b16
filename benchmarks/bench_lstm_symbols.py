"""The LSTM on symbol inputs: two ways to hand ``torch.lstm`` the input projection.

Forward + backward of a full sequence through ``torch.lstm`` (n = 128, float32, one thread, freed
memory kept as in training), side by side (medians of interleaved repeats; read the ratios):
- ``columns``: the symbols select columns of ``w_ih`` and ``torch.lstm`` gets ``w_ih = I`` (4n x 4n);
- ``one_hot``: the symbols go in one-hot against ``w_ih`` itself (n_i x 4n), what ``nn.lstm`` does
  when the alphabet has at most 4n symbols.
Cases: the papers' copy problems (10 symbols): ICML Fig. 2 (T = 200, batch 50), DizzyRNN (lag 90,
batch 100), KRU (T = 1000, batch 20).

    python benchmarks/bench_lstm_symbols.py --out benchmarks/lstm_symbols_cpu.json
"""

from __future__ import annotations

import torch
from report import as_in_training, benchmark_parser, side_by_side, write_report
from torch import nn

CASES = [("ICML Fig. 2 copy", 10, 220, 50), ("DizzyRNN copy", 10, 110, 100), ("KRU copy", 10, 1020, 20)]
HIDDEN = 128


def lstm_backward(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, bias: torch.Tensor) -> None:
    """Forward + backward (of the outputs' sum of squares) of one ``torch.lstm`` layer from zero state
    over ``x`` (batch first)."""
    h0 = torch.zeros(1, x.shape[0], w_hh.shape[1])
    out, _, _ = torch.lstm(x, (h0, h0), [w_ih, w_hh, bias, torch.zeros_like(bias)], True, 1, 0.0, True, False,
                           True)
    out.square().sum().backward()


def routes(symbols: int, length: int, batch: int) -> dict:
    w_ih = torch.randn(4 * HIDDEN, symbols, requires_grad=True)
    w_hh = torch.randn(4 * HIDDEN, HIDDEN, requires_grad=True)
    bias = torch.zeros(4 * HIDDEN, requires_grad=True)
    ids = torch.randint(0, symbols, (batch, length))

    def columns() -> None:
        lstm_backward(nn.functional.embedding(ids, w_ih.T), torch.eye(4 * HIDDEN), w_hh, bias)

    def one_hot() -> None:
        lstm_backward(nn.functional.one_hot(ids, symbols).float(), w_ih, w_hh, bias)

    return {"columns": columns, "one_hot": one_hot}


def main() -> None:
    args = benchmark_parser(__doc__, repeats=5).parse_args()
    as_in_training()
    cases = []
    for name, symbols, length, batch in CASES:
        label = {"case": name, "symbols": symbols, "T": length, "B": batch, "n": HIDDEN}
        cases.append(side_by_side(label, routes(symbols, length, batch), args.repeats,
                                  {"columns_over_one_hot": ("columns", "one_hot")}))
    write_report(args.out, "cpu", "torch.lstm on symbol inputs, forward + backward, 1 thread", cases)


if __name__ == "__main__":
    main()
