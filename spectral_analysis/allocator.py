"""The toolkit's memory policy on the CPU: keep freed tensor memory in the process.

glibc serves a large allocation (128 KB and up by default) by mapping fresh pages and gives them back
to the OS when it is freed. A training step frees its activations and gradients at the end and asks
for the same sizes at the next step, so every step page-faults its whole working set again. On the
project's 2-core VM, one thread, a sweep running beside it (``benchmarks/allocator_cpu.json``), a
training step with the memory kept against given back: pixel MNIST (T = 784, batch 128, n = 128)
RNN 0.28 s against 0.52 s, LSTM 0.92 against 1.43, Spectral-RNN 0.27 against 0.53; KRU's adding
problem (N = 512, T = 750) 1.23 against 2.68. The difference is the kernel's time (0.23-1.46 s).
:func:`keep_freed_memory` raises glibc's mmap and trim thresholds (``mallopt``) so freed blocks stay
in the heap and the next step reuses them; the price is that the process keeps its peak memory
until it exits. The command line and every sweep trial apply it; a library user calls it once.

The thresholds govern glibc's main heap. A thread's own arena (glibc gives each new thread one, up
to 8 per core) grows by separate 64 MB heaps that it unmaps once empty, whatever the thresholds: a Ray
Tune trial, which trains in a thread the worker made before the trial's code ran, faulted its working
set every step with the policy applied (LSTM, T = 300, batch 50: 0.17 s against 0.12 s per step and
~17,000 faults against ~100, measured beside a sweep; ``tests/test_allocator.py`` and
``tests/test_sweeps.py`` hold the fault counts apart). So the policy also caps the arenas at one:
threads made after the call share the main heap, and processes the runner starts (Ray workers) get
:data:`ALLOCATOR_ENVIRONMENT`, which glibc reads as the process starts, before any thread exists.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD_BYTES = 1 << 30  # blocks below 1 GiB come from the heap and are reused
TRIM_THRESHOLD_BYTES = (1 << 31) - 1  # never return the heap's free top to the OS (int max)
ARENA_MAX = 1  # every thread allocates from the main heap, which the thresholds govern

# the same policy for a process about to start, in glibc's environment variables
ALLOCATOR_ENVIRONMENT = {
    "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD_BYTES),
    "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD_BYTES),
    "MALLOC_ARENA_MAX": str(ARENA_MAX),
}


def keep_freed_memory() -> bool:
    """Keep freed memory for reuse (glibc only); ``True`` when glibc accepted the three settings."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
    except (AttributeError, ValueError, OSError):  # not a glibc system
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES), (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
                (M_ARENA_MAX, ARENA_MAX))
    return all([bool(libc.mallopt(parameter, value)) for parameter, value in settings])  # a list: set all
