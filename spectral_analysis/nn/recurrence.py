"""Deprecated name of :mod:`spectral_analysis.nn.time_loop` (the time-loop kernels), kept one release."""

from spectral_analysis.deprecation import forwarding_getattr

__getattr__ = forwarding_getattr(__name__, "spectral_analysis.nn.time_loop")
