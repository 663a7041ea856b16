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
measures it). Numbers that small change no sum they enter, so every command, every CPU
:meth:`~spectral_analysis.train.trainer.Trainer.run` and the calibrations' reference side flush them
while they run (:func:`denormals_flushed`), and give the setting back after: another library in the
process (hypothesis, for one) may need denormals.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


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


@contextmanager
def denormals_flushed() -> Iterator[bool]:
    """Within the block, this thread's CPU arithmetic flushes denormal floats to zero (module docstring);
    the setting it had before comes back after. Yields whether the CPU can (x86 with SSE3), as
    ``torch.set_flush_denormal`` reports.

    ```python
    >>> import torch
    >>> with denormals_flushed() as flushing:
    ...     inside = (torch.tensor([1e-39]) * 1.0).item()
    >>> inside == 0 or not flushing, (torch.tensor([1e-39]) * 1.0).item() > 0
    (True, True)

    ```
    """
    import numpy as np
    import torch

    for dtype in (np.float16, np.float32, np.float64, np.longdouble):
        np.finfo(dtype)  # numpy measures its limits once, lazily: here, or it warns the subnormal is zero
    before = torch.tensor([1e-39]).item() == 0  # the conversion itself flushes while flushing is on
    flushing = torch.set_flush_denormal(True)
    try:
        yield flushing
    finally:
        torch.set_flush_denormal(before)
