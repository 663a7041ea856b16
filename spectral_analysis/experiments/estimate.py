"""Cost of an experiment at ``paper`` scale on this machine, measured, not guessed.

Each distinct configuration of the grid (seed 0) is built at its paper size and trained for a few steps
after one warm-up step; one validation batch is timed the same way. The estimate is
``steps x seconds per step + evaluations x batches x seconds per batch``, times the seeds; for a grid
trained until plateau, also at its ``max_steps`` cap (what the sweep costs at most). Data loading
and checkpoint writes are left out. Written to ``results/<experiment>/paper/estimate_<device>.json``
(``cpu`` or ``cuda``).
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from spectral_analysis.allocator import keep_freed_memory
from spectral_analysis.atomic import read_text_file
from spectral_analysis.experiments.grid import Experiment, configuration_key
from spectral_analysis.experiments.row_status import differing_fields
from spectral_analysis.machine import machine_name
from spectral_analysis.train import Trainer, TrainingDivergedError
from spectral_analysis.train.evaluation import evaluate


def _eval_batch_seconds(trainer: Trainer) -> tuple[float, int, int]:
    """Seconds per validation batch, and the batches of one validation and of the test pass."""
    task, config = trainer.task, trainer.config
    batch = max(config.batch_size, 256)
    if task.stream:
        valid_batches = math.ceil(task.valid.inputs.shape[1] / task.length)
        test_batches = math.ceil(task.test.inputs.shape[1] / task.length)
    else:
        valid_batches, test_batches = math.ceil(len(task.valid) / batch), math.ceil(len(task.test) / batch)
    valid_batches = min(valid_batches, config.eval_batches or valid_batches)
    test_batches = min(test_batches, config.test_batches or test_batches)
    evaluate(trainer.model, task, task.valid, batch, trainer.device, 1)  # warm-up
    clock = time.perf_counter()
    evaluate(trainer.model, task, task.valid, batch, trainer.device, 1)
    return time.perf_counter() - clock, valid_batches, test_batches


def time_trial_config(trainer: Trainer, steps: int = 3) -> dict[str, Any]:
    """Measured seconds per training step and the estimated seconds of the whole run. A configuration
    whose loss diverges during the probe is reported as such: the sweep will record it as failed after
    the same few steps, so its cost is the probe's."""
    stamps: list[float] = [time.perf_counter()]
    try:
        trainer.run(callback=lambda _step: stamps.append(time.perf_counter()), stop=lambda step: step > steps)
    except TrainingDivergedError as error:
        return {"seconds_per_step": None, "total_steps": trainer.total_steps, "diverged": str(error),
                "estimated_seconds": stamps[-1] - stamps[0]}
    per_step = statistics.median(b - a for a, b in zip(stamps[1:], stamps[2:], strict=False))
    per_batch, valid_batches, test_batches = _eval_batch_seconds(trainer)

    def seconds(steps: int) -> float:
        evaluations = steps // trainer.config.eval_every
        per_evaluation = valid_batches + (test_batches if trainer.config.test_with_valid else 0)
        return steps * per_step + per_batch * (evaluations * per_evaluation + test_batches)

    timing = {
        "seconds_per_step": per_step,
        "seconds_per_eval_batch": per_batch,
        "total_steps": trainer.total_steps,
        "estimated_seconds": seconds(trainer.total_steps),
    }
    if trainer.config.max_steps is not None:
        cap = trainer.config.max_steps
        timing.update(max_steps=cap, estimated_seconds_at_cap=seconds(cap))
    return timing


def estimate_experiment(
    experiment: Experiment, results: str | Path, steps: int = 3, device: str = "cpu"
) -> dict[str, Any]:
    """Time every distinct paper-scale configuration of ``experiment`` on ``device``; write the estimate,
    each configuration's timing beside the catalog configuration it timed (:func:`not_estimated`)."""
    torch.set_num_threads(1)  # as the runner's trials run
    keep_freed_memory()
    seeds = experiment.seeds("paper")
    configs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for trial in experiment.trials("paper", seeds=1):
            trainer = Trainer(trial.train_config(Path(tmp) / trial.key, device), resume=False)
            timing = time_trial_config(trainer, steps)
            configs[configuration_key(trial.key)] = {**timing, "config": trial.config}
    total = seeds * sum(c["estimated_seconds"] for c in configs.values())
    estimate = {
        "experiment": experiment.name,
        "device": device,
        "machine": machine_name(device),
        "threads_per_trial": 1,
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "seeds": seeds,
        "trials": seeds * len(configs),
        "total_seconds": total,
        **({"total_seconds_at_cap": seeds * sum(c.get("estimated_seconds_at_cap", c["estimated_seconds"])
                                                for c in configs.values())}
           if any("max_steps" in c for c in configs.values()) else {}),
        "configurations": configs,
    }
    path = Path(results) / experiment.name / "paper" / f"estimate_{device.split(':')[0]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(estimate, indent=1))
    return estimate


def read_estimate(results: str | Path, experiment: str, device: str = "cpu") -> dict[str, Any] | None:
    """The kept estimate of ``experiment`` on ``device`` (None when there is none); a file that is not
    one written by :func:`estimate_experiment` is refused by name."""
    path = Path(results) / experiment / "paper" / f"estimate_{device}.json"
    if not path.is_file():
        return None
    try:
        estimate = json.loads(read_text_file(path, "kept estimate", limit=2 ** 24))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not JSON ({error}); write it again (experiments --estimate)") from None
    if not isinstance(estimate, dict) or not isinstance(estimate.get("configurations"), dict):
        raise ValueError(f"{path} has no configurations: not an estimate written by experiments --estimate; "
                         "write it again")
    return estimate


def not_estimated(estimate: dict[str, Any], configurations: dict[str, dict[str, Any]]) -> list[str]:
    """The keys of ``configurations`` (key -> the catalog's configuration now) that ``estimate`` has not
    timed as they stand: left out, or timed under another configuration (a variant changed since). A
    timing kept before estimates recorded their configurations is taken as standing: nothing says what
    it timed."""
    timed = estimate["configurations"]

    def stands(key: str, config: dict[str, Any]) -> bool:
        return key in timed and not differing_fields(timed[key].get("config", config), config)

    return sorted(key for key, config in configurations.items() if not stands(key, config))
