"""The bounds-table figure draws every bound in log10, past a float's range too."""

import numpy as np
import pytest

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


def _table(path, rows, columns=None):
    """A bounds-table CSV as ``bounds-table --out`` writes it (``columns``: an older file's fewer)."""
    import csv

    from spectral_analysis.analysis.bounds_table import COLUMNS

    columns = columns or COLUMNS
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


ROW = {"checkpoint": "zoo:e/paper/a_s0", "model": "spectral", "sigma_bound": 1.1, "task": "mnist",
       "parameters": 5760, "test_error": 0.028, "log10_G": 48.1, "log10_unrolled_bound": 444.9,
       "explicit_regime": "above-grid (trivial)", "certified_error_learned": 0.46,
       "q_test_error_learned": 0.11, "kl_learned": 12030.0, "derandomized_learned": 0.597,
       "held_out_bound": 0.035}


def test_a_kept_table_reads_back_as_the_rows_bounds_table_wrote(tmp_path):
    """Numbers come back as numbers, an empty cell and a column the file predates as None; a file that is
    not a bounds table, or a cell that is not a number, is refused by name."""
    from spectral_analysis.analysis.bounds_table import COLUMNS, read_bounds_table

    rows = read_bounds_table(_table(tmp_path / "t.csv", [ROW]))
    assert rows == [{**dict.fromkeys(COLUMNS), **ROW}]
    assert isinstance(rows[0]["parameters"], int) and isinstance(rows[0]["log10_G"], float)
    older = [c for c in COLUMNS if c != "explicit_regime"]
    assert read_bounds_table(_table(tmp_path / "old.csv", [ROW], older))[0]["explicit_regime"] is None
    (tmp_path / "other.csv").write_text("trial,accuracy\na,0.9\n")
    with pytest.raises(ValueError, match="not a bounds-table CSV"):
        read_bounds_table(tmp_path / "other.csv")
    with pytest.raises(ValueError, match="'test_error' holds 'n/a'"):
        read_bounds_table(_table(tmp_path / "bad.csv", [{**ROW, "test_error": "n/a"}]))
    with pytest.raises(ValueError, match="no bounds table at"):
        read_bounds_table(tmp_path / "absent.csv")


def test_figures_redraws_each_kept_table_without_computing_a_bound(tmp_path):
    """``figures`` draws bounds_NAME.png from each bounds_table_NAME.csv in its output folder, and names
    the experiments the table's checkpoints come from."""
    from spectral_analysis.plotting.bounds_figure import draw_kept_bounds_figures

    second = {**ROW, "checkpoint": "zoo:f/paper/b_s1", "test_error": 0.03}
    _table(tmp_path / "bounds_table_x.csv", [ROW, second, {**ROW, "checkpoint": "my/model.pt"}])
    drawn = draw_kept_bounds_figures(tmp_path / "results", tmp_path)
    assert [d["path"] for d in drawn] == [str(tmp_path / "bounds_x.png")]
    assert (tmp_path / "bounds_x.png").stat().st_size > 10_000
    assert drawn[0]["experiment"] == "e, f, checkpoint files" and drawn[0]["seeds"] == 3


def test_a_quantity_has_one_colour_in_both_panels():
    """The right panel's certificate of Q is drawn in the left panel's colour for it, and Q's test error
    in the same colour, hollow; the trained network's test error is black."""
    from matplotlib.colors import to_rgba

    from spectral_analysis.plotting.bounds_figure import COLOURS

    fig = plot_bounds_against_error([ROW], "t")
    left, right = fig.axes[:2]
    left_colour = {tuple(c.get_facecolor()[0][:3]) for c in left.collections if len(c.get_offsets())
                   and np.isclose(c.get_offsets()[0][1], np.log10(0.46))}
    assert left_colour == {to_rgba(COLOURS["certified_error_learned"])[:3]}
    lines = {c.get_label(): c for c in right.containers}
    certified, tested = lines["Q certified (learned prior)"][0], lines["test error of Q (learned prior)"][0]
    assert to_rgba(certified.get_color()) == to_rgba(COLOURS["certified_error_learned"])
    assert to_rgba(tested.get_color()) == to_rgba(certified.get_color())
    assert to_rgba(tested.get_markerfacecolor()) == to_rgba("white")
    assert to_rgba(lines["test error (trained network w)"][0].get_color()) == to_rgba("black")
