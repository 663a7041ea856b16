"""The fused recurrence's launch settings timed against each other and against cuDNN, on a GPU.

For each hidden size n and batch B (T = 784), the persistent Triton kernels
(:mod:`spectral_analysis.nn.fused_recurrence`) run forward + backward of the time loop alone (``xp``, ``W``
and ``h0`` given, leaky ReLU) under every candidate of ``BLOCK_B`` (batch rows a program), ``num_warps``,
``tl.dot``'s precision (``ieee`` float32 or ``tf32``) and, past n = 128, ``BLOCK_K`` (rows of the streamed
W a read), beside ``nn.RNN(relu)``, whose cuDNN kernel also forms the input projection (so the ratio
slightly favours the kernels), with
``torch.backends.cudnn.allow_tf32`` as PyTorch sets it (on: cuDNN's float32 RNN runs in TF32). Times are
``triton.testing.do_bench`` medians; the default that :func:`launch_settings` picks is marked.

    python benchmarks/bench_fused_settings.py --out fused_settings_cuda.json [--sizes 64 128 256 512]
        [--batch 64 128]
"""

from __future__ import annotations

import argparse
import itertools
import logging

import torch
import triton
from report import write_report
from triton.testing import do_bench

from spectral_analysis.nn.fused_recurrence import launch_settings, recurrence_fused
from spectral_analysis.nn.time_loop import FUSED_RESIDENT_SIZE

LOG = logging.getLogger("bench_fused_settings")
MAX_TILE_REGISTERS = 256
"""Candidates whose W tile alone (or, W streamed, the rows' pre-activation) would take more 32-bit registers
a thread than this are not compiled."""
MAX_READ = 128 * 256
"""The most elements of a streamed W a read (128 KB of float32, of an H100's 228 KB of shared memory a
block)."""


def candidates(n: int, batch: int) -> list[dict]:
    """Every launch setting to time at hidden size ``n``. With W on chip (n <= 128): 16 or 32 rows a
    program, 4-16 warps, IEEE or TF32 products. With W streamed: 16 rows (more programs read W in
    parallel), TF32 only (IEEE products were 17-61x slower on chip), 4-16 warps, 16-128 rows of W a read
    (8 warps and a 64 KB read were the fastest of 4-8 warps and 16-64 rows on an H100, at the edge of that
    grid at n = 256)."""
    block = max(16, triton.next_power_of_2(n))
    if block <= FUSED_RESIDENT_SIZE:
        grid = itertools.product((16, 32), (4, 8, 16), ("ieee", "tf32"), (block,))
    else:
        grid = itertools.product((16,), (4, 8, 16), ("tf32",), (16, 32, 64, 128))
    found = []
    for rows, warps, precision, read in grid:
        tile = block * block if read == block else rows * block
        if rows <= batch and tile // (32 * warps) <= MAX_TILE_REGISTERS and read * block <= MAX_READ:
            reads = {"BLOCK_K": block} if read == block else {"BLOCK_K": read, "num_stages": 1}
            found.append({"BLOCK_B": rows, "BLOCK_N": block, "PRECISION": precision, "num_warps": warps}
                         | reads)
    return found


def fused_milliseconds(xp: torch.Tensor, W: torch.Tensor, h0: torch.Tensor, settings: dict) -> float:
    def step() -> None:
        recurrence_fused(xp, W, h0, "leaky_relu", 0.3, settings).sum().backward()
    return do_bench(step, warmup=25, rep=100)


def cudnn_milliseconds(n: int, T: int, batch: int) -> float:
    rnn = torch.nn.RNN(n, n, nonlinearity="relu").cuda()
    with torch.no_grad():
        rnn.weight_hh_l0.copy_(0.9 * torch.linalg.qr(torch.randn(n, n, device="cuda"))[0])
    x = torch.randn(T, batch, n, device="cuda")
    return do_bench(lambda: rnn(x)[0].sum().backward(), warmup=25, rep=100)


def bench(n: int, T: int, batch: int) -> list[dict]:
    """One row per candidate: its settings, its time and its ratio to cuDNN (or the error that stopped it)."""
    xp = torch.randn(T, batch, n, device="cuda", requires_grad=True)
    W = (0.9 * torch.linalg.qr(torch.randn(n, n, device="cuda"))[0]).requires_grad_()
    h0 = torch.zeros(batch, n, device="cuda", requires_grad=True)
    default = launch_settings(W)
    case = {"n": n, "T": T, "B": batch, "cudnn_rnn_relu_ms": cudnn_milliseconds(n, T, batch)}
    rows = []
    for settings in candidates(n, batch):
        row = case | settings | {"default": settings == default}
        try:
            ms = fused_milliseconds(xp, W, h0, settings)
        except Exception as error:  # a candidate that does not compile (resources) is recorded, not fatal
            rows.append(row | {"error": f"{type(error).__name__}: {str(error)[:200]}"})
            continue
        rows.append(row | {"ms": ms, "over_cudnn": ms / case["cudnn_rnn_relu_ms"]})
        LOG.info("n=%d B=%d %s: %.3f ms (%.2fx cuDNN)%s", n, batch, settings, ms, rows[-1]["over_cudnn"],
                 " default" if settings == default else "")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--batch", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--length", type=int, default=784)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.manual_seed(0)
    cases = []
    for n in args.sizes:
        for batch in args.batch:  # written as each (n, B) ends: a timeout keeps the finished ones
            cases += bench(n, args.length, batch)
            write_report(args.out, "cuda", "fused recurrence launch settings, forward + backward, leaky ReLU",
                         cases)


if __name__ == "__main__":
    main()
