"""The runner's Ray Tune side: a Ray for the sweeps (:func:`ray_session`), one Tune grid of trials run as
workers free up (:func:`run_grid`), and each trial's status read back from Tune (:func:`tune_statuses`).
Each trial reports every validation evaluation to Tune with a Tune checkpoint of that step
(:func:`report_evaluation`), so a Tune scheduler (ASHA, :func:`asha`) ranks the trials by :data:`SCORE`
and ends the weak ones early, Tune's callbacks (its loggers, TensorBoard, W&B, MLflow) see every
evaluation, and Tune restarts a trial whose worker was lost from its checkpoint (:func:`restore_reported`).
What a trial does (:func:`~spectral_analysis.experiments.trial.run_trial`) and what is kept of it stay
in :mod:`~spectral_analysis.experiments.runner`.

Ray: with no address (and no ``RAY_ADDRESS``) the runner starts a local Ray itself (``num_cpus`` =
workers x CPUs per trial, loopback, no dashboard) and shuts it down after; with an address it joins that
cluster, whose nodes must see ``out`` and ``results`` (a shared filesystem) and have this package installed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from spectral_analysis.allocator import ALLOCATOR_ENVIRONMENT
from spectral_analysis.experiments.grid import Trial, sampled_trial
from spectral_analysis.experiments.parking import park_run, restore_parked
from spectral_analysis.train import TrainConfig
from spectral_analysis.train.plateau import LOWER_IS_BETTER

# what a Tune scheduler ranks trials by: the task's primary validation metric, negated where lower is
# better (mse, loss, perplexity), so that higher is better for every task of a grid
SCORE = "valid_score"


def joining_environment(address: str | None) -> str | None:
    """The cluster address a sweep joins (``address``, else ``$RAY_ADDRESS``), with the environment set to
    join it. Call it before anything imports Ray: `ray start --head` (Ray >= 2.50) enables token
    authentication and writes the token to ~/.ray/auth_token, and a driver sends it only in token mode,
    which Ray reads at import."""
    address = address or os.environ.get("RAY_ADDRESS")
    if address and (Path.home() / ".ray" / "auth_token").is_file():
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    return address


@contextmanager
def ray_session(workers: int = 1, gpus_per_trial: float = 0.0, address: str | None = None,
                cpus_per_trial: int = 1) -> Iterator[None]:
    """A Ray for the sweeps inside: the one already running in this process, the cluster at ``address``
    (or ``$RAY_ADDRESS``), or a local one on loopback with room for ``workers`` trials of ``cpus_per_trial``
    CPUs each, stopped on exit."""
    address = joining_environment(address)
    try:
        import ray
    except ImportError as error:
        raise RuntimeError(f"the runner needs Ray Tune (pip install 'spectral-analysis[sweep]'): {error}") \
            from None
    if ray.is_initialized():
        yield
        return
    # a trial trains in a thread the worker made before run_trial ran; glibc reads the memory policy
    # for such threads only from the environment the worker process starts with
    runtime_env = {"env_vars": dict(ALLOCATOR_ENVIRONMENT)}
    if address:
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=False, logging_level="WARNING")
    else:
        # "local" starts a fresh instance even where another sweep's Ray is up on this machine, which
        # a bare ray.init() would join (and wait on that sweep's busy CPUs)
        ray.init(address="local", num_cpus=workers * cpus_per_trial,
                 num_gpus=torch.cuda.device_count() if gpus_per_trial else 0, include_dashboard=False,
                 _node_ip_address="127.0.0.1", runtime_env=runtime_env, log_to_driver=False,
                 logging_level="WARNING")
    try:
        yield
    finally:
        ray.shutdown()


def evaluation_metrics(line: dict[str, Any], primary: str) -> dict[str, float]:
    """A validation line of the trainer as Tune metrics: ``step``, each number as ``valid_<name>``, and
    :data:`SCORE` from ``primary``.

    ```python
    >>> evaluation_metrics({"step": 40, "phase": "valid", "mse": 0.25, "time": 3.0}, "mse")
    {'step': 40, 'valid_mse': 0.25, 'valid_score': -0.25}

    ```
    """
    metrics: dict[str, float] = {"step": line["step"]}
    metrics.update({f"valid_{name}": float(value) for name, value in line.items()
                    if name not in ("step", "phase", "time") and isinstance(value, int | float)
                    and not isinstance(value, bool)})
    if isinstance(line.get(primary), int | float):
        metrics[SCORE] = -float(line[primary]) if primary in LOWER_IS_BETTER else float(line[primary])
    return metrics


def report_evaluation(line: dict[str, Any], primary: str, run_dir: Path) -> dict[str, float]:
    """Report a validation line to the Tune trial this runs in, with a Tune ``Checkpoint`` of the run's
    resumable state at that step (``run_dir`` parked into it, :func:`~spectral_analysis.experiments.
    parking.park_run`); the metrics reported. Tune persists the checkpoint into the sweep's storage and
    hands it back when it restarts the trial (:func:`restore_reported`). When a scheduler ends the trial,
    Tune raises ``SystemExit`` here, and the trial's thread ends at this evaluation."""
    from ray import tune

    metrics = evaluation_metrics(line, primary)
    with tempfile.TemporaryDirectory(prefix="tune-checkpoint-") as folder:
        state = Path(folder) / "run"
        park_run(run_dir, state, any_size=True)  # nothing there when the run has no checkpoint yet
        checkpoint = tune.Checkpoint.from_directory(str(state)) if state.is_dir() else None
        tune.report(metrics, checkpoint=checkpoint)  # persisted before report returns
    return metrics


