"""The trainer: a model of the registry on a task of the data layer, with recorders and checkpoints.

A run directory holds ``config.json``, ``metrics.jsonl`` (one JSON object a line, written as it
happens), ``checkpoints/step-NNNNNN.safetensors`` and ``last.safetensors``. Every
``record_every`` steps a ``train`` line records ``loss``, the batch's metrics,
``spectral_margin`` (max_i |sigma_i - 1| over every transition matrix), ``singular_values`` (all
of them, per matrix), ``grad_h0_norm`` (the Frobenius norm of dL/dh^(0) over the batch, for the
batch-mean loss; recurrent models only), ``grad_norm`` (the norm of the training objective's gradient
over all parameters, before clipping), ``grad_norm_peak`` (its largest value over the steps since the
previous train line, so a burst between records shows) and ``time`` (training seconds so far). Every
``eval_every`` steps a ``valid`` line; a ``test`` line at the end.

With ``max_steps`` a run trains until its validation metric plateaus: past ``steps`` (or ``epochs``) it
goes on, and stops at the first validation step where the last improvement (by more than
``plateau_min_delta``) came no later than 80% of the steps so far (:mod:`spectral_analysis.train.plateau`),
or at ``max_steps``. A run that plateaus at its
minimum is the same run with or without ``max_steps``; a finished run resumed with a larger
``max_steps`` goes on from its last checkpoint (its ``test`` line is written again at the new end).

``freeze`` keeps the parameters whose names match its patterns (``fnmatch``, e.g. ``transitions.*``) at
their initial values: they leave the optimizer (KRU's copy task learns only the input and output
weights around a fixed unitary W, as an echo state network does).

Resuming reloads ``last.safetensors`` (model, optimizer state, carried hidden state, step) and
drops log lines past it. A checkpoint keeps its training seconds split by machine (``seconds_by_machine``),
so a run parked on a GPU and finished on a CPU says which seconds each trained. Batches depend only
on (seed, step) and the learning rate only on the epoch and the kept validation lines, so a resumed
run repeats the uninterrupted one exactly.

``lr_cut`` (KRU Section 4.4) multiplies the learning rate in after each epoch whose end brings no
validation improvement on every earlier epoch end; with it a validation line is also written at each
epoch's end.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from tqdm import tqdm

from spectral_analysis.data.objectives import (
    PRIMARY_METRIC,
    check_sequence_loss,
    scores_last_step,
    task_loss_and_metrics,
    training_objective,
)
from spectral_analysis.machine import machine_name
from spectral_analysis.nn import RecurrentModel, build_model
from spectral_analysis.threads import denormals_flushed
from spectral_analysis.train.batches import ShuffledBatches, StreamBatches
from spectral_analysis.train.checkpoint import load_checkpoint, save_checkpoint
from spectral_analysis.train.config import OPTIMIZERS, TrainConfig
from spectral_analysis.train.evaluation import RunLog, evaluate, model_outputs
from spectral_analysis.train.gradients import clip_gradients
from spectral_analysis.train.plateau import epochs_without_improvement, is_plateau, last_improvement_step
from spectral_analysis.train.recorders import spectral_margin, weight_singular_values
from spectral_analysis.train.run_setup import freeze_parameters, load_run_task, resolve_device
from spectral_analysis.train.run_state import (
    carry_tensors,
    checkpoint_conflicts,
    lock_run_directory,
    optimizer_tensors,
    restore_carry,
    restore_optimizer,
    resume_conflicts,
)
from spectral_analysis.train.tensorboard import TensorBoardMirror

logger = logging.getLogger(__name__)

UNRECORDED_MACHINE = "not recorded"  # a resumed checkpoint's seconds from before the per-machine split


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite: the run stops instead of training on garbage."""


def detach_state(state):
    """A recurrent state (a tensor, or the LSTM's pair) cut from the graph, to carry into the next window."""
    return tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()


