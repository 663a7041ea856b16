"""Paper check: every formula of the symbolic layer (``verify-symbolic``), the same at any size."""

from __future__ import annotations

from spectral_analysis.checks import CheckRecord
from spectral_analysis.symbolic import run_symbolic_checks


def run(quick: bool = True) -> list[CheckRecord]:
    return [record for _, record in run_symbolic_checks()]
