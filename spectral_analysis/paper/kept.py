"""How an experimental paper check reads kept results and how far it may judge from them.

A check reads its experiment through :func:`~spectral_analysis.experiments.reading.read_grid` (it never
trains). It gets ``holds`` or ``differs`` only from the paper scale with at least :data:`MIN_SEEDS` seeds
and no stale trial (a kept row the catalog's current entry would retrain; among the configurations it
reads, where it names them: :func:`stale_among`); otherwise the verdict is
``unverified`` and the evidence says what the kept runs show and which command would produce the evidence.
One exception (:func:`judged_on_first_steps`): a claim about the first steps of training only is judged on a
budget grid whose runs are the paper's configurations and seeds cut short, since their first steps are the
paper runs' first steps. A check that names the trials its verdict rests on (``unfit``, from
:func:`unfit_trials`) is also ``unverified`` when any of them is not fit evidence: diverged, at chance, or
collapsed to one output (:mod:`spectral_analysis.experiments.fitness`).
"""

from __future__ import annotations

from pathlib import Path

from spectral_analysis.checks import CheckRecord
from spectral_analysis.experiments.catalog import find_experiment
from spectral_analysis.experiments.fitness import diverged
from spectral_analysis.experiments.grid import TRAINING_LENGTH, configuration_key
from spectral_analysis.experiments.groups import END_RECORDS, Group
from spectral_analysis.experiments.reading import KeptGrid, read_grid, read_settled, read_variants, seeds_text
from spectral_analysis.experiments.row_status import plateau_count
from spectral_analysis.io import default_results_dir

MIN_SEEDS = 3


def kept_grid(experiment: str, results: str | Path | None = None) -> KeptGrid | None:
    return read_grid(results or default_results_dir(), experiment)


def kept_variants(experiment: str, variants: set[str], results: str | Path | None = None,
                  scale: str = "paper") -> KeptGrid | None:
    """The ``scale`` grid cut to ``variants`` once theirs is complete (:func:`read_variants`)."""
    return read_variants(results or default_results_dir(), experiment, variants, scale)


def kept_settled(experiment: str, axis: str, results: str | Path | None = None) -> KeptGrid | None:
    """The paper grid cut to the values of ``axis`` kept for every seed of every model so far
    (:func:`read_settled`)."""
    return read_settled(results or default_results_dir(), experiment, axis)


def so_far(record: CheckRecord, settled: str) -> CheckRecord:
    """A claim about every value of an axis, :func:`judged` on the values ``settled`` so far (e.g.
    ``"T = 100"``) while the others still train: ``differs`` stands, since one value where the claim fails
    refutes it; any other verdict is ``unverified`` until every value is kept. The claim says which values
    it was read on (the README's table shows it)."""
    record.claim += f" (read on {settled} alone: the values kept for every model so far)"
    if record.verdict == "differs":
        record.evidence = f"fails already at {settled}, the values kept so far: {record.evidence}"
        return record
    if record.verdict != "unverified":
        record.evidence = f"would read '{record.verdict}' from these: {record.evidence}"
        record.verdict = "unverified"
    record.evidence = f"only {settled} kept so far, and the claim is about every value; {record.evidence}"
    return record


def missing_record(source: str, claim: str, experiment: str, quote: str, scale: str = "paper") -> CheckRecord:
    """The record of a claim whose experiment has no complete ``scale``-scale results: ``unverified``,
    naming the command that keeps them."""
    hint = " (--scale smoke shows the machinery)" if scale == "paper" else ""
    return CheckRecord(
        source,
        claim,
        "unverified",
        f"no kept {scale}-scale results of {experiment!r}: run spectral-analysis run {experiment} "
        f"--scale {scale}{hint}",
        {},
        quote=quote,
    )


def records_from_readers(readers) -> list[CheckRecord]:  # noqa: ANN001 (experiment, source, quotes, read)
    """Each reader's records from its experiment's kept grid, or one ``missing_record`` per quoted claim
    when nothing is kept: ``readers`` holds ``(experiment, source, quotes, read(grid))``."""
    records = []
    for experiment, source, quotes, read in readers:
        grid = kept_grid(experiment)
        records += read(grid) if grid else [missing_record(source, q, experiment, q) for q in quotes]
    return records


