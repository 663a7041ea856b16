"""The runner: a catalog grid executed on Ray Tune, one trial per run of the trainer, results kept.

Every trial has its own run directory ``<out>/<experiment>/<scale>/<trial>/`` (config, metrics.jsonl,
checkpoints) and, once finished or failed, its kept results in ``<results>/<experiment>/<scale>/``
(:mod:`spectral_analysis.experiments.results`). Rerunning a sweep skips the trials whose kept row
stands for them (``row_status.kept_row_stands``: ``done`` with the same configuration, or plateaued
within a newly given ``max_steps``), and resumes the others from their last checkpoint; the trainer
resumes bit-identically (batches depend only on seed and step), so an interrupted sweep ends where an
uninterrupted one does. A trial that raises (a NaN loss, a bad configuration) is kept as ``failed``
with its error line, and the rest of the grid goes on. Several experiments run as one grid, in the order
given, each at the call's scale or at its own (an ``(experiment, scale)`` pair: a budget grid's last
long trials beside a paper grid's), so no worker waits for the last trial of one experiment before
starting the next; within an
experiment trials start longest first, by the configuration's measured cost in its kept estimate
(:mod:`~spectral_analysis.experiments.estimate`) where there is one. The experiment's summary and the
ledger are rewritten as each trial ends, so an interrupted sweep leaves them current. The Ray side
(the session, the Tune grid, its statuses) is :mod:`~spectral_analysis.experiments.ray_grid`; the
``processes`` backend (:mod:`~spectral_analysis.experiments.process_grid`) runs the same trials in plain
local processes, for a machine without Ray (there ``gpus_per_trial`` > 0 only puts the trials on CUDA,
``workers`` of them at a time). One trial (its spec, when it stops, :func:`run_trial`, its Tune side) is
:mod:`~spectral_analysis.experiments.trial`.

:func:`~spectral_analysis.experiments.trial.request_stop` (``spectral-analysis stop``) stops the
sweeps training into an ``out`` directory as the time budget does, at once: each running trial
checkpoints at its next step and parks, no trial starts after it. The request is the file
``<out>/.stop``; a sweep obeys one written after it started, so a later ``run`` is not stopped by an
old request (on a cluster, only nodes that share ``out`` see it).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from spectral_analysis.atomic import exclusive_lock
from spectral_analysis.experiments.calibration import refused_baselines
from spectral_analysis.experiments.catalog import load_catalog
from spectral_analysis.experiments.estimate import read_estimate
from spectral_analysis.experiments.grid import Experiment, Trial, configuration_key, sampled_trial
from spectral_analysis.experiments.ledger import write_ledger
from spectral_analysis.experiments.parking import CONFIG, drop_if_stale, park_run, parked_dir
from spectral_analysis.experiments.process_grid import run_processes
from spectral_analysis.experiments.ray_grid import ray_session, run_grid
from spectral_analysis.experiments.results import (
    left_to_another_seed,
    promote_zoo_seeds,
    read_rows,
    write_summary,
)
from spectral_analysis.experiments.row_status import kept_row_stands
from spectral_analysis.experiments.trial import (
    STOP_REQUEST,
    TrialSpec,
    git_revision,
    keep_stopped,
    run_conflicts,
    run_trial,
    tune_trainable,
)
from spectral_analysis.experiments.validation import held_back
from spectral_analysis.io.zoo import RESULT_NAME, default_results_dir, read_kept_row, trial_results_dir
from spectral_analysis.vocabulary import SWEEP_BACKENDS

logger = logging.getLogger(__name__)
SWEEP_LOCK = ".sweep.lock"  # in a sweep's results and out folders: see writer_locks
TUNE_STORAGE = ".tune"  # in a sweep's out folder: Tune's experiment of each ray run, <sweep>-<started>/


@dataclass
class SweepOutcome:
    experiment: str
    scale: str
    rows: list[dict[str, Any]]  # the kept rows of every trial of the grid that has one
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)  # trial key -> why a validation grid holds it back
    unfinished: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)  # ended early by a Tune scheduler (ASHA)
    promoted: list[str] = field(default_factory=list)  # trials the zoo keeps the model of now (seed 0 failed)
    seconds: float = 0.0  # wall time of the whole run (one grid for every experiment of a call)


Sweep = tuple[Experiment, str]  # an experiment and the scale its grid runs at


def sweep_pairs(experiments: Sequence[Experiment | Sweep], scale: str) -> list[Sweep]:
    """Each item with its scale: an experiment runs at ``scale``, an ``(experiment, scale)`` pair at its own.
    An experiment may appear once (its trials' names do not tell its scales apart)."""
    pairs = [item if isinstance(item, tuple) else (item, scale) for item in experiments]
    names = [experiment.name for experiment, _ in pairs]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"experiment(s) {twice} named more than once; run each scale in a call of its own")
    return pairs


