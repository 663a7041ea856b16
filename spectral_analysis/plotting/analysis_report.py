"""The ``analyze`` report on disk: ``report.json``, ``report.md`` and its figures (faces layer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spectral_analysis.analysis.report import analyze_subject, report_markdown, run_directory
from spectral_analysis.analysis.trajectories import read_trajectory
from spectral_analysis.data.arrays import UserData
from spectral_analysis.experiments.results import read_singular_values
from spectral_analysis.io import Subject
from spectral_analysis.plotting.analysis import plot_analysis, plot_singular_value_heatmap
from spectral_analysis.plotting.paper_figures import save_figure


def write_analysis(subject: Subject, out: str | Path, samples: int = 8, trials: int = 20, seed: int = 0,
                   burn_in: int = 0, user_data: UserData | None = None,
                   progress: bool = False) -> tuple[dict[str, Any], list[Path]]:
    """Analyze a subject and write ``report.json``, ``report.md`` and the figures into ``out``."""
    report = analyze_subject(subject, samples=samples, trials=trials, seed=seed, burn_in=burn_in,
                             user_data=user_data, progress=progress)
    checkpoint_path = subject.source
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    (out / "report.md").write_text(report_markdown(report))
    figures = plot_analysis(report, out)
    run = None if subject.imported else run_directory(checkpoint_path)
    # a zoo entry keeps its singular-value trajectory beside its checkpoint
    kept = None if subject.imported else read_singular_values(Path(checkpoint_path).parent)
    if run is not None and isinstance(report["trajectory"], list):
        trajectory = read_trajectory(run)
        axes = plot_singular_value_heatmap(trajectory.steps, trajectory.singular_values[0],
                                           f"{trajectory.model}: singular values of W over training")
        figures.append(save_figure(axes.figure, out / "singular_values.png"))
    elif kept is not None:
        axes = plot_singular_value_heatmap(kept[0], kept[1][0],
                                           f"{report['model']['name']}: singular values of W over training")
        figures.append(save_figure(axes.figure, out / "singular_values.png"))
    return report, figures
