"""Deprecated alias of :mod:`spectral_analysis.analysis.linear_rnn.svd_descent` for one release (issue 25)."""

from spectral_analysis.deprecation import forwarding_getattr

__getattr__ = forwarding_getattr(__name__, "spectral_analysis.analysis.linear_rnn.svd_descent")
