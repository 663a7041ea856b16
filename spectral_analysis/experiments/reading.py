"""Reading kept results as a grid: trials grouped by configuration (variant and axis values) over seeds.

Figures and paper checks read results only through :func:`read_grid`; they never train. A grid is read
at ``paper`` scale once every configuration of the catalog's paper grid has a finished trial (a sweep
still under way is not drawn half), else at ``smoke`` scale (and says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spectral_analysis.experiments.catalog import find_experiment
from spectral_analysis.experiments.results import read_curves, read_rows, read_singular_values
from spectral_analysis.io.zoo import CHECKPOINT_NAME, trial_results_dir


@dataclass
class Spread:
    """Mean and min-max over seeds."""

    mean: np.ndarray | float
    low: np.ndarray | float
    high: np.ndarray | float
    seeds: int


@dataclass
class Group:
    """One configuration of a grid: the finished trials of every seed."""

    variant: str
    axes: dict[str, Any]
    rows: list[dict[str, Any]]
    dirs: list[Path]

    @property
    def seeds(self) -> int:
        return len(self.rows)

    def curve(self, phase: str, column: str) -> tuple[np.ndarray, Spread]:
        """``column`` of the ``phase`` curves at the steps every seed recorded, as mean and min-max."""
        curves = [read_curves(d)[phase] for d in self.dirs]
        usable = [c for c in curves if column in c and len(c["step"])]
        if not usable:
            return np.array([]), Spread(np.array([]), np.array([]), np.array([]), 0)
        steps = usable[0]["step"]
        for c in usable[1:]:
            steps = np.intersect1d(steps, c["step"])
        stack = np.stack([c[column][np.isin(c["step"], steps)] for c in usable])
        with np.errstate(all="ignore"):
            return steps, Spread(np.nanmean(stack, 0), np.nanmin(stack, 0), np.nanmax(stack, 0), len(usable))

    def final(self, source: str = "test_metrics", metric: str | None = None) -> Spread:
        """A final metric of each seed's row (``source``: ``test_metrics``, ``final_valid``, ``final_train``
        or ``best_valid``; default metric: the primary one), as mean and min-max."""

        def value(row: dict[str, Any]) -> float:
            got = (
                row.get("best_valid")
                if source == "best_valid"
                else (row.get(source) or {}).get(metric or row["metric"])
            )
            return np.nan if got is None else float(got)

        values = np.array([value(r) for r in self.rows])
        with np.errstate(all="ignore"):
            return Spread(
                float(np.nanmean(values)),
                float(np.nanmin(values)),
                float(np.nanmax(values)),
                int(np.isfinite(values).sum()),
            )

    def checkpoint(self) -> Path | None:
        """The kept checkpoint (seed 0), or ``None`` when the zoo did not keep one."""
        for d in self.dirs:
            if (d / CHECKPOINT_NAME).is_file():
                return d / CHECKPOINT_NAME
        return None

    def singular_values(self) -> tuple[np.ndarray, list[np.ndarray]] | None:
        for d in self.dirs:
            kept = read_singular_values(d)
            if kept is not None:
                return kept
        return None


@dataclass
class KeptGrid:
    experiment: str
    scale: str
    groups: list[Group] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seeds(self) -> int:
        """The fewest seeds any configuration has."""
        return min((g.seeds for g in self.groups), default=0)

    def group(self, variant: str, **axes: Any) -> Group | None:
        for g in self.groups:
            if g.variant == variant and all(str(g.axes.get(k)) == str(v) for k, v in axes.items()):
                return g
        return None

    def values(self, axis: str) -> list[Any]:
        """The values of ``axis`` in the grid: sorted when they are numbers, else in order of appearance."""
        values = list(dict.fromkeys(g.axes[axis] for g in self.groups if axis in g.axes))
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        return sorted(values) if numeric else values

    def variants(self) -> list[str]:
        return list(dict.fromkeys(g.variant for g in self.groups))

    def stamp(self) -> str:
        """What a figure title says of the evidence: the scale and the seeds."""
        scale = "paper scale" if self.scale == "paper" else "smoke scale, not the paper's"
        return f"{scale}; {self.seeds} seed{'s' if self.seeds != 1 else ''}"


def _catalog_configurations(experiment: str) -> list[str] | None:
    """The configuration keys of the catalog's grid of ``experiment``, in order (``None``: not in it)."""
    try:
        return [t.key.rsplit("_s", 1)[0] for t in find_experiment(experiment).trials("paper", seeds=1)]
    except ValueError:
        return None


def read_grid(results: str | Path, experiment: str, scale: str | None = None) -> KeptGrid | None:
    """The finished trials of ``experiment`` grouped by configuration, at ``scale`` or (by default) at
    ``paper`` scale when every configuration has one, else ``smoke``; ``None`` when neither has any."""
    for candidate in [scale] if scale else ["paper", "smoke"]:
        rows = read_rows(results, experiment, candidate)
        done = [r for r in rows if r["status"] == "done"]
        if not done:
            continue
        grid = KeptGrid(experiment, candidate, failed=[r for r in rows if r["status"] == "failed"])
        by_config: dict[str, Group] = {}
        for row in done:
            key = row["trial"].rsplit("_s", 1)[0]
            group = by_config.setdefault(key, Group(row["variant"], row["axes"], [], []))
            group.rows.append(row)
            group.dirs.append(trial_results_dir(results, experiment, candidate, row["trial"]))
        order = _catalog_configurations(experiment)
        if order is not None and candidate == "paper" and not scale and len(by_config) < len(order):
            continue  # a paper grid still under way
        rank = {key: i for i, key in enumerate(order or [])}
        grid.groups = [by_config[k] for k in sorted(by_config, key=lambda k: (rank.get(k, len(rank)), k))]
        return grid
    return None
