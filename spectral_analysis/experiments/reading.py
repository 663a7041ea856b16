"""Reading kept results as a grid: trials grouped by configuration (variant and axis values) over seeds.

Figures and paper checks read results only through :func:`read_grid`; they never train. A grid is read
at ``paper`` scale once every configuration of the catalog's paper grid has a finished trial (a sweep
still under way is not drawn half), else at the ``budget`` scale (the paper's sizes for a stated CPU
budget) once that is complete, else at ``smoke`` scale; a grid says which (:meth:`KeptGrid.stamp`). It
also names its stale trials: kept rows that no longer stand for the catalog's current entry
(:func:`~spectral_analysis.experiments.row_status.kept_row_stands`: a changed configuration, or a run that
stopped before the length the catalog now trains to), which the next sweep retrains
and from which a paper check does not judge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from spectral_analysis.experiments.catalog import find_experiment
from spectral_analysis.experiments.fitness import diverged
from spectral_analysis.experiments.grid import Trial, configuration_key
from spectral_analysis.experiments.groups import Group
from spectral_analysis.experiments.results import (
    CURVES_NAME,
    read_rows,
)
from spectral_analysis.experiments.row_status import differing_fields, kept_row_stands
from spectral_analysis.io.zoo import trial_results_dir
from spectral_analysis.vocabulary import SCALES


@dataclass
class KeptGrid:
    experiment: str
    scale: str
    groups: list[Group] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    stale: dict[str, list[str]] = field(default_factory=dict)  # trial key -> the fields that differ

    @property
    def trials(self) -> int:
        return sum(g.seeds for g in self.groups)

    @property
    def kept(self) -> int:
        """The kept trials: the finished ones and the failed ones."""
        return self.trials + len(self.failed)

    @property
    def kept_keys(self) -> set[str]:
        """The keys of the kept trials, finished and failed."""
        return {r["trial"] for r in [*(r for g in self.groups for r in g.rows), *self.failed]}

    @property
    def seeds(self) -> int:
        """The fewest seeds any configuration has."""
        return min((g.seeds for g in self.groups), default=0)

    def stale_only_among(self, trials: set[str]) -> KeptGrid:
        """This grid with only the stale trials among the keys ``trials`` marked stale: a reading of some
        configurations is not held back by a stale trial of another."""
        return replace(self, stale={k: v for k, v in self.stale.items() if k in trials})

    def group(self, variant: str, **axes: Any) -> Group | None:
        for g in self.groups:
            if g.variant == variant and all(str(g.axes.get(k)) == str(v) for k, v in axes.items()):
                return g
        return None

    def values(self, axis: str, with_diverged: bool = False) -> list[Any]:
        """The values of ``axis`` in the grid: sorted when they are numbers, else in order of appearance.
        ``with_diverged`` adds those under which every seed diverged (no group finished)."""
        failed = [r["axes"] for r in self.failed if with_diverged and diverged(r)]
        axes = [g.axes for g in self.groups] + failed
        values = list(dict.fromkeys(a[axis] for a in axes if axis in a))
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        return sorted(values) if numeric else values

    def variants(self) -> list[str]:
        return list(dict.fromkeys(g.variant for g in self.groups))

    @property
    def scale_label(self) -> str:
        """The scale in words: ``paper scale``, the budget scale with its stated budget, or smoke."""
        return scale_label(self.experiment, self.scale)

    @property
    def is_paper_experiment(self) -> bool:
        """At paper scale on the paper's own data: the grid a verdict on the paper's claim may read."""
        return self.scale == "paper" and stand_in(self.experiment) is None

    @property
    def reported_scale(self) -> str:
        """The scale as the tables report it: ``paper`` becomes ``paper sizes, another dataset`` where a
        stand-in dataset replaces the paper's."""
        return "paper sizes, another dataset" if self.scale == "paper" and not self.is_paper_experiment \
            else self.scale

    def stale_text(self) -> str:
        """The stale trials in words (empty when there are none)."""
        if not self.stale:
            return ""
        fields = sorted({f for differing in self.stale.values() for f in differing})
        return (f"{len(self.stale)} of {self.kept} kept trials do not stand for the catalog's current "
                f"entry (they differ in {', '.join(fields)}); spectral-analysis run {self.experiment} "
                f"--scale {self.scale} retrains them")

    def stamp(self, groups: Sequence[Group] | None = None) -> str:
        """What a figure title says of the evidence: the scale, the seeds of ``groups`` (default: every
        configuration; a range where they differ, e.g. after a diverged seed) and any stale trials."""
        seeds = seeds_text(g.seeds for g in (self.groups if groups is None else groups))
        stamp = f"{self.scale_label}; {seeds}"
        return stamp + (f"; {len(self.stale)} of {self.kept} trials stale" if self.stale else "")


