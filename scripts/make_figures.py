"""Regenerate figures/ from the reports in benchmarks/ (and, in later issues, analyzers' reports)."""

from __future__ import annotations

import sys
from pathlib import Path

from spectral_analysis.plotting import plot_householder_benchmark

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    out = plot_householder_benchmark(ROOT / "benchmarks" / "householder_cpu.json",
                                     ROOT / "figures" / "householder_speed_cpu.png")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
