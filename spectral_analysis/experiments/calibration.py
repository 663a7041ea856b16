"""Calibration before compute (``spectral-analysis calibrate``): each baseline of a grid trained for a
short run beside a plain-PyTorch reference of the same recipe
(:mod:`~spectral_analysis.experiments.reference`), on the same batches in the same order, with the same
optimizer, learning rate, clipping and loss; a baseline whose training loss trails the reference's by more
than a stated margin of what the reference learned (:func:`allowed_excess`), and by more than the
batches' noise (:func:`comparison_noise`), is our defect, and the grid is refused until it is mended.

What the two sides share is the recipe (optimizer, rate, clipping, batches, the task's loss); what they do
not is the model code and its initialization: the reference is written as a practitioner writes it, with
PyTorch's defaults, so a toolkit initialization that a careful practitioner would not use shows as a gap.
The comparison is the mean training loss over the last quarter of the recorded steps (lower is better
for every task); both sides' validation metric is reported beside it. A calibration in which neither side
learned from its input (neither loss below the task's constant-predictor loss: the best loss without
reading the input, e.g. the copy task's memoryless strategy or Penn Treebank's unigram entropy) shows
nothing and is ``inconclusive``, never a pass: two curves that fell only to that floor compare how fast
each fits the targets' marginals, not the recipe's ability to learn the task. ``lr_cut`` (which reads the
validation split) is off on both sides. A task whose loss falls in a sudden take-off (pixel MNIST) varies
from seed to seed by more than the margin (an IRNN led its reference by 8% on one seed and trailed it by
26% on another, 500 steps each): ``seeds`` calibrates the first seeds of the variant's first grid point
and compares the two sides' means over them, each seed kept beside them. Each calibration is kept in
``results/<experiment>/calibration/<scale>/<variant>.json`` with both curves and the recipe it tried; while
it trails with the recipe the grid still has, ``run`` holds that baseline's trials back
(:func:`refused_baselines`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from spectral_analysis.atomic import atomic_write_text
from spectral_analysis.data import Split, TaskData
from spectral_analysis.data.objectives import (
    constant_predictor_loss,
    scored_count,
    task_loss_and_metrics,
    training_objective,
    weighted_mean,
)
from spectral_analysis.experiments.fitness import BASELINE_TOLERANCE
from spectral_analysis.experiments.grid import Experiment, Trial
from spectral_analysis.experiments.reference import (
    FEED_FORWARD_MODELS,
    REFERENCE_MODELS,
    ReferenceFeedForward,
    ReferenceRecurrent,
)
from spectral_analysis.threads import denormals_flushed
from spectral_analysis.train import Trainer, TrainingDivergedError
from spectral_analysis.train.config import LENGTH_FIELDS, OPTIMIZERS
from spectral_analysis.train.evaluation import evaluate
from spectral_analysis.train.trainer import detach_state
from spectral_analysis.vocabulary import CALIBRATION_MARGIN, MODEL_OPTIONS

logger = logging.getLogger(__name__)

CALIBRATION_DIR = "calibration"


def learned_from_input(loss: float, constant_loss: float) -> bool:
    """Whether a training loss is below the task's constant-predictor loss
    (:func:`~spectral_analysis.data.objectives.constant_predictor_loss`) by more than the tolerance that
    marks a kept trial at chance (:data:`~spectral_analysis.experiments.fitness.BASELINE_TOLERANCE`).

    Example: ``learned_from_input(6.44, 6.53)`` is False: a language model at Penn Treebank's unigram
    entropy has learned word frequencies, not context."""
    return loss < constant_loss * (1 - BASELINE_TOLERANCE)


def allowed_excess(reference_loss: float, constant_loss: float, margin: float) -> float:
    """How far the toolkit's training loss may sit above the reference's and not trail: ``margin`` of what
    the reference learned (its fall below the constant predictor's loss), and never less than the
    at-chance tolerance of the reference's own loss
    (:data:`~spectral_analysis.experiments.fitness.BASELINE_TOLERANCE`), the resolution at which the toolkit
    reads two losses as one.

    A share of the loss itself would be no yardstick: Penn Treebank's losses sit near its 6.5-nat unigram,
    so 10% of the loss (0.65 nats) is more than all a one-layer model learns in a few epochs, while a
    pixel-MNIST loss near zero makes 10% of it a rounding difference.

    Example: ``allowed_excess(6.07, 6.53, 0.1)`` is 0.121 (2% of 6.07, above 10% of the 0.46-nat gain);
    ``allowed_excess(0.316, 2.301, 0.1)`` is 0.199."""
    return max(margin * (constant_loss - reference_loss), BASELINE_TOLERANCE * reference_loss)


def comparison_noise(curves: list[dict[str, list[tuple[int, float]]]]) -> float:
    """Twice the standard error of the toolkit's excess training loss: the two sides' losses at the same
    records (the same batches) over each curve's last quarter, paired and pooled over ``curves`` (one per
    seed), their differences' standard deviation over the square root of their count; 0 with fewer than
    two pairs. A calibration's training loss is the mean of a few batches' losses, and on a task whose
    batches vary (the adding problem's MSE over 50 sequences) an excess of that size is the batches'.

    Example: two curves of eight records whose last two pairs differ by 0.1 and 0.2 give 0.1:
    ``comparison_noise([{"toolkit": [*ones, (7, 1.1), (8, 1.2)], "reference": [*ones, (7, 1.0), (8, 1.0)]}])``
    with ``ones = [(step, 1.0) for step in range(1, 7)]``. A seed on which a side diverged pairs
    nothing (its excess is no batch noise)."""
    differences = []
    for pair in curves:
        if not (_finite(pair["toolkit"]) and _finite(pair["reference"])):
            continue
        paired = zip(_tail(pair["toolkit"]), _tail(pair["reference"]), strict=True)
        differences += [ours - theirs for (_, ours), (_, theirs) in paired]
    return 2 * statistics.stdev(differences) / len(differences) ** 0.5 if len(differences) > 1 else 0.0


def _verdict(toolkit_loss: float, reference_loss: float, constant_loss: float, margin: float,
             noise: float) -> dict[str, Any]:
    """Whether each side learned from its input, whether the toolkit trails (its training loss above the
    reference's by more than :func:`allowed_excess` and by more than ``noise``,
    :func:`comparison_noise`), the share of the reference's gain over the constant predictor the toolkit
    falls short of (``shortfall``; None where the reference gained nothing or a side diverged: an infinite
    loss), and the verdict word. A toolkit that diverged where the reference learned trails; two sides
    that both diverged learned nothing, and show only that the recipe diverges (``inconclusive``)."""
    learned = {"toolkit": learned_from_input(toolkit_loss, constant_loss),
               "reference": learned_from_input(reference_loss, constant_loss)}
    settled = learned["toolkit"] or learned["reference"]  # two curves at the constant predictor show nothing
    excess = toolkit_loss - reference_loss
    trails = settled and excess > max(allowed_excess(reference_loss, constant_loss, margin), noise)
    gain = constant_loss - reference_loss
    return {"learned": learned, "trails": trails, "noise": noise,
            "shortfall": excess / gain if gain > 0 and math.isfinite(excess) else None,
            "verdict": "inconclusive" if not settled else ("trails" if trails else "ok")}


def _tail(curve: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The last quarter of a curve's points (at least one): what a calibration compares."""
    return curve[-max(1, len(curve) // 4):]


def _finite(curve: list[tuple[int, float]]) -> bool:
    """Whether a side's curve ends on a finite loss: a side that diverged ends on ``inf`` at the step it
    stopped."""
    return not curve or math.isfinite(curve[-1][1])


def _tail_mean(curve: list[tuple[int, float]]) -> float:
    """The mean loss over :func:`_tail`."""
    tail = _tail(curve)
    return sum(loss for _, loss in tail) / len(tail)


@torch.no_grad()
def _stream_metrics(model: ReferenceRecurrent, task: TaskData, split: Split,
                    max_batches: int | None) -> dict[str, float]:
    """The reference's metrics over a token stream's windows, carrying its state as training did."""
    model.eval()
    state, parts = None, []
    for start in range(0, split.inputs.shape[1], task.length):
        y = split.targets[:, start:start + task.length]
        outputs, state = model.run(split.inputs[:, start:start + task.length], state)
        parts.append((task_loss_and_metrics(task, outputs, y)[1], scored_count(task, y)))
        if max_batches and len(parts) >= max_batches:
            break
    model.train()
    return weighted_mean(parts)


def _reference_run(trainer: Trainer, steps: int, record_every: int) -> tuple[list[tuple[int, float]], dict]:
    """Train the plain-PyTorch twin of ``trainer``'s model on ``trainer``'s batches, its recipe: its layers
    and dropout, and on a token stream (PTB) the state carried from window to window as the trainer does;
    a run whose loss turns non-finite stops there, its curve ending on ``inf``, with no validation
    metrics."""
    config, task = trainer.config, trainer.task
    options = {**MODEL_OPTIONS[config.model], **config.model_options}
    torch.manual_seed(config.seed)
    vocabulary = not task.train.inputs.is_floating_point() and task.input_size > config.hidden
    # a word vocabulary is embedded as the practitioner's language model embeds it: at the toolkit model's
    # own embedding width, else at the hidden size (word_language_model)
    embedding = options.get("embedding") or (config.hidden if vocabulary else None)
    model: ReferenceFeedForward | ReferenceRecurrent
    if config.model in FEED_FORWARD_MODELS:
        model = ReferenceFeedForward(config.model, task.input_size, config.hidden, task.output_size,
                                     options["num_layers"], options["activation"], options["leak"])
    else:
        model = ReferenceRecurrent(config.model, task.input_size, config.hidden, task.output_size,
                                   options.get("activation", "tanh"), options.get("leak", 0.2),
                                   options["num_layers"], options.get("dropout", 0.0), embedding,
                                   reflectors=options.get("m"),
                                   unit_reflectors=options.get("unit_reflectors", False),
                                   factor_sizes=options.get("factor_sizes"),
                                   complex_factors=options.get("complex", False),
                                   rotations=options.get("rotations"))
    optimizer = OPTIMIZERS[config.optimizer](model.parameters(), lr=config.lr, **config.optimizer_options)
    curve, state = [], None
    for step in range(steps):
        x, y, fresh = trainer.batches.get(step)
        for group in optimizer.param_groups:
            group["lr"] = config.lr * config.lr_decay ** trainer.batches.epoch_of(step)
        outputs, final = model.run(x, None if fresh or not task.stream else state)
        state = detach_state(final) if task.stream else None
        loss, _ = task_loss_and_metrics(task, outputs, y)
        if not torch.isfinite(loss):
            curve.append((step + 1, float("inf")))
            break
        optimizer.zero_grad(set_to_none=True)
        objective = training_objective(task, loss, outputs, config.sequence_loss)
        if config.penalty:
            objective = objective + config.penalty * model.spectral_penalty()
        objective.backward()
        if config.clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip)
        if config.clip_value is not None:
            torch.nn.utils.clip_grad_value_(model.parameters(), config.clip_value)
        optimizer.step()
        model.project_()
        if (step + 1) % record_every == 0 or step + 1 == steps:
            curve.append((step + 1, loss.item()))
    if not _finite(curve):
        return curve, {}
    valid = (_stream_metrics(model, task, task.valid, config.eval_batches) if task.stream else
             evaluate(model, task, task.valid, config.batch_size, torch.device("cpu"), config.eval_batches))
    return curve, valid


def _has_reference(config: Mapping[str, Any]) -> bool:
    """Whether a trial's recipe has a plain-PyTorch twin: its model has one (DizzyRNN's without its SVD
    form), and it freezes no parameters (a pattern over the toolkit's parameter names, which the twin's do
    not share)."""
    svd = config["model"] == "dizzy" and config.get("model_options", {}).get("svd", False)
    return config["model"] in REFERENCE_MODELS and not svd and not config.get("freeze")


def calibrate_trial(trial: Trial, steps: int, margin: float = CALIBRATION_MARGIN) -> dict[str, Any]:
    """One baseline of a grid ``steps`` steps beside its reference (module docstring): both curves, both
    validation metrics, and whether the toolkit trails (``trails``)."""
    model = trial.config["model"]
    if not _has_reference(trial.config):
        raise ValueError(f"{trial.key}: no plain-PyTorch reference of {model!r} with parameters frozen "
                         f"({trial.config['freeze']})" if trial.config.get("freeze") else
                         f"{trial.key}: no plain-PyTorch reference of {model!r} with these options (there is "
                         f"one of {REFERENCE_MODELS}, DizzyRNN's without svd)")
    with tempfile.TemporaryDirectory(prefix="calibrate-") as out:
        config = trial.train_config(Path(out) / trial.key)
        record_every = max(1, steps // 20)
        config = dataclasses.replace(config, steps=steps, epochs=None, max_steps=None, lr_cut=1.0,
                                     eval_every=steps, checkpoint_every=steps, record_every=record_every,
                                     test_batches=1, tensorboard=False, progress=False)
        trainer = Trainer(config)
        started = time.perf_counter()
        logger.info("calibrating %s: the toolkit's %s, %d steps", trial.key, model, steps)
        with contextlib.suppress(TrainingDivergedError):  # the reference still runs: did the recipe diverge?
            trainer.run()
        lines = trainer.log.read()
        for line in lines:  # named from the log: the error's checkpoint lies in the folder deleted below
            if line["phase"] == "diverged":
                logger.warning("calibrating %s: the toolkit's side diverged (%s at step %d); the reference "
                               "still runs", trial.key, line["reason"], line["step"])
        toolkit = [(line["step"], line["loss"] if line["phase"] == "train" else math.inf) for line in lines
                   if line["phase"] in ("train", "diverged")]
        toolkit_valid = trainer.latest["valid"][trainer.primary] if _finite(toolkit) else None
        logger.info("calibrating %s: the toolkit's side took %.0f s; the plain-PyTorch reference's next",
                    trial.key, time.perf_counter() - started)
        started = time.perf_counter()
        with denormals_flushed():  # as the trainer's side ran (threads.py)
            reference, valid = _reference_run(trainer, steps, record_every)
        reference_valid = valid[trainer.primary] if _finite(reference) else None
        logger.info("calibrating %s: the reference's side took %.0f s", trial.key,
                    time.perf_counter() - started)
    toolkit_loss, reference_loss = _tail_mean(toolkit), _tail_mean(reference)
    constant = constant_predictor_loss(trainer.task, trainer.task.train)
    return {"variant": trial.variant, "trial": trial.key, "model": model, "steps": steps,
            "margin": margin, "toolkit_loss": toolkit_loss, "reference_loss": reference_loss,
            "constant_predictor_loss": constant,
            **_verdict(toolkit_loss, reference_loss, constant, margin,
                       comparison_noise([{"toolkit": toolkit, "reference": reference}])),
            "metric": trainer.primary, "toolkit_valid": toolkit_valid, "reference_valid": reference_valid,
            "curves": {"toolkit": toolkit, "reference": reference}}


def over_seeds(rows: list[dict[str, Any]], margin: float) -> dict[str, Any]:
    """One calibration from :func:`calibrate_trial`'s rows of one recipe over several seeds: each side's
    training loss and validation metric the mean over the seeds, the verdict read from those means as for
    one seed (the noise from every seed's paired records), and every seed's row (its ``trial`` names the
    seed; curves included) under ``seeds``; the curves shown are the first seed's. A side that diverged on
    a seed has no validation metric there, and none over the seeds."""
    if len(rows) == 1:
        return rows[0]
    first = rows[0]
    mean = {key: None if any(row[key] is None for row in rows) else sum(row[key] for row in rows) / len(rows)
            for key in ("toolkit_loss", "reference_loss", "toolkit_valid", "reference_valid")}
    noise = comparison_noise([row["curves"] for row in rows])
    return {**first, **mean, **_verdict(mean["toolkit_loss"], mean["reference_loss"],
                                        first["constant_predictor_loss"], margin, noise), "seeds": rows}


def point_name(at: dict[str, str]) -> str:
    """The file-name suffix of a calibration at the grid point ``at``: ``task=permuted-mnist+length=300``."""
    return "+".join(f"{key}={value}" for key, value in sorted(at.items()))


def calibrate(experiment: Experiment, scale: str, steps: int, margin: float = CALIBRATION_MARGIN,
              results: str | Path | None = None, variants: list[str] | None = None,
              seeds: int = 1, at: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Calibrate every baseline of ``experiment``'s grid at ``scale`` that has a reference (per variant its
    first grid point, at seeds ``0 .. seeds - 1``: :func:`over_seeds`), or only the ``variants`` named,
    keeping each in ``results`` as it finishes (an interrupted calibration keeps the baselines done) as
    ``VARIANT.json``. ``at`` (axis values, as ``run --only`` takes them) calibrates the first point among
    those instead, kept as ``VARIANT@POINT.json`` (:func:`point_name`) beside the first point's: a grid
    whose tasks differ (pixel and permuted MNIST) is calibrated task by task.

    Example: ``calibrate(find_experiment("fig3-mnist"), "paper", 1000, at={"task": "permuted-mnist"})``."""
    if at:
        axes = {k: v for k, v in experiment.selectors(scale).items() if k not in ("variant", "seed")}
        missing = {k: v for k, v in at.items() if k not in axes or not set(v.split(",")) & set(axes[k])}
        if missing:
            raise ValueError(f"{experiment.name} has no grid point at {missing} at {scale!r}; its axes: "
                             f"{axes}")
    first: dict[str, list[Trial]] = {}
    for trial in experiment.trials(scale, seeds=seeds, only=at):
        if _has_reference(trial.config):
            points = first.setdefault(trial.variant, [])
            if not points or trial.config == points[0].config:
                points.append(trial)
    if not first:
        raise ValueError(f"{experiment.name} has no baseline with a plain-PyTorch reference at {scale!r} "
                         f"(models with one: {REFERENCE_MODELS}, none with parameters frozen)")
    if variants is not None:
        unknown = sorted(set(variants) - set(first))
        if unknown:
            raise ValueError(f"{experiment.name} has no baseline {unknown} with a plain-PyTorch reference at "
                             f"{scale!r}; it has {sorted(first)}")
        first = {label: trial for label, trial in first.items() if label in variants}
    folder = None if results is None else Path(results) / experiment.name / CALIBRATION_DIR / scale
    rows = []
    for variant, trials in first.items():
        runs = [calibrate_trial(trial, steps, margin) for trial in sorted(trials, key=lambda t: t.seed)]
        rows.append({**over_seeds(runs, margin), "config": trials[0].config, "axes": trials[0].axes})
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            name = f"{variant}@{point_name(at)}" if at else variant
            atomic_write_text(folder / f"{name}.json", json.dumps(rows[-1], indent=1))
    return rows


def recipe_status(kept: Mapping[str, Any], experiment: Experiment, scale: str) -> str:
    """Whether the kept calibration ``kept`` tried the recipe the grid's trial at its point has now (the
    point is the record's ``axes``; a record kept before calibrations named their point was calibrated at
    the variant's first): ``"the grid's"``, ``"changed since"``, ``"not recorded"`` (kept before
    calibrations recorded their recipe), ``"point no longer in the grid"`` or ``"variant no longer in the
    grid"``."""
    if "config" not in kept:
        return "not recorded"
    trials = [t for t in experiment.trials(scale, seeds=1) if t.variant == kept["variant"]]
    if not trials:
        return "variant no longer in the grid"
    point = [t for t in trials if t.axes == kept["axes"]] if "axes" in kept else trials[:1]
    if not point:
        return "point no longer in the grid"
    same = _trained_alike(kept["config"]) == _trained_alike(point[0].config)
    return "the grid's" if same else "changed since"


# how long a trial trains on and what it keeps: a calibration trains its own --steps, so a change of these
# leaves the recipe it tried the grid's
BUDGET_FIELDS = (*LENGTH_FIELDS, "plateau_min_delta", "checkpoint_every", "eval_every",
                 "test_batches", "test_with_valid")


def _trained_alike(config: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in config.items() if key not in BUDGET_FIELDS}


def refused_baselines(experiment: Experiment, scale: str, results: str | Path) -> dict[str, str]:
    """The baselines of ``experiment``'s grid at ``scale`` whose kept calibration trails its reference
    with the recipe the grid still has, each with why: ``run`` holds their trials back, so no compute is
    spent on a recipe a practitioner's plain PyTorch trains better. A recipe changed since its calibration
    is not held: calibrate it again.

    Example: ``refused_baselines(find_experiment("fig3-mnist"), "paper", "results")``."""
    refused = {}
    for path in sorted((Path(results) / experiment.name / CALIBRATION_DIR / scale).glob("*.json")):
        kept = json.loads(path.read_text())
        if kept.get("verdict") == "trails" and recipe_status(kept, experiment, scale) == "the grid's":
            refused[kept["variant"]] = (
                f"{kept['variant']}'s calibration trails its plain-PyTorch reference (training loss "
                f"{kept['toolkit_loss']:.3f} against {kept['reference_loss']:.3f} over {kept['steps']} "
                f"steps, {path}): mend the recipe, or calibrate it again over more steps")
    return refused