def _with_grad(state: Tensor) -> Tensor:
    """A copy of a start state whose ``.grad`` the backward pass fills (``grad_h0_norm``); a learned start
    state (the uRNN's) stays in the graph, so its parameter trains on recording steps too."""
    state = state.clone()
    if state.requires_grad:
        state.retain_grad()
    else:
        state.requires_grad_()
    return state


class Trainer:
    def __init__(self, config: TrainConfig, resume: bool = False) -> None:
        config.validate()
        self.config, self.out = config, Path(config.out)
        self.device = resolve_device(config.device)
        mirror = TensorBoardMirror(self.out / "tensorboard") if config.tensorboard else None
        self.log = RunLog(self.out / "metrics.jsonl", mirror)
        last = self.out / "last.safetensors"
        if resume and (last.is_symlink() or (last.exists() and not last.is_file())):
            raise ValueError(f"cannot resume: {last} is not a regular file")
        self._restart = False
        if resume and not last.is_file():
            if not self.out.is_dir():
                raise ValueError(f"nothing to resume: {last} does not exist")
            # killed before its first checkpoint: nothing to keep, the run starts over
            logger.warning("%s has no checkpoint yet: the run starts from step 0", self.out)
            resume, self._restart = False, True
        fresh_directory, lock_existed = not self.out.exists(), (self.out / ".lock").exists()
        self._lock = lock_run_directory(self.out)
        try:
            self._set_up(config, resume, last)
        except BaseException:  # leave the run directory as it was
            self._lock.close()
            if fresh_directory:
                shutil.rmtree(self.out, ignore_errors=True)
            elif not lock_existed:
                (self.out / ".lock").unlink(missing_ok=True)
            raise

    def _set_up(self, config: TrainConfig, resume: bool, last: Path) -> None:
        if self._restart:
            for stale in ("config.json", "metrics.jsonl"):
                (self.out / stale).unlink(missing_ok=True)
        if not resume and (self.out / "config.json").exists():
            raise ValueError(f"{self.out} already holds a run; use --resume (resume=True) or another --out")
        self.task = load_run_task(config)
        check_sequence_loss(self.task, config.sequence_loss)
        torch.manual_seed(config.seed)
        self.model = build_model(config.model, self.task.input_size, config.hidden, self.task.output_size,
                                 **config.model_options).to(self.device)
        freeze_parameters(self.model, config.freeze)
        self.recurrent = isinstance(self.model, RecurrentModel)
        if self.task.kind == "classification" and self.recurrent:
            raise ValueError(f"task {config.task!r} has flat inputs: use a feed-forward model (mlp, ...)")
        if self.task.kind != "classification" and not self.recurrent:
            raise ValueError(f"task {config.task!r} is sequential: use a recurrent model, "
                             f"not {config.model!r}")
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        try:
            self.optimizer = OPTIMIZERS[config.optimizer](trainable, lr=config.lr, **config.optimizer_options)
        except (TypeError, ValueError) as error:
            raise ValueError(f"optimizer {config.optimizer!r} rejects options {config.optimizer_options}: "
                             f"{error}") from None
        self.batches = (StreamBatches(self.task.train, self.task.length) if self.task.stream
                        else ShuffledBatches(self.task.train, config.batch_size, config.seed))
        self.total_steps = config.steps or config.epochs * self.batches.steps_per_epoch
        if config.max_steps is not None and config.max_steps < self.total_steps:
            raise ValueError(f"max_steps ({config.max_steps}) must be at least the {config.epochs} epochs' "
                             f"{self.total_steps} steps")
        self.step, self.carry = 0, None
        self.seconds_by_machine: dict[str, float] = {}  # training seconds, split by the machines that trained
        self.grad_norm_peak = 0.0  # over the steps since the last train line (kept in checkpoints)
        self.primary = PRIMARY_METRIC[self.task.kind]
        self.valid_lines: list[dict[str, Any]] = []  # the validation lines so far (the plateau criterion)
        self.latest: dict[str, dict[str, Any]] = {}
        if resume:
            self._resume(last)

    def _resume(self, last: Path) -> None:
        conflicts = resume_conflicts(self.config)
        if conflicts:
            raise ValueError(f"cannot resume: {conflicts[0]}")
        checkpoint = load_checkpoint(last, self.device)
        recorded = checkpoint.metadata.get("train")
        changed = checkpoint_conflicts(self.config, recorded) if isinstance(recorded, dict) else []
        if changed:
            raise ValueError(f"cannot resume: {changed[0]} (config.json disagrees with {last})")
        self.model.load_state_dict(checkpoint.model.state_dict())
        restore_optimizer(self.optimizer, checkpoint.tensors)
        self.carry = restore_carry(checkpoint.tensors, self.device)
        if checkpoint.metadata.get("step") is None or checkpoint.metadata.get("elapsed") is None:
            raise ValueError(f"cannot resume: {last} records no step or elapsed time (not written by the "
                             "trainer)")
        self.step, elapsed = checkpoint.metadata["step"], checkpoint.metadata["elapsed"]
        self.seconds_by_machine = dict(checkpoint.metadata.get("seconds_by_machine") or (
            {UNRECORDED_MACHINE: elapsed} if elapsed else {}))
        self.latest = checkpoint.metadata.get("metrics", {})
        self.grad_norm_peak = float(checkpoint.metadata.get("grad_norm_peak", 0.0))
        self.log.truncate_after(self.step)
        self.valid_lines = [row for row in self.log.read() if row["phase"] == "valid"]
        if not self.finished and not self.config.test_with_valid:
            self.log.drop_phase("test")  # a finished run given a larger max_steps: its test line moves to the
            # new end (with test_with_valid it stays, as the test curve's point at that step)

    def task_metadata(self) -> dict[str, Any]:
        task = self.task
        size = task.train.targets.numel() if task.stream else len(task.train)
        return {"name": task.name, "options": task.options, "kind": task.kind, "length": task.length,
                "input_size": task.input_size, "output_size": task.output_size,
                "data_bound": task.data_bound(), "train_size": size, "baselines": task.baselines}

    def _save(self, numbered: bool = True) -> None:
        """Write ``last.safetensors`` (what a resume reads) and, when ``numbered``, the step's own file
        in ``checkpoints/`` (the trajectory the analyzers read)."""
        meta = {"task": self.task_metadata(), "step": self.step, "elapsed": self.elapsed,
                "seconds_by_machine": self.seconds_by_machine,
                "metrics": self.latest, "train": asdict(self.config), "grad_norm_peak": self.grad_norm_peak}
        extra = {**optimizer_tensors(self.optimizer), **carry_tensors(self.carry)}
        if numbered:
            save_checkpoint(self.out / "checkpoints" / f"step-{self.step:06d}.safetensors", self.model, meta,
                            extra)
        save_checkpoint(self.out / "last.safetensors", self.model, meta, extra)

    def _initial_state(self, fresh: bool, batch: int, want_grad: bool):
        state = None if (fresh or not self.task.stream) else self.carry
        if not want_grad:
            return state
        if state is None:
            state = self.model.start_state(batch)
        return tuple(_with_grad(s) for s in state) if isinstance(state, tuple) else _with_grad(state)

    def _diverged(self, what: str) -> None:
        """Log the failing step (phase ``diverged``) and stop; the last checkpoint is the last good
        one."""
        step = self.step + 1
        self.log.write({"step": step, "phase": "diverged", "reason": what})
        raise TrainingDivergedError(f"{what} at step {step}: training diverged (try a smaller learning "
                                    f"rate or --clip); the last good checkpoint is "
                                    f"{self.out / 'last.safetensors'}")

    def _learning_rate(self, epoch: int) -> float:
        """``lr x lr_decay^epoch``, times ``lr_cut`` for each epoch so far that brought no validation
        improvement (read off the kept validation lines, so a resumed run repeats the schedule)."""
        lr = self.config.lr * self.config.lr_decay ** epoch
        if self.config.lr_cut == 1.0:
            return lr
        return lr * self.config.lr_cut ** epochs_without_improvement(
            self.valid_lines, self.primary, self.batches.steps_per_epoch, self.step)

    def _train_step(self, record: bool) -> dict[str, Any]:
        x, y, fresh = self.batches.get(self.step)
        x, y = x.to(self.device), y.to(self.device)
        epoch = self.batches.epoch_of(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = self._learning_rate(epoch)
        h0 = self._initial_state(fresh, x.shape[0], record and self.recurrent) if self.recurrent else None
        outputs, run = model_outputs(self.model, x, h0, scores_last_step(self.task.kind))
        loss, metrics = task_loss_and_metrics(self.task, outputs, y)
        objective = training_objective(self.task, loss, outputs, self.config.sequence_loss)
        if self.config.penalty:
            objective = objective + self.config.penalty * self.model.spectral_penalty()
        if not torch.isfinite(objective):
            self._diverged(f"the training loss is {objective.item()}")
        self.optimizer.zero_grad(set_to_none=True)
        objective.backward()
        gradient = clip_gradients(self.model.parameters(), self.config.clip, self.config.clip_value)
        grad_norm = gradient.value
        clipped = self.config.clip is not None or self.config.clip_value is not None
        if not math.isfinite(grad_norm) or (gradient.overflows and not clipped):
            # checked before the step: the weights stay the last good ones
            beyond = " (float32 cannot square it: the optimizer's running averages would turn inf)"
            self._diverged(f"the gradient norm is {grad_norm:.4g}{beyond if gradient.overflows else ''}; the "
                           f"training loss is {loss.item():.4g}")
        self.grad_norm_peak = max(self.grad_norm_peak, grad_norm)
        self.optimizer.step()
        self.model.constrain_()
        if self.task.stream:
            self.carry = detach_state(run.state)
        record_line = {"step": self.step + 1, "phase": "train", "epoch": epoch, "loss": loss.item(),
                       **metrics}
        if record:
            svals = weight_singular_values(self.model)
            grad = h0[0].grad if isinstance(h0, tuple) else (h0.grad if h0 is not None else None)
            record_line.update({"spectral_margin": spectral_margin(svals),
                                "singular_values": [s.tolist() for s in svals],
                                "grad_h0_norm": float(grad.norm()) if grad is not None else None,
                                "grad_norm": grad_norm, "grad_norm_peak": self.grad_norm_peak})
            self.grad_norm_peak = 0.0
        return record_line

    def _evaluate(self, phase: str) -> dict[str, Any]:
        split = self.task.valid if phase == "valid" else self.task.test
        limit = self.config.eval_batches if phase == "valid" else self.config.test_batches
        metrics = evaluate(self.model, self.task, split, max(self.config.batch_size, 256), self.device, limit)
        line = {"step": self.step, "phase": phase, **metrics, "time": round(self.elapsed, 3)}
        self.log.write(line)
        self.latest[phase] = line
        if phase == "valid":
            self.valid_lines.append(line)
        return line

    @property
    def elapsed(self) -> float:
        """Training seconds so far, on every machine (the checkpoint's ``elapsed`` is this total)."""
        return sum(self.seconds_by_machine.values())

    @property
    def last_step(self) -> int:
        """The step the run ends at unless it plateaus first: ``max_steps``, else the minimum."""
        return self.config.max_steps or self.total_steps

    @property
    def finished(self) -> bool:
        """The minimum is trained and, with ``max_steps``, the validation metric has plateaued (checked
        at a validation step) or ``max_steps`` is reached."""
        if self.step < self.total_steps:
            return False
        if self.config.max_steps is None or self.step >= self.config.max_steps:
            return True
        if not self.valid_lines or self.valid_lines[-1]["step"] != self.step:
            return False
        improved = last_improvement_step(self.valid_lines, self.primary, self.config.plateau_min_delta)
        return improved is not None and is_plateau(improved, self.step)

    def run(self, callback: Callable[[int], None] | None = None,
            stop: Callable[[int], bool] | None = None,
            on_evaluation: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Train until :attr:`finished`; ``callback(step)`` runs after each step (a test can stop the run
        there as a kill would). When ``stop(step)`` returns true the run checkpoints and returns early
        (a time budget); :attr:`finished` tells which. ``on_evaluation(line)`` gets each validation line
        once the step is done and ``last.safetensors`` holds it (a Tune trial reports both). Returns the
        last train, valid and test lines."""
        try:
            with denormals_flushed() if self.device.type == "cpu" else nullcontext():  # threads.py
                return self._run(callback, stop, on_evaluation)
        finally:
            self._lock.close()  # the run directory is free again (also after an error)

    def _run(self, callback: Callable[[int], None] | None, stop: Callable[[int], bool] | None,
             on_evaluation: Callable[[dict[str, Any]], None] | None) -> dict[str, Any]:
        cfg = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        if not (self.out / "config.json").exists():
            config = {"train": asdict(cfg), "model": self.model.config, "task": self.task_metadata(),
                      "device": str(self.device), "total_steps": self.total_steps}
            (self.out / "config.json").write_text(json.dumps(config, indent=2))
        primary, machine = self.primary, machine_name(str(self.device))
        # tqdm's disable=None: no bar where stderr is not a terminal, even when the caller asked for one
        bar = tqdm(total=self.last_step, initial=self.step, disable=None if cfg.progress else True,
                   desc=f"{cfg.model} on {self.task.name}", dynamic_ncols=True)
        self.model.train()
        if self.finished and not any(line["phase"] == "test" and line["step"] == self.step
                                     for line in self.log.read()):
            self._evaluate("test")  # resumed where the run now ends (a larger plateau_min_delta)
            self._save()
        while not self.finished:
            started = time.perf_counter()
            may_end = self.step + 1 in (self.total_steps, self.last_step) or (
                self.step + 1 > self.total_steps and (self.step + 1) % cfg.eval_every == 0)
            record = (self.step + 1) % cfg.record_every == 0 or may_end  # a run's last step is recorded
            line = self._train_step(record)
            self.step += 1
            seconds = time.perf_counter() - started
            self.seconds_by_machine[machine] = self.seconds_by_machine.get(machine, 0.0) + seconds
            if record:
                line["time"] = round(self.elapsed, 3)
                self.log.write(line)
                self.latest["train"] = line
                bar.set_postfix({"loss": f"{line['loss']:.4g}", primary: f"{line[primary]:.4g}"})
            epoch_end = cfg.lr_cut < 1 and self.step % self.batches.steps_per_epoch == 0  # for lr_cut
            ends = (self.total_steps, self.last_step)
            valid = None
            if epoch_end or self.step % cfg.eval_every == 0 or self.step in ends:
                valid = self._evaluate("valid")
                if cfg.test_with_valid and not self.finished:
                    self._evaluate("test")  # a point of the test curve (the end's test line follows below)
            if self.finished:
                self._evaluate("test")
            if self.step % cfg.checkpoint_every == 0 or self.finished:
                self._save()
            elif valid is not None and on_evaluation:
                self._save(numbered=False)  # what the evaluation's reader checkpoints is this step
            if valid is not None and on_evaluation:
                on_evaluation(valid)
            bar.update(1)
            if callback:
                callback(self.step)
            if stop and not self.finished and stop(self.step):
                self._save()
                break
        bar.close()
        return dict(self.latest)


def train(config: TrainConfig, resume: bool = False,
          callback: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Build, train and checkpoint; see :class:`Trainer`."""
    return Trainer(config, resume).run(callback)
