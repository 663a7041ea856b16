"""The toolkit's CPU policy: torch's intra-op threads = the cores nobody else is using, and denormal
floats flushed to zero.

Two threads on a 2-core machine that is already busy run the small per-step operations of a
recurrence 3-10x slower than one thread (each op waits for a core it shares). By default the
command line sets torch to the free cores: the cores this process may use minus the 1-minute load
average, at least one. ``--threads N`` overrides it.

A recurrence over hundreds of steps whose states decay (pixel MNIST's black rows) drives activations
and their gradients into the denormal range (below 1.2e-38 in float32), where x86 arithmetic takes
microcode and runs many times slower: ``nn.LSTM`` at PyTorch's initialization over 784 pixels ran
several times slower than with those values flushed to zero (``benchmarks/bench_denormals.py``
measures it). Numbers that small change no sum they enter, so the command line and every CPU
:class:`~spectral_analysis.train.trainer.Trainer` flush them (:func:`flush_denormals`).
"""

from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def free_cores(cores: int | None = None, load: float | None = None) -> int:
    """Usable cores minus the load already on them (1-minute load average), at least 1."""
    cores = usable_cores() if cores is None else cores
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return max(1, min(cores, int(cores - load + 0.5)))


def set_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads to ``threads`` (default: :func:`free_cores`); returns the count."""
    if threads is None:
        threads = free_cores()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"--threads must be a positive integer, got {threads!r}")
    import torch  # here, not at the top: the command line's parser loads without torch

    torch.set_num_threads(threads)
    return threads


def flush_denormals() -> bool:
    """Flush denormal floats to zero in this process's CPU arithmetic (module docstring); ``True`` where
    the CPU supports it (x86 with SSE3), as ``torch.set_flush_denormal`` reports."""
    import numpy as np
    import torch

    for dtype in (np.float16, np.float32, np.float64, np.longdouble):
        np.finfo(dtype)  # numpy measures its limits once, lazily: here, or it warns the subnormal is zero
    return torch.set_flush_denormal(True)
