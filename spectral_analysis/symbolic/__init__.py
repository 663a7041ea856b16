"""Symbolic layer: the papers' derivative formulas and counts, derived with SymPy and judged.

Each check returns common check records (:mod:`spectral_analysis.checks`) with ``derived`` and
``printed`` expressions; :func:`run_symbolic_checks` runs them by name. The check modules (and SymPy)
are imported only when a check runs, so importing this package, or the command line, stays cheap.
"""

from __future__ import annotations

import importlib

from spectral_analysis.checks import CheckRecord, select_checks

SYMBOLIC_CHECKS: dict[str, tuple[str, str]] = {
    "reflector": ("householder", "check_reflector"),
    "eq8": ("householder", "check_eq8"),
    "householder-gradients": ("householder", "gradient_checks"),
    "algorithm1": ("algorithm1", "check_algorithm1"),
    "sigma-map": ("algorithm1", "check_sigma_map"),
    "claim1": ("linear_rnn", "check_claim1"),
    "dizzy-gradient": ("peers", "check_dizzy_gradient"),
    "dizzy-norms": ("peers", "check_dizzy_norms"),
    "kru": ("peers", "check_kru"),
    "parameter-counts": ("counts", "check_parameter_counts"),
    "table1": ("counts", "check_table1"),
}


def run_symbolic_checks(only: list[str] | None = None,
                        progress: bool = False) -> list[tuple[str, CheckRecord]]:
    """``(name, record)`` for every check, or for the named ones (``ValueError`` naming unknown ones);
    ``progress``: a bar on stderr, one step per check."""
    from tqdm import tqdm

    names = select_checks(SYMBOLIC_CHECKS, only, "symbolic check")
    rows = []
    for name in tqdm(names, desc="symbolic checks", disable=not progress, leave=False):
        module, function = SYMBOLIC_CHECKS[name]
        result = getattr(importlib.import_module(f"spectral_analysis.symbolic.{module}"), function)()
        rows += [(name, record) for record in (result if isinstance(result, list) else [result])]
    return rows


__all__ = ["SYMBOLIC_CHECKS", "run_symbolic_checks"]