def restore_reported(config: TrainConfig) -> int | None:
    """Put the Tune checkpoint of the trial this runs in back into its run directory ``config.out``, when
    Tune handed one (it restarted the trial after its worker was lost, ``FailureConfig.max_failures``)
    and it is later than the run directory's own; the step restored, or ``None``."""
    from ray import tune

    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as folder:
        return restore_parked(folder, config)


def asha(grace_period: int = 1, reduction_factor: int = 3) -> Any:
    """Tune's ASHA scheduler over a sweep: trials ranked by :data:`SCORE` at rungs of ``grace_period``,
    ``grace_period * reduction_factor``, ... evaluations (Tune's ``training_iteration``), the lower
    ``1 - 1 / reduction_factor`` of each rung stopped. No rung caps a trial's length: a trial that passes
    every rung trains to its own end."""
    from ray.tune.schedulers import ASHAScheduler

    if grace_period < 1 or reduction_factor < 2:
        raise ValueError(f"ASHA needs grace_period >= 1 and reduction_factor >= 2, got {grace_period} and "
                         f"{reduction_factor}")
    return ASHAScheduler(time_attr="training_iteration", metric=SCORE, mode="max", max_t=10 ** 6,
                         grace_period=grace_period, reduction_factor=reduction_factor)


def spec_id(spec: dict[str, Any]) -> str:
    """``experiment/key``: a trial's name across the experiments of one grid (keys repeat between them)."""
    return f"{spec['trial']['experiment']}/{spec['trial']['key']}"


def trial_spec(config: dict[str, Any]) -> dict[str, Any]:
    """The spec a Tune trial runs: its grid point, with the values a search drew (``config["search"]``)
    set in it (:func:`~spectral_analysis.experiments.grid.sampled_trial`) and its run directory named
    by the drawn trial."""
    spec, sample = config["spec"], config.get("search")
    if not sample:
        return spec
    drawn = sampled_trial(Trial(**spec["trial"]), sample)
    return {**spec, "trial": asdict(drawn), "run_dir": str(Path(spec["run_dir"]).parent / drawn.key)}


