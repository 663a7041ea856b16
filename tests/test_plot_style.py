"""A plot is drawn in the toolkit's theme and leaves the caller's matplotlib settings as they were."""

from pathlib import Path

import matplotlib as mpl
import numpy as np
import pytest

from spectral_analysis.plotting import plot_householder_benchmark
from spectral_analysis.plotting.paper_figures import line_chart

ROOT = Path(__file__).resolve().parents[1]


def test_drawing_does_not_restyle_the_session_and_still_draws_in_the_theme():
    with mpl.rc_context({"axes.grid": False, "axes.facecolor": "black"}):
        before = dict(mpl.rcParams)
        ax = line_chart({"a": (np.arange(3), np.arange(3.0))}, "x", "y", "title")
        assert dict(mpl.rcParams) == before  # the caller's settings, untouched
        assert ax.get_facecolor()[:3] != (0.0, 0.0, 0.0) and ax.xaxis.get_gridlines()[0].get_visible()
        ax = plot_householder_benchmark(ROOT / "benchmarks" / "householder_cpu.json")
        assert dict(mpl.rcParams) == before and ax.yaxis.get_gridlines()[0].get_visible()


def test_a_line_drawn_over_an_identical_one_leaves_it_seen_in_its_gaps():
    same = (np.arange(5), np.zeros(5))
    ax = line_chart({"ornn": same, "spectral": same, "lstm": (np.arange(5), np.ones(5))}, "x", "y", "title",
                    style=".-")
    under, over, _ = ax.get_lines()
    assert over.get_linestyle() != "-" and under.get_linestyle() == "-"  # the later one is dashed
    assert over.get_linewidth() < under.get_linewidth()  # and thinner: the one under shows at its edges
    assert under.get_marker() == over.get_marker() == "."
    with pytest.raises(ValueError, match="style must be '-', '.-' or 'o-', got 'x'"):
        line_chart({"a": same}, "x", "y", "title", style="x")
