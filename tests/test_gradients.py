"""The gradient norm and clipping where float32 cannot square the gradient (train.gradients), against the
float64 norm, torch's clipping in the ordinary range, and in training."""

import json
import math

import pytest
import torch
from torch import nn

from spectral_analysis.train import TrainConfig, TrainingDivergedError, train
from spectral_analysis.train.gradients import clip_gradients


def _parameters(*grads: torch.Tensor) -> list[nn.Parameter]:
    parameters = []
    for grad in grads:
        p = nn.Parameter(torch.zeros_like(grad))
        p.grad = grad.clone()
        parameters.append(p)
    return parameters


def _norm64(parameters: list[nn.Parameter]) -> float:
    return math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in parameters))


def test_an_ordinary_gradient_is_normed_and_clipped_as_torch_does():
    torch.manual_seed(0)
    grads = (torch.randn(5, 3), torch.randn(7))
    ours, theirs = _parameters(*grads), _parameters(*grads)
    norm = clip_gradients(ours, 0.5)
    assert norm.value == pytest.approx(float(nn.utils.clip_grad_norm_(theirs, 0.5)), rel=1e-6)
    assert not norm.overflows and norm.value > 0.5
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a.grad, b.grad)
    assert _norm64(ours) == pytest.approx(0.5, rel=1e-5)
    assert clip_gradients(_parameters(torch.full((3,), 0.1)), None).value == pytest.approx(math.sqrt(0.03))


def test_a_finite_gradient_float32_cannot_square_is_normed_in_float64_and_clipped_not_zeroed():
    grads = (torch.full((100,), 3e20), torch.tensor([-4e21, 1.0]))
    reference = _norm64(_parameters(*grads))
    assert math.isinf(float(nn.utils.clip_grad_norm_(_parameters(*grads), math.inf)))  # torch's float32 sum
    norm = clip_gradients(_parameters(*grads), None)
    assert norm.overflows and norm.value == pytest.approx(reference, rel=1e-6)
    clipped = _parameters(*grads)
    assert clip_gradients(clipped, 2.0).value == pytest.approx(reference, rel=1e-6)
    assert _norm64(clipped) == pytest.approx(2.0, rel=1e-5)  # scaled, direction kept
    assert float(clipped[1].grad[0] / clipped[0].grad[0]) == pytest.approx(-4e21 / 3e20, rel=1e-5)


def test_non_finite_entries_give_a_non_finite_norm():
    for bad in (math.inf, math.nan):
        norm = clip_gradients(_parameters(torch.tensor([1.0, bad])), 1.0)
        assert not math.isfinite(norm.value) and not norm.overflows
    assert clip_gradients([nn.Parameter(torch.zeros(2))], 1.0).value == 0.0  # no gradient at all


def test_entrywise_clipping_clips_as_torch_does_and_reports_the_norm_before_it():
    """``max_value``: each entry into [-v, v] (Theano's T.clip in the uRNN authors' scripts), the others
    untouched, and the reported norm the unclipped gradient's (as the norm clipping reports it)."""
    torch.manual_seed(1)
    grads = (3 * torch.randn(4, 5), torch.tensor([0.25, -7.0, 2e20]))
    ours, theirs = _parameters(*grads), _parameters(*grads)
    reference = _norm64(_parameters(*grads))
    norm = clip_gradients(ours, None, max_value=1.0)
    nn.utils.clip_grad_value_(theirs, 1.0)
    assert norm.value == pytest.approx(reference, rel=1e-6)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a.grad, b.grad)
    assert float(ours[1].grad.abs().max()) == 1.0 and float(ours[1].grad[0]) == 0.25
    assert bool((ours[0].grad.abs() < grads[0].abs()).any())  # something was clipped


@pytest.mark.parametrize("options", [{"clip": 0.0}, {"clip_value": -1.0}, {"clip_value": "1"},
                                     {"clip": 1.0, "clip_value": 1.0}])
def test_a_clipping_setting_that_is_not_one_positive_number_is_refused_by_name(options):
    config = TrainConfig(model="rnn", task="addition", out="unused", steps=1, **options)
    with pytest.raises(ValueError, match="clip"):
        config.validate()


@pytest.mark.parametrize("clip", [None, {"clip": 1.0}, {"clip_value": 1.0}])
def test_training_stops_on_a_gradient_beyond_float32_unless_it_is_clipped(tmp_path, monkeypatch, clip):
    """A loss scaled by 1e25 at step 5 gives a finite gradient whose square overflows float32: without
    --clip the run stops there, naming the norm and the loss; with it (by the norm or by entry), the
    gradient is clipped and the run goes on with finite weights (torch's clip_grad_norm_ read the norm as
    inf and stopped it)."""
    from spectral_analysis.train import load_checkpoint, trainer

    real, calls = trainer.task_loss_and_metrics, {"n": 0}

    def huge_at_step_5(*args, **kwargs):
        loss, metrics = real(*args, **kwargs)
        calls["n"] += 1
        return (loss * 1e25 if calls["n"] == 5 else loss), metrics

    monkeypatch.setattr(trainer, "task_loss_and_metrics", huge_at_step_5)
    config = TrainConfig(model="rnn", task="addition", out=str(tmp_path / "run"), hidden=8, steps=8,
                         task_options={"length": 6, "train_size": 64, "valid_size": 8, "test_size": 8},
                         batch_size=16, record_every=1, eval_every=1000, checkpoint_every=1, progress=False,
                         optimizer="rmsprop", **(clip or {}))
    if clip is None:
        message = (r"the gradient norm is \d\.\d+e\+\d+ \(float32 cannot square it.*the training loss is "
                   r"\d\.\d+e\+2\d at step 5")
        with pytest.raises(TrainingDivergedError, match=message):
            train(config)
        return
    train(config)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    step5 = next(line for line in lines if line["phase"] == "train" and line["step"] == 5)
    assert 1e19 < step5["grad_norm"] < math.inf
    model = load_checkpoint(tmp_path / "run" / "last.safetensors").model
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