def park_sweeps(experiments: Sequence[Experiment | Sweep], scale: str, *, seeds: int | None = None,
                only: dict[str, str] | None = None, out: str | Path = "runs",
                results: str | Path | None = None) -> list[str]:
    """Park (:mod:`~spectral_analysis.experiments.parking`) the run directory of every trial of the grids
    that is not kept yet, as a sweep stopped from outside (a session's end, a job's wall time) left them;
    one line per run directory found. The ledger is rewritten, so its ``parked`` column counts them.
    ``experiments`` as :func:`run_sweeps` takes them."""
    results = Path(results) if results else default_results_dir()
    lines: list[str] = []
    pairs = sweep_pairs(experiments, scale)
    with writer_locks(Path(out).resolve(), results.resolve()):
        for experiment, grid_scale in pairs:
            for trial in experiment.trials(grid_scale, seeds, only):
                run_dir = Path(out) / experiment.name / grid_scale / trial.key
                if not run_dir.is_dir() or _kept_and_standing(results, trial, retry_failed=False):
                    continue
                config = trial.train_config(run_dir.resolve())
                conflicts = run_conflicts(config) if (run_dir / CONFIG).is_file() else []
                if conflicts:
                    lines.append(f"{experiment.name}: not parked: {trial.key} is a run of an older catalog "
                                 f"entry ({'; '.join(conflicts)}; the next run starts the trial afresh)")
                    continue
                parked = parked_dir(results, experiment.name, grid_scale, trial.key)
                drop_if_stale(parked, config)
                lines.append(f"{experiment.name}: {park_run(run_dir, parked)}")
        if lines:
            write_ledger(results, _catalog_of(pairs))
    return lines


def _catalog_of(pairs: list[tuple[Experiment, str]]) -> dict[str, Experiment]:
    """The whole catalog the sweep's experiments come from, as it is on disk now."""
    return load_catalog(pairs[0][0].path.parent)


def _write_ledger_now(results: Path, pairs: list[tuple[Experiment, str]],
                      started_with: dict[str, Experiment]) -> None:
    """Write the ledger from the catalog as it is now, so an entry edited while a long sweep runs is
    counted as the next run will read it (not as stale trials to train on); from the catalog the sweep
    started with where the edited one does not load in this process (a field its code does not know yet),
    so such an edit cannot stop the sweep."""
    try:
        catalog = _catalog_of(pairs)
    except ValueError:
        catalog = started_with
    write_ledger(results, catalog)


@contextmanager
def writer_locks(out: Path, results: Path) -> Iterator[None]:
    """The one writer's locks on a sweep's results tree and run directories, held while it runs
    (``run`` and ``park``); a second sweep into either is refused with the holder's pid."""
    folders = {results: "writes its kept results", out: "trains into it"}  # one lock where they agree
    with ExitStack() as stack:
        for folder, what in folders.items():
            busy = (f"{folder} is in use: another sweep (pid {{pid}}) {what}; wait for it to end (or "
                    f"`spectral-analysis stop --out {out}`), or give another folder")
            stack.callback(exclusive_lock(folder / SWEEP_LOCK, busy).close)
        yield


def _kept_row(results: Path, trial: Trial) -> dict[str, Any] | None:
    path = trial_results_dir(results, trial.experiment, trial.scale, trial.key) / RESULT_NAME
    if not path.is_file():
        return None
    return read_kept_row(path)


def _kept_and_standing(results: Path, trial: Trial, retry_failed: bool, retrain_unkept_models: bool = False
                       ) -> bool:
    """Whether ``trial`` has a kept row that stands for it (a sweep skips it, ``park`` leaves it).
    ``retrain_unkept_models``: a done row without the network its scale keeps (:func:`lacks_kept_model`)
    does not stand."""
    kept = _kept_row(results, trial)
    return kept is not None and kept_row_stands(kept, trial, retry_failed) and not (
        retrain_unkept_models and lacks_kept_model(kept, trial))


def lacks_kept_model(kept: dict[str, Any], trial: Trial) -> bool:
    """Whether the kept row of ``trial`` is done without the network that its scale keeps for every seed
    (``keep_models = "every seed"``), left to the zoo's seed because it was kept before the scale said so."""
    return trial.keep_model and kept.get("status") == "done" and left_to_another_seed(kept)


def longest_first(trials: list[Trial], estimate: dict[str, Any] | None) -> list[Trial]:
    """``trials`` ordered by their configuration's estimated seconds (at its ``max_steps`` cap where it has
    one), longest first; configurations the estimate lacks, and every trial without an estimate, keep
    the catalog's order after them."""
    configurations = (estimate or {}).get("configurations", {})

    def seconds(trial: Trial) -> float:
        timing = configurations.get(configuration_key(trial.key), {})
        return float(timing.get("estimated_seconds_at_cap", timing.get("estimated_seconds", 0.0)) or 0.0)

    return sorted(trials, key=seconds, reverse=True)  # stable: ties keep the catalog's order


