"""Dropout on the non-recurrent connections (nn.dropout): the two kinds, where the models apply it, and
that evaluation and loaded checkpoints run without it."""

import pytest
import torch

from spectral_analysis.nn import build_model, recurrent
from spectral_analysis.nn.activations import activate
from spectral_analysis.nn.dropout import sequence_dropout
from spectral_analysis.train.checkpoint import load_checkpoint, save_checkpoint

D = torch.float64


def test_locked_masks_are_shared_over_time_and_standard_masks_are_not():
    torch.manual_seed(0)
    x = torch.ones(64, 30, 16, dtype=D)
    locked = sequence_dropout(x, 0.4, "locked", training=True)
    standard = sequence_dropout(x, 0.4, "standard", training=True)
    for y in (locked, standard):
        assert set(y.unique().tolist()) == {0.0, 1 / 0.6}  # kept units scaled by 1 / (1 - p)
        assert abs(float((y == 0).double().mean()) - 0.4) < 0.02
    assert torch.equal(locked, locked[:, :1].expand_as(locked))
    assert not torch.equal(standard, standard[:, :1].expand_as(standard))
    time_first = sequence_dropout(x.transpose(0, 1), 0.4, "locked", training=True, time_dim=0)
    assert torch.equal(time_first, time_first[:1].expand_as(time_first))


def test_no_dropout_outside_training():
    x = torch.randn(3, 4, 5)
    assert sequence_dropout(x, 0.9, "locked", training=False) is x
    assert sequence_dropout(x, 0.0, "standard", training=True) is x


@pytest.mark.parametrize(("options", "message"), [
    ({"dropout": 1.0}, r"probability of zeroing a unit, in \[0, 1\), got 1.0"),
    ({"dropout": -0.1}, r"in \[0, 1\), got -0.1"),
    ({"dropout": "0.5"}, r"in \[0, 1\), got '0.5'"),
    ({"dropout": 0.5, "dropout_kind": "zoneout"}, r"unknown dropout_kind 'zoneout'; expected one of"),
])
def test_bad_dropout_options_are_refused(options, message):
    for name in ("spectral", "lstm", "gru"):
        with pytest.raises(ValueError, match=message):
            build_model(name, 2, 8, 3, **options)


def test_modrelu_kru_refuses_dropout():
    with pytest.raises(ValueError, match="without dropout"):
        build_model("kru", 2, 8, 3, complex=True, activation="modrelu", dropout=0.2)


def test_dropout_acts_on_layer_inputs_and_the_read_out_never_on_the_recurrence(monkeypatch):
    """A stand-in dropout that doubles what it is given, at the places Zaremba et al. drop: the model's
    outputs equal a hand-written two-layer recurrence with those inputs and the read-out's input doubled,
    and the recurrent term W h_(t-1) left alone."""
    calls = []

    def doubling(x, p, kind, training, time_dim=1):
        calls.append(tuple(x.shape))
        return 2 * x if training else x

    monkeypatch.setattr(recurrent, "sequence_dropout", doubling)
    torch.manual_seed(1)
    model = build_model("spectral", 3, 6, 2, num_layers=2, m1=3, m2=3, dropout=0.5).double()
    x = torch.randn(4, 7, 3, dtype=D)
    got = model(x)
    assert calls == [(4, 7, 3), (4, 7, 6), (4, 7, 6)]
    layer_input = x
    for layer in range(2):
        W, M, b = model.transition_matrix(layer), model.input_weights[layer], model.biases[layer]
        h, states = torch.zeros(4, 6, dtype=D), []
        for t in range(7):
            h = activate(h @ W.T + 2 * layer_input[:, t] @ M.T + b, model.activation, model.leak)
            states.append(h)
        layer_input = torch.stack(states, dim=1)
    assert torch.allclose(got, model.output(2 * layer_input), atol=1e-12)
    model.eval()
    calls.clear()
    model(x)
    assert calls == [(4, 7, 3), (4, 7, 6), (4, 7, 6)]  # called, but as the identity outside training


@pytest.mark.parametrize("name", ["spectral", "rnn", "lstm", "gru"])
@pytest.mark.parametrize("kind", ["standard", "locked"])
def test_training_mode_is_random_and_eval_mode_is_the_model_without_dropout(name, kind):
    """On word ids (PTB's input), two layers: training draws new masks each call; evaluation gives exactly
    the outputs of the same weights with dropout 0."""
    torch.manual_seed(2)
    dropped = build_model(name, 12, 8, 12, num_layers=2, dropout=0.5, dropout_kind=kind)
    plain = build_model(name, 12, 8, 12, num_layers=2)
    plain.load_state_dict(dropped.state_dict())
    ids = torch.randint(0, 12, (5, 9))
    first, second = dropped(ids), dropped(ids)
    assert torch.isfinite(first).all() and not torch.allclose(first, second)
    dropped.eval()
    assert torch.equal(dropped(ids), plain(ids))


def test_a_loaded_checkpoint_evaluates_without_dropout(tmp_path):
    torch.manual_seed(3)
    model = build_model("lstm", 4, 8, 4, num_layers=2, dropout=0.5, dropout_kind="locked")
    save_checkpoint(tmp_path / "m.safetensors", model, {"step": 1})
    loaded = load_checkpoint(tmp_path / "m.safetensors").model
    assert not loaded.training and loaded.dropout == 0.5 and loaded.dropout_kind == "locked"
    x = torch.randn(2, 5, 4)
    assert torch.equal(loaded(x), loaded(x))

