"""The bounds-table figure draws every bound in log10, past a float's range too."""

import numpy as np

from spectral_analysis.plotting.bounds_figure import plot_bounds_against_error


def test_a_bound_past_a_floats_range_is_drawn_at_its_log10():
    """Bartlett et al.'s unrolled bound of a T = 784 network is about 10^445: 10.0 ** 445 overflows, so
    every bound is drawn as its log10, a certificate of 0.46 at log10(0.46)."""
    row = {"checkpoint": "zoo:e/paper/a_s0", "model": "spectral", "sigma_bound": 1.1, "test_error": 0.028,
           "log10_G": 48.1, "log10_G_corollary1": 82.6, "log10_unrolled_bound": 444.9,
           "certified_error_learned": 0.46, "q_test_error_learned": 0.11, "derandomized_learned": 0.597,
           "held_out_bound": 0.035}
    seed_1 = {**row, "checkpoint": "zoo:e/paper/a_s1", "test_error": 0.038}
    fig = plot_bounds_against_error([row, seed_1], "t")
    left = fig.axes[0]
    heights = sorted({round(float(y), 6) for c in left.collections for _, y in c.get_offsets()})
    assert heights == sorted(round(v, 6) for v in (48.1, 82.6, 444.9, np.log10(0.46), np.log10(0.597),
                                                   np.log10(0.035)))
    assert left.get_ylim()[1] > 444.9 and left.get_yscale() == "linear"