def run_sweep(experiment: Experiment, scale: str, **options: Any) -> SweepOutcome:
    """Run the grid of ``experiment`` at ``scale`` (:func:`run_sweeps` of one experiment)."""
    return run_sweeps([experiment], scale, **options)[0]


def run_sweeps(
    experiments: Sequence[Experiment | Sweep],
    scale: str,
    *,
    seeds: int | None = None,
    only: dict[str, str] | None = None,
    workers: int = 1,
    threads_per_trial: int = 1,
    gpus_per_trial: float = 0.0,
    address: str | None = None,
    backend: str = "ray",
    out: str | Path = "runs",
    results: str | Path | None = None,
    time_budget: float | None = None,
    retry_failed: bool = False,
    tensorboard: bool = False,
    scheduler: Any = None,
    tune_callbacks: Sequence[Any] = (),
    search_space: dict[str, Any] | None = None,
    num_samples: int = 1,
    max_failures: int = 0,
    despite_calibration: bool = False,
    retrain_unkept_models: bool = False,
    report: Callable[[str], None] = logger.info,
) -> list[SweepOutcome]:
    """Run the grids of ``experiments`` on Ray Tune as one grid (see the module docstring), each at ``scale``
    or, given as an ``(experiment, scale)`` pair, at its own: the experiments in the order given, each
    one's trials longest first, so a worker that finishes the last trials of one experiment goes straight
    on to the next. Each experiment's summary and the ledger are rewritten as each of its trials ends.
    ``scheduler``: a Tune scheduler ranking the trials' evaluations by ``valid_score``
    (``ray_grid.asha()``); a trial it ends is kept as ``stopped``, which a rerun leaves as it leaves a
    failed one (``retry_failed`` resumes both). ``tune_callbacks``: Tune callbacks (loggers) beside the
    runner's own. ``threads_per_trial``: torch's threads in each trial, and the CPUs Ray reserves for it
    (more than one where a single trial, not the grid's width, is what must end soon). ``search_space``:
    Tune domains by configuration field (``{"lr": tune.loguniform(1e-4, 1e-2)}``, dotted for an option:
    ``"model_options.r"``), drawn ``num_samples`` times at every grid point; each draw is a trial of its
    own, named by its values (``rnn_lr0.01235_s0``), so a rerun draws anew instead of resuming.
    ``max_failures``: how often Tune restarts a trial whose worker was lost, from the Tune checkpoint of
    its last evaluation. Tune's own records of the grid (those checkpoints, its loggers' files) stay in
    ``out/.tune/<sweep>-<started>/``. A baseline whose kept calibration trails its reference with the
    grid's recipe is held back (``calibration.refused_baselines``) unless ``despite_calibration``.
    ``retrain_unkept_models``: the done trials whose network the scale keeps but ``results`` lacks
    (:func:`lacks_kept_model`) train again, from their run directory's checkpoint where it is still there,
    and their rerun replaces the row.

    ```python
    from spectral_analysis.experiments import find_experiment, run_sweep
    from spectral_analysis.experiments.ray_grid import asha
    run_sweep(find_experiment("fig1-addition"), "smoke", scheduler=asha(grace_period=1), workers=2)
    ```
    """
    for name, value in (("workers", workers), ("threads_per_trial", threads_per_trial)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not 0 <= gpus_per_trial <= 1 and not (gpus_per_trial > 1 and float(gpus_per_trial).is_integer()):
        raise ValueError(
            f"gpus per trial must be a fraction in [0, 1] or a whole number, got {gpus_per_trial}"
        )
    if gpus_per_trial and not torch.cuda.is_available() and not (address or os.environ.get("RAY_ADDRESS")):
        raise ValueError("--gpus-per-trial was given but this machine has no CUDA device")
    if backend not in SWEEP_BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(SWEEP_BACKENDS)}, got {backend!r}")
    if backend == "processes" and (address or os.environ.get("RAY_ADDRESS")):
        raise ValueError("a cluster address needs the ray backend: the processes backend runs on this "
                         "machine alone")
    if backend == "processes" and (scheduler is not None or tune_callbacks or search_space or max_failures):
        raise ValueError("a Tune scheduler, search space, callbacks or restarts need the ray backend")
    if isinstance(max_failures, bool) or not isinstance(max_failures, int) or max_failures < 0:
        raise ValueError(f"max_failures must be a whole number >= 0, got {max_failures!r}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1 \
            or (num_samples > 1 and not search_space):
        raise ValueError(f"num_samples must be a positive integer, and more than 1 only with a search space; "
                         f"got {num_samples!r}")
    if time_budget is not None and not time_budget > 0:
        raise ValueError(f"time budget must be > 0 seconds, got {time_budget}")
    clock = time.perf_counter()
    cluster = bool(address or os.environ.get("RAY_ADDRESS"))  # a worker on another node sees other pids
    # absolute: Tune runs each trial in a working directory of its own, where a relative path would
    # land the run directories inside Ray's session folder (and out of reach of the next resume)
    out = Path(out).resolve()
    results = (Path(results) if results else default_results_dir()).resolve()
    with writer_locks(out, results):  # one sweep at a time into these folders (module docstring)
        device = "cuda" if gpus_per_trial else "cpu"
        started = time.time()
        deadline = started + time_budget if time_budget else None
        revision, specs, outcomes = git_revision(), [], {}
        pairs = sweep_pairs(experiments, scale)
        catalog = _catalog_of(pairs)
        for experiment, grid_scale in pairs:
            trials = experiment.trials(grid_scale, seeds, only)
            if not trials:
                keys = "; ".join(f"{key} = {', '.join(values)}"
                                 for key, values in experiment.selectors(grid_scale).items())
                raise ValueError(f"no trial of {experiment.name!r} at scale {grid_scale!r} matches {only}; "
                                 f"its trials are selected by {keys}")
            outcome = outcomes[experiment.name] = SweepOutcome(experiment.name, grid_scale, [])
            to_run, held = [], held_back(experiment, grid_scale, catalog, results)
            if not despite_calibration:
                held = {**refused_baselines(experiment, grid_scale, results), **held}
            for trial in longest_first(trials, read_estimate(results, experiment.name, device)):
                standing = _kept_and_standing(results, trial, retry_failed, retrain_unkept_models)
                if not search_space and standing:
                    outcome.skipped.append(trial.key)
                    continue
                if trial.variant in held:
                    outcome.held[trial.key] = held[trial.variant]
                    continue
                if search_space:  # a draw of every domain, to refuse a field the trials cannot take now
                    sampled_trial(trial, {path: domain.sample() for path, domain in search_space.items()})
                run_dir = out / experiment.name / grid_scale / trial.key
                to_run.append(TrialSpec(asdict(trial), str(run_dir), str(results), device, revision, deadline,
                                        str(out / STOP_REQUEST), started, threads=threads_per_trial,
                                        tensorboard=tensorboard, driver_pid=None if cluster else os.getpid()))
            if to_run:
                report(f"{experiment.name} ({grid_scale}): {len(to_run)} trial(s) to run, "
                       f"{len(outcome.skipped)} already kept")
            for why in dict.fromkeys(outcome.held.values()):
                count = sum(w == why for w in outcome.held.values())
                report(f"{experiment.name} ({grid_scale}): {count} trial(s) held back: {why}")
            specs += to_run
        def finished(experiment: str) -> None:
            write_summary(results, experiment, outcomes[experiment].scale)
            _write_ledger_now(results, pairs, catalog)

        statuses: dict[str, str] = {}
        if specs and backend == "processes":
            statuses = run_processes([asdict(s) for s in specs], run_trial, workers, report, finished)
        elif specs:
            name = ("sweep" if len(pairs) > 1 else f"{pairs[0][0].name}-{pairs[0][1]}") \
                + time.strftime("-%Y%m%d-%H%M%S", time.localtime(started))
            with ray_session(workers, gpus_per_trial, address, threads_per_trial):
                statuses = run_grid([asdict(s) for s in specs], tune_trainable, gpus_per_trial,
                                    out / TUNE_STORAGE, name, report, finished, scheduler, tune_callbacks,
                                    keep_stopped, search_space, num_samples, max_failures,
                                    cpus_per_trial=threads_per_trial)
        ran = ([(spec.trial["experiment"], spec.trial["key"]) for spec in specs] if not search_space
               else [tuple(name.split("/", 1)) for name in statuses])  # a search's trials are its draws
        for experiment_name, key in ran:
            outcome = outcomes[experiment_name]
            outcome.ran.append(key)
            status = statuses.get(f"{experiment_name}/{key}", "unfinished")
            if status == "unfinished":
                outcome.unfinished.append(key)
            elif status == "stopped":
                outcome.stopped.append(key)
            elif status != "done":
                outcome.failed.append(key)
        for outcome in outcomes.values():
            outcome.promoted = promote_zoo_seeds(results, outcome.experiment, outcome.scale, out)
            outcome.rows = (write_summary(results, outcome.experiment, outcome.scale)
                            if read_rows(results, outcome.experiment, outcome.scale) else [])
            outcome.failed = sorted({r["trial"] for r in outcome.rows if r["status"] == "failed"}
                                    | set(outcome.failed))
            outcome.seconds = time.perf_counter() - clock
        _write_ledger_now(results, pairs, catalog)
        return list(outcomes.values())
