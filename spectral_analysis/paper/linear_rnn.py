"""Paper check: the earlier version's Claim 1, Theorem 5 and Corollary 1 (Section 6), by the
``landscape`` analyzer: quick at n = t = 2, the analyzer's defaults (n = t = 3) otherwise."""

from __future__ import annotations

from spectral_analysis.checks import CheckRecord
from spectral_analysis.paper.landscape import LandscapeConfig, landscape_report

QUICK = LandscapeConfig(hidden=2, length=2, starts=6, samples=300, iterations=400, monte_carlo=50_000)


def run(quick: bool = True) -> list[CheckRecord]:
    report = landscape_report(QUICK if quick else LandscapeConfig())
    return [CheckRecord(**check) for check in report["checks"]]
