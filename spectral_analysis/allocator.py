"""The toolkit's memory policy on the CPU: keep freed tensor memory in the process.

glibc serves a large allocation (128 KB and up by default) by mapping fresh pages and gives them back
to the OS when it is freed. A training step frees its activations and gradients at the end and asks
for the same sizes at the next step, so every step page-faults its whole working set again: on the
project's 2-core VM that was 40-60% of a step's time, spent in the kernel (pixel MNIST, RNN n = 128,
T = 784: 0.66 s a step against 0.34 s; KRU N = 512 at T = 750: 1.69 s against 0.66 s;
``benchmarks/allocator_cpu.json``). :func:`keep_freed_memory` raises glibc's mmap and trim
thresholds (``mallopt``) so freed blocks stay in the heap and the next step reuses them; the price
is that the process keeps its peak memory until it exits. The command line and every sweep trial
apply it; a library user calls it once.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD_BYTES = 1 << 30  # blocks below 1 GiB come from the heap and are reused
TRIM_THRESHOLD_BYTES = (1 << 31) - 1  # never return the heap's free top to the OS (int max)


def keep_freed_memory() -> bool:
    """Keep freed memory for reuse (glibc only); ``True`` when glibc accepted both settings."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
    except (AttributeError, ValueError, OSError):  # not a glibc system
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