def seeds_text(counts: Iterable[int]) -> str:
    """Seed counts in words: ``"3 seeds"``, ``"1 seed"``, or a range where they differ (``"2-3 seeds"``)."""
    distinct = sorted(set(counts)) or [0]
    seeds = f"{distinct[0]}" if len(distinct) == 1 else f"{distinct[0]}-{distinct[-1]}"
    return f"{seeds} seed{'s' if seeds != '1' else ''}"


def stand_in(experiment: str) -> str | None:
    """The dataset that stands in for the paper's in ``experiment`` (the catalog's ``stand_in``), if any."""
    try:
        return find_experiment(experiment).stand_in
    except ValueError:
        return None


def scale_label(experiment: str, scale: str) -> str:
    """``scale`` of ``experiment`` in words, naming a budget scale's stated CPU budget and a paper scale's
    stand-in dataset."""
    if scale == "paper":
        other = stand_in(experiment)
        return (f"the paper's sizes on another dataset ({other})" if other
                else "paper scale")
    if scale == "budget":
        try:
            budget = find_experiment(experiment).budget
        except ValueError:
            budget = None
        return f"budget scale ({budget or 'a CPU budget'}), the paper's sizes but not its training length"
    return f"{scale} scale, not the paper's"


def _catalog_configurations(experiment: str, scale: str = "paper",
                            wanted: Callable[[Trial], bool] | None = None) -> list[str] | None:
    """The configuration keys of the catalog's ``scale`` grid of ``experiment`` (only those of the trials
    ``wanted`` accepts, when given), in order (``None``: not in the catalog)."""
    try:
        trials = find_experiment(experiment).trials(scale, seeds=1)
    except ValueError:
        return None
    return [configuration_key(t.key) for t in trials if wanted is None or wanted(t)]


