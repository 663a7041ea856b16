"""Moved names: an old module path that warns and forwards for one release (issue 25's renames)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def forwarding_getattr(old: str, new: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``old``: each name is read from ``new`` (imported on first use, so a
    lower layer's alias does not load an upper layer) with a ``DeprecationWarning`` naming where it lives."""

    def forward(name: str) -> Any:
        if name.startswith("__"):  # the import machinery's probes (__path__, ...): not a name of the module
            raise AttributeError(name)
        warnings.warn(f"{old} is deprecated; import {name} from {new}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)

    return forward