def run_grid(
    specs: list[dict[str, Any]], trainable: Callable[[dict[str, Any]], dict[str, Any]], gpus_per_trial: float,
    storage: Path, name: str, report: Callable[[str], None], finished: Callable[[str], None],
    scheduler: Any = None, callbacks: Iterable[Any] = (),
    stopped: Callable[[dict[str, Any], dict[str, Any]], str] | None = None,
    search_space: dict[str, Any] | None = None, num_samples: int = 1, max_failures: int = 0,
    cpus_per_trial: int = 1,
) -> dict[str, str]:
    """Run ``trainable`` on each spec (called with ``{"spec": spec}``) as one Tune grid on the running Ray,
    in their order as workers free up, ``cpus_per_trial`` CPUs each; returns each trial's status by
    ``experiment/key``. ``finished(experiment)`` is called as each trial ends. ``scheduler``: a Tune
    scheduler (:func:`asha`) that may end trials at an evaluation, each then kept by ``stopped(spec,
    last_result)``, which returns its status; ``callbacks``: Tune callbacks beside the runner's own;
    ``search_space``: Tune domains by configuration field (``{"lr": tune.loguniform(1e-4, 1e-2)}``), drawn
    ``num_samples`` times for each spec (:func:`trial_spec`). Tune keeps the grid in ``storage/name``:
    each trial's latest Tune checkpoint (:func:`report_evaluation`) and what Tune's loggers write
    (``progress.csv``, ``result.json`` and TensorBoard events per trial, and any logger among
    ``callbacks``). A trial whose worker is lost (killed, its node gone) is restarted by Tune from its
    latest checkpoint up to ``max_failures`` times (``FailureConfig``). When Ray's memory monitor kills a
    worker, Tune ends the whole grid (its actor manager raises on Ray's ``OutOfMemoryError``): the trials
    that ended keep their status, the others count unfinished and a rerun resumes them from their last
    checkpoint."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # Tune's own tables off: Progress reports each trial
    # a trial that fails or parks before its first evaluation has no score for a scheduler to rank
    os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
    # Tune snapshots its experiment state at each evaluation's checkpoint (num_to_keep = 1) and warns when
    # that is more often than every 5 s; a smoke grid evaluates every few steps, a paper grid every minutes
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    from ray import tune
    from ray.exceptions import OutOfMemoryError

    class Progress(tune.Callback):
        def __init__(self) -> None:
            self.count = 0
            self.statuses: dict[str, str] = {}  # what tune_statuses reads, for the trials that ended

        def _ended(self, trial, status: str, kept: str | None = None) -> None:  # noqa: ANN001 (a Tune trial)
            self.count += 1
            spec, result = trial_spec(trial.config), trial.last_result or {}
            self.statuses[spec_id(spec)] = kept or result.get("trial_status") or f"error: {status}"
            report(f"[{self.count}/{len(specs) * num_samples}] {spec_id(spec)}: {status}")
            finished(spec["trial"]["experiment"])

        def on_trial_complete(self, iteration, trials, trial, **info):  # noqa: ANN001 (Tune's signature)
            result = trial.last_result or {}
            if "trial_status" not in result and SCORE in result and stopped is not None:
                # the scheduler ended it at an evaluation: its thread is gone, its run directory stays
                status = stopped(trial_spec(trial.config), result)
                self._ended(trial, f"{status} by the scheduler at step {result.get('step')}", status)
                return
            self._ended(trial, result.get("trial_outcome") or result.get("trial_status") or "error")

        def on_trial_error(self, iteration, trials, trial, **info):  # noqa: ANN001
            self._ended(trial, "worker error")

    resources = {"cpu": cpus_per_trial, "gpu": gpus_per_trial} if gpus_per_trial else {"cpu": cpus_per_trial}
    progress = Progress()
    tuner = tune.Tuner(
        tune.with_resources(trainable, resources),
        param_space={"spec": tune.grid_search(specs), **({"search": search_space} if search_space else {})},
        tune_config=tune.TuneConfig(reuse_actors=True, scheduler=scheduler, num_samples=num_samples),
        run_config=tune.RunConfig(
            storage_path=str(storage),
            name=name,
            verbose=0,
            callbacks=[progress, *callbacks],
            failure_config=tune.FailureConfig(max_failures=max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        ),
    )
    try:
        return {**progress.statuses, **tune_statuses(tuner.fit())}
    except RuntimeError as error:
        if not isinstance(error.__cause__, OutOfMemoryError):
            raise
        report(f"the sweep stopped: Ray's memory monitor killed a worker ({str(error.__cause__)[:160]}...); "
               f"{len(specs) * num_samples - len(progress.statuses)} trial(s) unfinished, rerun to resume "
               "them")
        return progress.statuses


def tune_statuses(results: Iterable[Any]) -> dict[str, str]:
    """Each trial's status from Tune's results. A trial that had not started when the sweep was stopped
    (Ctrl+C, a session's end) comes back without a configuration, one stopped mid-run with neither a
    result nor an error: both are left out, and the sweep counts them unfinished (a rerun resumes them)."""
    statuses = {}
    for result in results:
        status = (result.metrics or {}).get("trial_status")
        if result.config is None or (status is None and result.error is None):
            continue
        statuses[spec_id(trial_spec(result.config))] = status or f"error: {result.error}"
    return statuses
