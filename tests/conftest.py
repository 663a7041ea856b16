"""Fixtures shared across test modules: results that take long to compute and that several modules read."""

from __future__ import annotations

import pytest

from spectral_analysis.checks import CheckRecord
from spectral_analysis.symbolic import run_symbolic_checks


@pytest.fixture(scope="session")
def symbolic_rows() -> list[tuple[str, CheckRecord]]:
    """Every symbolic check's ``(name, record)``, derived once per session (about 40 s on a 2-core CPU):
    ``test_symbolic`` judges the verdicts, ``test_paper_checks`` the quotes, as ``check-paper`` runs
    them in its ``symbolic`` group."""
    return run_symbolic_checks()