def _stale_trials(experiment: str, scale: str, rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The rows among ``rows`` that do not stand for the catalog's current trial of the same key, with the
    configuration fields that differ (``trial``: no longer in the grid); none for an experiment or scale
    the catalog does not have."""
    try:
        trials = {t.key: t for t in find_experiment(experiment).trials(scale)}
    except ValueError:
        return {}
    stale = {}
    for row in rows:
        trial = trials.get(row["trial"])
        if trial is None:
            stale[row["trial"]] = ["trial"]
        elif not kept_row_stands(row, trial):
            stale[row["trial"]] = differing_fields(row.get("config") or {}, trial.config)
    return stale


def read_grid(results: str | Path, experiment: str, scale: str | None = None) -> KeptGrid | None:
    """The finished trials of ``experiment`` grouped by configuration, at ``scale`` or (by default) at
    the first of ``paper`` and ``budget`` whose every configuration has one (done, or failed: a
    configuration whose every seed diverged is a result), else ``smoke``; ``None`` when none has any."""
    for candidate in [scale] if scale else SCALES:
        rows = read_rows(results, experiment, candidate)
        done = [r for r in rows if r["status"] == "done"]
        if not done:
            continue
        grid = KeptGrid(experiment, candidate, failed=[r for r in rows if r["status"] == "failed"])
        by_config: dict[str, Group] = {}
        for row in done:
            key = configuration_key(row["trial"])
            group = by_config.setdefault(key, Group(row["variant"], row["axes"], [], []))
            group.rows.append(row)
            group.dirs.append(trial_results_dir(results, experiment, candidate, row["trial"]))
        order = _catalog_configurations(experiment)
        ended = set(by_config) | {configuration_key(r["trial"]) for r in grid.failed}  # a diverged one too
        if order is not None and candidate != "smoke" and not scale and len(ended) < len(order):
            continue  # a paper or budget grid still under way
        for row in grid.failed:
            group, kept = by_config.get(configuration_key(row["trial"])), trial_results_dir(
                results, experiment, candidate, row["trial"])
            if group is not None and (kept / CURVES_NAME).is_file():
                group.failed_rows.append(row)
                group.failed_dirs.append(kept)
        grid.stale = _stale_trials(experiment, candidate, rows)  # a failed row as well as a done one
        rank = {key: i for i, key in enumerate(order or [])}
        grid.groups = [by_config[k] for k in sorted(by_config, key=lambda k: (rank.get(k, len(rank)), k))]
        return grid
    return None


def read_grids(results: str | Path, experiment: str) -> list[KeptGrid]:
    """The grid :func:`read_grid` draws and, when that is not at paper scale, the paper-scale configurations
    kept so far beside it: rows run at paper scale on their own (``run NAME --scale paper --only
    variant=...``) while the whole paper grid needs a GPU."""
    grid = read_grid(results, experiment)
    if grid is not None and grid.scale == "paper":
        return [grid]
    return [g for g in (grid, read_grid(results, experiment, scale="paper")) if g is not None]


def _cut(grid: KeptGrid, wanted: set[str]) -> KeptGrid | None:
    """``grid`` cut to the configuration keys ``wanted`` once every one of them has ended (a finished or a
    failed trial), else ``None``."""
    groups = [g for g in grid.groups if configuration_key(g.rows[0]["trial"]) in wanted]
    failed = [r for r in grid.failed if configuration_key(r["trial"]) in wanted]
    ended = {configuration_key(r["trial"]) for r in [*(g.rows[0] for g in groups), *failed]}
    if not wanted or ended != wanted:
        return None
    cut = KeptGrid(grid.experiment, grid.scale, groups, failed, grid.stale)
    return cut.stale_only_among(cut.kept_keys)


def read_variants(results: str | Path, experiment: str, variants: set[str],
                  scale: str = "paper") -> KeptGrid | None:
    """The ``scale`` grid of ``experiment`` cut to ``variants`` once every catalog configuration of those
    variants is kept at that scale, while the rest of the grid may still be running (a claim about the
    baselines alone need not wait for the other models); ``None`` before that."""
    grid = read_grid(results, experiment, scale=scale)
    wanted = _catalog_configurations(experiment, scale, lambda t: t.variant in variants)
    return None if grid is None or not wanted else _cut(grid, set(wanted))


def unkept_trials(grid: KeptGrid, axis: str) -> dict[Any, list[Trial]] | None:
    """Per value of ``axis`` (``""``: a grid without one), the catalog trials of ``grid``'s scale (each
    model's, every seed the scale runs) not kept yet: still to start or still training; ``None`` for an
    experiment or scale the catalog does not have."""
    try:
        trials = find_experiment(grid.experiment).trials(grid.scale)
    except ValueError:
        return None
    unkept: dict[Any, list[Trial]] = {}
    for trial in trials:
        if trial.key not in grid.kept_keys:
            unkept.setdefault(trial.axes.get(axis) if axis else "", []).append(trial)
    return unkept


def read_settled(results: str | Path, experiment: str, axis: str, scale: str = "paper") -> KeptGrid | None:
    """The ``scale`` grid of ``experiment`` cut to the values of ``axis`` whose every catalog trial (each
    model's, every seed the scale runs) has ended, while the other values still train; ``None`` while no
    value has, and once none still trains (the whole grid is read then). A claim "at every T" can fail on
    the values settled so far, though it can hold only on all of them; a value with a seed still training
    waits, so it cannot lower the seed count the others are judged on, even where :func:`read_grid` reads
    the grid whole (each configuration has ended: two seeds diverged while the third trains)."""
    grid = read_grid(results, experiment, scale=scale)
    if grid is None:
        return None
    unkept = unkept_trials(grid, axis)
    if not unkept:  # no catalog entry to say what is missing, or nothing missing
        return None
    settled = _catalog_configurations(experiment, scale, lambda t: t.axes.get(axis) not in unkept)
    return _cut(grid, set(settled or []))
