"""Losses and metrics by task kind (:data:`spectral_analysis.data.base.TASK_KINDS`): part of a task."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor
from torch.nn import functional as F

if TYPE_CHECKING:
    from spectral_analysis.data.base import Split, TaskData

PRIMARY_METRIC = {"regression-last": "mse", "classification-last": "accuracy", "classification": "accuracy",
                  "sequence": "cross_entropy", "multilabel-sequence": "nll"}
PADDED = -1.0  # a multilabel-sequence target frame that is padding, left out of the loss


LAST_STEP_KINDS = ("regression-last", "classification-last")  # scored on the last step's output only


def scores_last_step(kind: str) -> bool:
    """Whether a task of ``kind`` reads only its last step's output (so a model may read out only that)."""
    return kind in LAST_STEP_KINDS


def loss_and_metrics(kind: str, outputs: Tensor, targets: Tensor, recall_steps: int | None = None,
                     loss_steps: int | None = None) -> tuple[Tensor, dict[str, float]]:
    """The training loss and the batch's metrics (means over the batch); ``recall_steps`` adds
    ``accuracy_recall``, the accuracy on the last steps of a sequence (the copy task's symbols);
    ``loss_steps`` scores a sequence's cross entropy on its last steps only (DizzyRNN's copy loss).
    ``multilabel-sequence``: the negative log-likelihood of each unpadded target frame under independent
    Bernoulli outputs (logits), summed over its labels and averaged over frames."""
    if kind == "regression-last":
        loss = F.mse_loss(outputs[:, -1], targets)
        return loss, {"mse": loss.item()}
    if kind in ("classification-last", "classification"):
        logits = outputs[:, -1] if kind == "classification-last" else outputs
        loss = F.cross_entropy(logits, targets)
        accuracy = (logits.argmax(-1) == targets).float().mean().item()
        return loss, {"cross_entropy": loss.item(), "accuracy": accuracy}
    if kind == "sequence":
        scored = slice(-loss_steps, None) if loss_steps else slice(None)
        loss = F.cross_entropy(outputs[:, scored].flatten(0, 1), targets[:, scored].flatten())
        accuracy = (outputs.argmax(-1) == targets).float().mean().item()
        ce = loss.item()
        metrics = {"cross_entropy": ce, "accuracy": accuracy, "perplexity": math.exp(min(ce, 700.0))}
        if recall_steps:
            recalled = outputs[:, -recall_steps:].argmax(-1) == targets[:, -recall_steps:]
            metrics["accuracy_recall"] = recalled.float().mean().item()
        return loss, metrics
    if kind == "multilabel-sequence":
        frames = targets[..., 0] != PADDED
        nll = F.binary_cross_entropy_with_logits(outputs[frames], targets[frames], reduction="sum")
        loss = nll / frames.sum().clamp(min=1)
        return loss, {"nll": loss.item()}
    raise ValueError(f"unknown task kind {kind!r}")


def _entropy(counts: Tensor, dim: int = -1) -> Tensor:
    """The entropy in nats of the empirical distributions whose counts lie along ``dim``."""
    shares = counts.double() / counts.sum(dim, keepdim=True).clamp(min=1)
    return -(shares * shares.clamp(min=1e-300).log()).sum(dim)


def constant_predictor_loss(task: TaskData, split: Split) -> float:
    """The loss (:func:`loss_and_metrics`) on ``split`` of the best predictor that never reads its input,
    fitted to ``split``'s own targets: the targets' variance (regression), the class prior's entropy
    (classification), the unigram entropy of a token stream, each position's own symbol distribution
    over a sequence task's scored steps (the copy task's memoryless strategy), and each label's own
    Bernoulli rate summed over a piano roll's labels. A model whose loss is not below it has learned
    nothing from its input.

    Example: on the adding problem, whose target is the sum of two U(0, 1) numbers, it is close to the
    sum's variance 1/6."""
    targets = split.targets
    if task.kind == "regression-last":
        return float(targets.double().var(unbiased=False))
    if task.kind in ("classification-last", "classification") or task.stream:
        return float(_entropy(torch.bincount(targets.flatten(), minlength=task.output_size)))
    if task.kind == "sequence":
        scored = targets[:, -task.loss_steps:] if task.loss_steps else targets
        per_position = torch.zeros(scored.shape[1], task.output_size, dtype=torch.long)
        per_position.scatter_add_(1, scored.T, torch.ones_like(scored.T))  # (positions, symbols)
        return float(_entropy(per_position).mean())
    if task.kind == "multilabel-sequence":
        frames = targets[targets[..., 0] != PADDED].double()
        rate = frames.mean(0)
        return float(F.binary_cross_entropy(rate[None].expand_as(frames), frames, reduction="sum")
                     / max(len(frames), 1))
    raise ValueError(f"unknown task kind {task.kind!r}")


def scored_count(task: TaskData, targets: Tensor) -> int:
    """What a batch's metrics are a mean over, to weigh batches: its unpadded frames for a
    multilabel sequence, every target of a stream, else its sequences."""
    if task.kind == "multilabel-sequence":
        return int((targets[..., 0] != PADDED).sum())
    return targets.numel() if task.stream else int(targets.shape[0])


def task_loss_and_metrics(task: TaskData, outputs: Tensor,
                          targets: Tensor) -> tuple[Tensor, dict[str, float]]:
    """:func:`loss_and_metrics` as ``task`` scores itself (its kind, recall and loss steps)."""
    return loss_and_metrics(task.kind, outputs, targets, task.recall_steps, task.loss_steps)


def training_objective(task: TaskData, loss: Tensor, outputs: Tensor, sequence_loss: str) -> Tensor:
    """What the optimizer descends, from the batch's mean ``loss``: the loss itself (``mean``), or for a
    sequence task with ``sum-over-steps`` the cross entropy summed over its scored steps and averaged over
    the batch, the objective of Zaremba et al. (2014) and of TensorFlow's PTB model, on which a learning
    rate ``lr`` and a clip ``c`` act as ``lr * T`` and ``c / T`` on the mean over T steps. Example: on
    Penn Treebank's windows of 300 words, ``training_objective(task, loss, outputs, "sum-over-steps")`` is
    ``300 * loss``. The Trainer checks the pair once (:func:`check_sequence_loss`) before its first step."""
    return loss if sequence_loss == "mean" else loss * (task.loss_steps or outputs.shape[1])


def check_sequence_loss(task: TaskData, sequence_loss: str) -> None:
    """Refuse a ``sequence_loss`` that sums over steps a task without them scores (its name is checked
    with the rest of :class:`~spectral_analysis.train.TrainConfig`)."""
    if sequence_loss != "mean" and task.kind != "sequence":
        raise ValueError(f"sequence_loss {sequence_loss!r} sums a sequence task's loss over its steps; task "
                         f"{task.name!r} is {task.kind!r}")


def weighted_mean(parts: list[tuple[dict[str, float], int]]) -> dict[str, float]:
    """Average per-batch metrics weighted by batch size; perplexity from the averaged cross-entropy."""
    total = sum(w for _, w in parts)
    keys = parts[0][0].keys()
    mean = {k: sum(m[k] * w for m, w in parts) / total for k in keys if k != "perplexity"}
    if "perplexity" in keys:
        mean["perplexity"] = math.exp(min(mean["cross_entropy"], 700.0))
    return mean
