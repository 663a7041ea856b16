"""Validation grids: catalog entries with ``selects``, which choose one setting of the experiment they
select for (KRU's soft unitary amplitude, which its paper "cross-validated on the validation set" and did
not print), and what that choice holds back.

A grid's choice is read from its kept results once every planned trial is kept and current
(:func:`selection`). Until then, and while the selected experiment's catalog entry uses another value
than the one chosen, the runner holds back that experiment's trials of the validated variants at the
paper's sizes (:func:`held_back`): they would train a setting the validation is about to replace.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spectral_analysis.experiments.catalog import find_experiment
from spectral_analysis.experiments.fitness import diverged
from spectral_analysis.experiments.grid import Experiment, Trial
from spectral_analysis.experiments.reading import read_grid
from spectral_analysis.train.plateau import LOWER_IS_BETTER

HELD_SCALES = ("paper", "budget")  # the paper's sizes: the scales a validation grid chooses for


@dataclass(frozen=True)
class Selection:
    """What a validation grid (a catalog entry with ``selects``) chose for the experiment it selects for:
    per variant, among the values of its one axis under which the fewest seeds diverged (``diverged``),
    the one whose finished seeds reach the best mean of the best validation metric (``scores``: that mean
    per value, NaN where every seed diverged). A diverged seed is not left out of the choice: the selected
    experiment trains with the value chosen, and a value is not chosen on the seeds that survived it over
    one whose every seed trained (KRU's "Our soft unitary constraints offer a principled alternative to
    gradient clipping": the constraint's strength is chosen for training without clipping)."""

    experiment: str
    selects: str
    axis: str  # the TrainConfig field, dotted as the catalog's [axes] names it
    metric: str
    scores: dict[str, dict[Any, float]]
    diverged: dict[str, dict[Any, int]]

    @property
    def chosen(self) -> dict[str, Any]:
        """Per variant, the value chosen (none where every seed of every value diverged)."""
        sign = 1.0 if self.metric in LOWER_IS_BETTER else -1.0
        chosen: dict[str, Any] = {}
        for variant, scores in self.scores.items():
            finished = [v for v, score in scores.items() if not np.isnan(score)]
            if finished:
                chosen[variant] = min(finished, key=lambda v: (self.diverged[variant][v], sign * scores[v]))
        return chosen


def selection(results: str | Path, experiment: str) -> Selection | None:
    """The choice of the validation grid ``experiment`` from its complete, current paper-scale grid:
    every planned trial (each seed of each value) kept and standing for the catalog (``None`` before
    that, so a choice never rests on the seeds that happened to end first); ``ValueError`` when the
    catalog entry selects nothing. A grid changed since (extended, as kru-adding-amplitude from 10000
    steps to 20000) chooses nothing until its trials are kept anew: its kept rows answer for the entry
    as it was, and once some are retrained they no longer make one grid."""
    entry = find_experiment(experiment)
    if entry.selects is None:
        raise ValueError(f"experiment {experiment!r} is no validation grid: its catalog entry has no "
                         "'selects'")
    grid = read_grid(results, experiment, scale="paper")
    if grid is None or grid.stale:
        return None
    rows = [*(r for g in grid.groups for r in g.rows), *filter(diverged, grid.failed)]
    if not {t.key for t in entry.trials("paper")} <= {r["trial"] for r in rows}:
        return None  # a trial not kept yet, or failed otherwise than by diverging (to run again)
    (axis,) = entry.axes
    scores: dict[str, dict[Any, float]] = {}
    counts: dict[str, dict[Any, int]] = {}
    for row in rows:
        (value,) = row["axes"].values()
        scores.setdefault(row["variant"], {})[value] = float("nan")
        counts.setdefault(row["variant"], {}).setdefault(value, 0)
        counts[row["variant"]][value] += diverged(row)
    for group in grid.groups:
        (value,) = group.axes.values()
        scores[group.variant][value] = float(np.mean(group.final_per_seed("best_valid")))
    return Selection(experiment, entry.selects, axis, grid.groups[0].rows[0]["metric"], scores, counts)


def config_value(config: dict[str, Any], axis: str) -> Any:
    """The value of the catalog axis ``axis`` (a dotted axis names a nested field) in ``config``, a
    training configuration as a dict (``None`` where it is not set)."""
    return functools.reduce(lambda c, k: c.get(k) if isinstance(c, dict) else None, axis.split("."), config)


def axis_value(trial: Trial, axis: str) -> Any:
    """:func:`config_value` in ``trial``'s training configuration, the trainer's default where the catalog
    does not set it."""
    return config_value(asdict(trial.train_config(".")), axis)


def held_back(experiment: Experiment, scale: str, catalog: dict[str, Experiment],
              results: str | Path) -> dict[str, str]:
    """The variants of ``experiment`` whose trials at ``scale`` must wait, each with why: those a
    validation grid of ``catalog`` validates while it has chosen nothing yet (it is under way, or every
    seed of it diverged), or whose configuration uses another value than it chose (the catalog entry is
    to be updated first). None at smoke scale."""
    if scale not in HELD_SCALES:
        return {}
    held: dict[str, str] = {}
    for grid in (e for e in catalog.values() if e.selects == experiment.name):
        labels = {v["label"] for v in grid.variants}
        chosen = selection(results, grid.name)
        for trial in experiment.trials(scale, seeds=1):
            if trial.variant not in labels or trial.variant in held:
                continue
            if chosen is None:
                held[trial.variant] = (f"{trial.variant} waits for {grid.name}, its validation grid, to "
                                       f"choose {'/'.join(grid.axes)} (run it first)")
            elif trial.variant not in chosen.chosen:
                held[trial.variant] = (f"{trial.variant}: every seed of {grid.name}, its validation grid, "
                                       "diverged, so it chose nothing")
            else:
                value, used = chosen.chosen[trial.variant], axis_value(trial, chosen.axis)
                if used != value:
                    held[trial.variant] = (f"{trial.variant} uses {chosen.axis} = {used!r}, but {grid.name} "
                                           f"chose {value!r}: set it in {experiment.name}'s entry first")
    return held
