"""What a kept trial's row says about its trial: the step its plateau criterion counts, whether it trained
to a plateau, its outcome in a few words, and whether it still stands for the catalog's trial of the same
key (the same configuration, a field it lacks read as its default) so that a sweep skips it."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from spectral_analysis.experiments.grid import Trial
from spectral_analysis.train import TrainConfig
from spectral_analysis.train.config import LENGTH_FIELDS, field_default
from spectral_analysis.train.plateau import is_plateau


def counted_step(row: dict[str, Any]) -> int | None:
    """The step of the last improvement the plateau criterion counts; rows kept before ``plateau_step``
    existed ran without a tolerance, so theirs is the best step."""
    return row.get("plateau_step", row.get("best_step"))


def plateaued(row: dict[str, Any]) -> bool | None:
    """Whether a done trial trained to a plateau (:func:`~spectral_analysis.train.plateau.is_plateau` of
    :func:`counted_step` and its last step); ``None`` for a trial that is not done or has no validation
    record."""
    steps, improved = row.get("steps"), counted_step(row)
    if row.get("status") != "done" or steps is None or improved is None:
        return None
    return is_plateau(improved, steps)


def plateau_count(rows: list[dict[str, Any]]) -> str:
    """``k/n``: how many of the done trials among ``rows`` trained to a plateau."""
    done = [row for row in rows if row.get("status") == "done"]
    return f"{sum(bool(plateaued(row)) for row in done)}/{len(done)}"


def outcome_text(row: dict[str, Any]) -> str:
    """A kept trial in a few words, for the sweep's progress lines: ``done: 20000 steps (no plateau
    by its cap), 3620 s, test mse 3.34e-05``, ``failed: TrainingDivergedError: ...`` or, for a trial
    stopped by the time budget, ``unfinished at step 1500; parked ...``."""
    if row.get("status") == "unfinished":
        return f"unfinished at step {row.get('step')}" + (f"; {row['parked']}" if row.get("parked") else "")
    if row.get("status") != "done":
        return f"{row.get('status')}: {row.get('error') or 'no error recorded'}"
    cap, steps = (row.get("config") or {}).get("max_steps"), row.get("steps")
    stopped = {True: "plateaued", False: "no plateau by its cap" if cap and steps == cap else "no plateau",
               None: "no validation record"}[plateaued(row)]
    metric = row.get("metric")
    test = (row.get("test_metrics") or {}).get(metric)
    score = f", test {metric} {test:.3g}" if isinstance(test, int | float) else ""
    return f"done: {steps} steps ({stopped}), {row.get('seconds', 0.0):.0f} s{score}"


def differing_fields(kept: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """The catalog configuration fields on which a kept row's ``kept`` and a trial's ``wanted`` differ; a
    TrainConfig field that one of them leaves out has its default (a row kept before the field existed
    trained with it), so ``{}`` and ``{"sequence_loss": "mean"}`` do not differ."""
    defaulted = {f.name for f in fields(TrainConfig)
                 if f.default is not MISSING or f.default_factory is not MISSING}

    def value(config: dict[str, Any], key: str) -> Any:
        if key in config:
            return config[key]
        return field_default(key) if key in defaulted else None

    return sorted(k for k in kept.keys() | wanted.keys() if value(kept, k) != value(wanted, k))


def kept_row_stands(kept: dict[str, Any], trial: Trial, retry_failed: bool = False) -> bool:
    """Whether a kept row stands for ``trial``, so that a sweep skips it: with the same configuration, a
    done row or (unless retried) a failed one or one a scheduler stopped. With the same configuration but
    for ``max_steps``, which only lengthens a run past its minimum: a done row that plateaued within the
    trial's ``max_steps`` (the trial stops at the same step) or a failed row that had no or a smaller
    ``max_steps`` (the trial fails at the same step); a row that stopped at a smaller cap without
    plateauing trains on. With the same configuration but for its length (``steps``, ``epochs``,
    ``max_steps``), where the trial asks for a fixed number of steps: a done row that ran exactly that
    many (a stopping rule decides where a run ends, not what it trains, so the trial would train the same
    network); a shorter one trains on."""
    config = kept.get("config") or {}
    differing = differing_fields(config, trial.config)
    if not differing:
        return kept["status"] == "done" or (kept["status"] in ("failed", "stopped") and not retry_failed)
    cap, fixed_steps = trial.config.get("max_steps"), trial.config.get("steps")
    if fixed_steps is not None and cap is None and set(differing) <= set(LENGTH_FIELDS):
        return kept["status"] == "done" and kept["steps"] == fixed_steps
    if cap is None or differing != ["max_steps"]:
        return False
    if kept["status"] == "failed":
        return not retry_failed and (config.get("max_steps") or 0) <= cap
    return kept["status"] == "done" and bool(plateaued(kept)) and kept["steps"] <= cap