def unfit_trials(grid: KeptGrid, groups: dict[str, list[Group]], stays_at_chance: set[str] | None = None,
                 every_configuration: bool = False) -> list[str]:
    """The trials of ``groups`` (by model; the diverged seeds of their configurations too) that are not fit
    evidence, as ``"<model> seed <s> (<axis> <value>, ...): <reasons>"`` (the axes where the grid has
    some). ``every_configuration``: the check reads every configuration of these models, so the failed
    trials of a configuration none of whose seeds finished count too. For a model the claim says does not
    learn (``stays_at_chance``), being at chance or collapsed is the claim itself and does not count;
    diverging does. A row kept before fitness was recorded counts as fit unless it diverged."""
    unfit = []
    for model, model_groups in groups.items():
        keys = {configuration_key(r["trial"]) for g in model_groups for r in g.rows}
        failed = [r for r in grid.failed if configuration_key(r["trial"]) in keys
                  or (every_configuration and r["variant"] == model)]
        for row in [r for g in model_groups for r in g.rows] + failed:
            fitness = row.get("fitness") or {"reasons": ["diverged"] if diverged(row) else []}
            reasons = [reason for reason in fitness["reasons"]
                       if not (model in (stays_at_chance or set()) and reason.startswith(("at chance",
                                                                                         "collapsed")))]
            if reasons:
                at = ", ".join(f"{axis} {value}" for axis, value in (row.get("axes") or {}).items())
                unfit.append(f"{model} seed {row['seed']}{f' ({at})' if at else ''}: {'; '.join(reasons)}")
    return unfit


def gate(grid: KeptGrid, verdict: str, evidence: str, seeds: int | None = None,
         first_steps: str | None = None, unfit: list[str] | None = None) -> tuple[str, str]:
    """``(verdict, evidence)``: the verdict when the grid is at paper scale (or, ``first_steps`` saying
    why, stands for its first steps: :func:`judged_on_first_steps`) with enough seeds (``seeds``: those of
    the configurations the claim reads, default every configuration's), no stale trial and no ``unfit``
    trial among those it rests on, else ``unverified`` with the evidence prefixed by why."""
    seeds = grid.seeds if seeds is None else seeds
    stamp = f"{grid.scale_label}; {seeds_text([seeds])}"
    standing = seeds >= MIN_SEEDS and not grid.stale and (bool(first_steps) or grid.is_paper_experiment)
    if standing and not unfit:
        return verdict, (f"{stamp}; {first_steps}: {evidence}" if first_steps else f"{stamp}: {evidence}")
    if grid.stale:  # named at any scale: a reader must know which runs are to be retrained
        why = f"{stamp}, but {grid.stale_text()}"
    elif standing or not grid.is_paper_experiment:
        why = stamp
    else:
        why = f"{stamp}, fewer than the {MIN_SEEDS} paper-scale seeds a verdict needs"
    if unfit:
        why += f"; the evidence includes trials that are not fit evidence ({'; '.join(unfit)})"
    return "unverified", (
        f"{why}; would read '{verdict}' from these runs, which are not evidence about the "
        f"paper's experiment: {evidence}"
    )


def stale_among(grid: KeptGrid, groups: list[Group]) -> KeptGrid:
    """``grid`` with only the stale trials of ``groups`` (finished and failed): a claim that reads some
    configurations is not held back by a stale trial of another (an IRNN retrained with a new start
    says nothing about the oRNN's gradients)."""
    return grid.stale_only_among({r["trial"] for group in groups for r in [*group.rows, *group.failed_rows]})


def stale_of_models(grid: KeptGrid, models: set[str]) -> KeptGrid:
    """``grid`` with only the stale trials of ``models`` marked stale, those of a configuration whose every
    seed failed included (it has no :class:`Group`, so :func:`stale_among` cannot name it): a claim about
    those models alone is not held back by another model's stale trials (an RNN retrained with a new
    clipping says nothing about KRU's copy)."""
    rows = [*(r for g in grid.groups for r in [*g.rows, *g.failed_rows]), *grid.failed]
    return grid.stale_only_among({r["trial"] for r in rows if r["variant"] in models})


def judged(grid: KeptGrid, record: CheckRecord, seeds: int | None = None,
           first_steps: str | None = None, unfit: list[str] | None = None,
           groups: list[Group] | None = None) -> CheckRecord:
    """``record`` with its verdict and evidence passed through :func:`gate` and the scale and seeds
    noted (``seeds``: of the configurations the claim reads, default the grid's fewest; ``unfit``: the
    trials it rests on that are not fit evidence, :func:`unfit_trials`; ``groups``: the configurations it
    reads, whose stale trials alone then hold it back, :func:`stale_among`)."""
    if groups is not None:
        grid = stale_among(grid, groups)
    record.verdict, record.evidence = gate(grid, record.verdict, record.evidence, seeds, first_steps, unfit)
    if unfit:
        record.numbers = {**record.numbers, "unfit_trials": unfit}
    record.scale, record.seeds = grid.reported_scale, grid.seeds if seeds is None else seeds
    record.plateaued = plateau_count([row for group in grid.groups for row in group.rows])
    record.stale = f"{len(grid.stale)}/{grid.kept}" if grid.stale else None
    return record


