"""Paper check: Fig. 3's caption, "Spectral-RNN constantly yields the highest test accuracy", read from
the kept ``fig3-mnist`` results: in each of the figure's panels (pixel MNIST at 392 and 784 steps,
permuted MNIST at 784), the model with the highest mean test accuracy over seeds."""

from __future__ import annotations

from spectral_analysis.checks import CheckRecord
from spectral_analysis.experiments.reading import KeptGrid
from spectral_analysis.paper.kept import judged, kept_grid, missing_record

SOURCE = "ICML Section 7.2 (Fig. 3)"
CLAIM = "Spectral-RNN constantly yields the highest test accuracy"
PANELS = {
    "pixel MNIST, 392 steps": ("mnist", 2),
    "pixel MNIST, 784 steps": ("mnist", 1),
    "permuted MNIST, 784 steps": ("permuted-mnist", 1),
}


def panel_accuracy(grid: KeptGrid, task: str, pixels: int) -> dict[str, tuple[float, float, float]]:
    """Each model's test accuracy in one panel: (mean, min, max) over seeds."""
    accuracy = {}
    for g in grid.groups:
        if g.axes.get("task") == task and g.axes.get("pixels_per_step") == pixels:
            s = g.final()
            accuracy[g.variant] = (s.mean, s.low, s.high)
    return accuracy


def records_from_grid(grid: KeptGrid) -> list[CheckRecord]:
    records = []
    for panel, (task, pixels) in PANELS.items():
        accuracy = panel_accuracy(grid, task, pixels)
        if not accuracy:
            continue
        best = max(accuracy, key=lambda m: accuracy[m][0])
        ranking = ", ".join(
            f"{m} {a[0]:.3f} [{a[1]:.3f}, {a[2]:.3f}]"
            for m, a in sorted(accuracy.items(), key=lambda x: -x[1][0])
        )
        evidence = (
            f"{panel}, n = {grid.groups[0].rows[0]['hidden']}: test accuracy (mean [min, max]), best first: "
            f"{ranking}"
        )
        verdict = "holds" if best == "spectral" else "differs"
        records.append(
            judged(
                grid,
                CheckRecord(
                    SOURCE,
                    f"{CLAIM} ({panel})",
                    verdict,
                    evidence,
                    {"test_accuracy": accuracy, "steps_per_sequence": 784 // pixels},
                ),
            )
        )
    return records


def run(quick: bool = True) -> list[CheckRecord]:
    """The claim per panel from kept results (``quick`` is accepted for the common interface)."""
    grid = kept_grid("fig3-mnist")
    if grid is None:
        return [missing_record(SOURCE, CLAIM, "fig3-mnist")]
    return records_from_grid(grid)
