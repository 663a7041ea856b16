"""Deprecated name of :mod:`spectral_analysis.nn.time_loop` (the time-loop kernels), kept one release."""

import warnings

from spectral_analysis.nn.time_loop import (  # noqa: F401 -- re-exported under the old name
    RECURRENCES,
    recurrence_loop,
    recurrence_scan,
    recurrence_torch,
    resolve_recurrence,
)

warnings.warn("spectral_analysis.nn.recurrence is now spectral_analysis.nn.time_loop; the old name goes "
              "in the next release", DeprecationWarning, stacklevel=2)
