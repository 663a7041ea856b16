"""Deprecated: moved to :mod:`spectral_analysis.analysis.linear_rnn.counterexample`
(measurements of the earlier version's Section 6 live in
:mod:`spectral_analysis.analysis.linear_rnn`, their verdicts in :mod:`spectral_analysis.paper`). This
alias warns and forwards for one release; the import happens on use only, so the analysis layer does
not load the faces.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

NEW = "spectral_analysis.analysis.linear_rnn.counterexample"


def __getattr__(name: str) -> Any:
    if name.startswith("__"):  # the import machinery's probes (__path__, ...): not a name of the module
        raise AttributeError(name)
    warnings.warn(f"spectral_analysis.analysis.theorem5 is deprecated; import {name} from {NEW}",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(NEW), name)