def paper_prefix_gap(grid: KeptGrid, groups: list[Group], steps: int) -> str | None:
    """Why the kept runs of ``groups`` (failed seeds included) are not the first ``steps`` steps of the
    catalog's paper-scale runs of the same keys, or ``None`` when they are: the same configuration but for
    :data:`TRAINING_LENGTH`, and each done run trained at least ``steps`` steps (a run that diverged
    earlier counts with its whole record). The trainer's batches depend on seed and step alone and its
    learning rate on the epoch, so on one machine a shorter run is the longer one's beginning, bit for bit
    (tests/test_resume.py); on another device rounding separates the two after some tens of steps, and
    the runs are draws of the same beginning."""
    try:
        paper = {t.key: t for t in find_experiment(grid.experiment).trials("paper")}
    except ValueError:
        return f"{grid.experiment!r} is not in the catalog"
    for row in (row for g in groups for row in [*g.rows, *g.failed_rows]):
        trial = paper.get(row["trial"])
        if trial is None:
            return f"{row['trial']} has no paper-scale trial"
        kept = row.get("config") or {}
        fields = sorted(k for k in (kept.keys() | trial.config.keys()) - set(TRAINING_LENGTH)
                        if kept.get(k) != trial.config.get(k))
        if fields:
            return f"{row['trial']} differs from its paper-scale trial in {', '.join(fields)}"
        if row["status"] == "done" and row["steps"] < steps:
            return f"{row['trial']} ended at step {row['steps']}, before step {steps}"
    return None


def judged_on_first_steps(grid: KeptGrid, record: CheckRecord, groups: list[Group], steps: int,
                          seeds: int | None = None) -> CheckRecord:
    """:func:`judged` for a claim about the first ``steps`` steps of training alone, which a budget grid
    decides when its runs of ``groups`` are the paper's runs cut short (:func:`paper_prefix_gap`)."""
    if grid.scale != "budget" or paper_prefix_gap(grid, groups, steps) is not None:
        return judged(grid, record, seeds, groups=groups)
    why = (f"read on the first {steps} steps, which these runs share with the paper scale's (the same "
           "configurations and seeds, trained for fewer steps)")
    return judged(grid, record, seeds, first_steps=why, groups=groups)


def seed_by_seed(as_claimed: dict[str, list[bool]]) -> str:
    """A claim read seed by seed for each model: ``holds`` when every seed of every model shows it,
    ``differs`` when no seed of some model does, else ``inconclusive``."""
    if as_claimed and all(all(seeds) for seeds in as_claimed.values()):
        return "holds"
    return "differs" if any(not any(seeds) for seeds in as_claimed.values()) else "inconclusive"


def beats(winner: list[float], loser: list[float], higher_is_better: bool = True) -> str:
    """A comparison over seeds: ``holds`` when the claimed winner's worst seed beats the other's best,
    ``differs`` when the other's worst beats the winner's best, else ``inconclusive``."""
    sign = 1.0 if higher_is_better else -1.0
    w, lo = [sign * v for v in winner], [sign * v for v in loser]
    if min(w) > max(lo):
        return "holds"
    if min(lo) > max(w):
        return "differs"
    return "inconclusive"


def every(outcomes: list[str]) -> str:
    """Several :func:`beats` outcomes as one claim: ``differs`` when any differs, ``holds`` when all
    hold (and there is at least one), else ``inconclusive``."""
    if "differs" in outcomes:
        return "differs"
    return "holds" if outcomes and all(o == "holds" for o in outcomes) else "inconclusive"


def overfitting_gaps(group: Group, metric: str, records: int = END_RECORDS) -> list[float]:
    """How far each seed overfits: its final test ``metric`` (a loss) minus its median training ``metric``
    over its last ``records`` training records."""
    tests = group.final_per_seed("test_metrics", metric)
    ends = group.last_per_seed("train", metric, records)
    return [test - end for test, end in zip(tests, ends, strict=True)]


def spread_text(values: list[float], spec: str = ".4g") -> str:
    """Seeds' values as evidence text: ``mean [min, max]``, each formatted with ``spec``."""
    return f"{sum(values) / len(values):{spec}} [{min(values):{spec}}, {max(values):{spec}}]"
