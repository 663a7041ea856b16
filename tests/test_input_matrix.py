"""The input weights and the word embedding that factors the first (spectral_analysis.nn.input_matrix)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from spectral_analysis.nn.input_matrix import FactoredInput, input_weights
from spectral_analysis.nn.registry import build_model
from spectral_analysis.train.checkpoint import load_checkpoint, save_checkpoint

D = torch.float64


def _factors(model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, E): the recurrent layer's weight on the embedding, and the embedding."""
    factored = model.input_weights.parametrizations["0"]
    return factored.original, factored[0].embedding


def test_an_embedded_rnn_is_nn_embedding_then_nn_rnn_step_and_gradient():
    """The toolkit's tanh RNN with ``embedding`` computes, and differentiates, as the plain-PyTorch language
    model the calibration trains beside it: ``nn.Embedding`` then ``nn.RNN`` then a linear read-out."""
    torch.manual_seed(0)
    V, e, n = 30, 6, 5
    model = build_model("rnn", V, n, V, activation="tanh", embedding=e).to(D)
    with torch.no_grad():
        model.biases[0].normal_()  # a bias that is not zero, so its place is checked too
    A, E = _factors(model)
    embed, rnn, read = nn.Embedding(V, e).to(D), nn.RNN(e, n, batch_first=True).to(D), nn.Linear(n, V, False)
    read = read.to(D)
    with torch.no_grad():
        embed.weight.copy_(E)
        rnn.weight_ih_l0.copy_(A)
        rnn.weight_hh_l0.copy_(model.transition_matrices()[0])
        rnn.bias_ih_l0.copy_(model.biases[0])
        rnn.bias_hh_l0.zero_()
        read.weight.copy_(model.output.weight)
    ids = torch.randint(0, V, (4, 9))
    targets = torch.randint(0, V, (4, 9))
    ours = model(ids)
    theirs = read(rnn(embed(ids))[0])
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    loss = nn.functional.cross_entropy
    loss(ours.reshape(-1, V), targets.reshape(-1)).backward()
    loss(theirs.reshape(-1, V), targets.reshape(-1)).backward()
    torch.testing.assert_close(E.grad, embed.weight.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(A.grad, rnn.weight_ih_l0.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("name", "options"), [
    ("rnn", {"activation": "tanh", "num_layers": 2}), ("lstm", {}), ("gru", {}),
    ("spectral", {"m1": 4, "m2": 4}), ("urnn", {}), ("kru", {"complex": True, "activation": "modrelu"}),
])
def test_every_model_reads_the_product_of_its_factors(name, options):
    """Each model with ``embedding`` gives, on symbol ids and on their one-hot vectors, what the same model
    without it gives when its input matrix is set to ``A E^T``; its count holds the two factors."""
    torch.manual_seed(1)
    V, e, n = 20, 3, 8
    embedded = build_model(name, V, n, 4, embedding=e, **options).to(D)
    torch.manual_seed(1)
    plain = build_model(name, V, n, 4, **options).to(D)
    plain.load_state_dict({k: v for k, v in embedded.state_dict().items() if "input_weights" not in k},
                          strict=False)
    A, E = _factors(embedded)
    with torch.no_grad():
        plain.input_weights[0].copy_(A @ E.T)
        for layer in range(1, embedded.num_layers):
            plain.input_weights[layer].copy_(embedded.input_weights[layer])
    ids = torch.randint(0, V, (3, 5))
    torch.testing.assert_close(embedded(ids), plain(ids), rtol=1e-10, atol=1e-12)
    one_hot = nn.functional.one_hot(ids, V).to(D)
    torch.testing.assert_close(embedded(one_hot), plain(ids), rtol=1e-10, atol=1e-12)
    rows = embedded.input_weights[0].shape[0]
    added = embedded.parameter_counts()["input"] - plain.parameter_counts()["input"]
    assert added == rows * e + V * e - rows * V


def test_factored_input_differentiates_as_the_product():
    """``M = A E^T`` differentiates as the product (gradcheck in float64)."""
    torch.manual_seed(2)
    factored = FactoredInput(7, 3).to(D)
    A = torch.randn(4, 3, dtype=D, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, e: a @ e.T, (A, factored.embedding))
    torch.testing.assert_close(factored(A), A @ factored.embedding.T)


def test_the_first_layer_draws_as_before_without_an_embedding_and_from_its_width_with_one():
    torch.manual_seed(3)
    plain = input_weights(64, [10_000, 64], 0.05)
    torch.manual_seed(3)  # the draws every kept trial started from: layer by layer, N(0, s^2)
    before = [torch.randn(64, 10_000) * 0.05, torch.randn(64, 64) * 64 ** -0.5]
    assert all(torch.equal(a, b) for a, b in zip(plain, before, strict=True))
    factored = input_weights(64, [10_000, 64], 0.2, embedding=256)
    A = factored.parametrizations["0"].original
    assert A.shape == (64, 256) and float(A.detach().std()) == pytest.approx(0.2, rel=0.1)
    assert float(factored.parametrizations["0"][0].embedding.detach().std()) == pytest.approx(1.0, rel=0.05)
    assert factored[1].shape == (64, 64)


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "64"])
def test_a_bad_embedding_width_is_named(bad):
    with pytest.raises(ValueError, match="embedding must be a positive integer"):
        build_model("lstm", 50, 8, 50, embedding=bad)


def test_an_embedded_checkpoint_loads_back_to_the_same_outputs(tmp_path):
    torch.manual_seed(4)
    model = build_model("lstm", 40, 8, 40, embedding=5)
    save_checkpoint(tmp_path / "m.safetensors", model, {"step": 0})
    loaded = load_checkpoint(tmp_path / "m.safetensors").model
    ids = torch.randint(0, 40, (2, 6))
    torch.testing.assert_close(loaded(ids), model.eval()(ids))


@pytest.mark.parametrize(("name", "options"), [
    ("rnn", {"activation": "tanh", "num_layers": 2}), ("lstm", {}), ("gru", {}),
    ("kru", {"complex": True, "activation": "modrelu"}),
])
def test_the_analyzers_step_forms_the_product_once(name, options):
    """A step function reads ``A E^T`` formed when it is made, not once a step (a 10,000-word product a
    step would make a Lyapunov spectrum over thousands of steps crawl), and steps as the model runs."""
    torch.manual_seed(5)
    model = build_model(name, 30, 6, 3, embedding=4, **options).to(D)
    ids = torch.randint(0, 30, (2, 7))
    factored = model.input_weights.parametrizations["0"][0]
    formed = []
    hook = factored.register_forward_hook(lambda *_: formed.append(1))
    step, state = model.step_function(), model.flat_state(model.start_state(2))
    made = len(formed)
    for t in range(ids.shape[1]):
        state = step(state, ids[:, t])
    assert len(formed) == made
    hook.remove()
    torch.testing.assert_close(model.readout(state), model(ids)[:, -1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["rnn", "spectral", "lstm", "gru"])
def test_dropout_acts_on_the_embedded_words_as_nn_embedding_then_the_recurrent_layer(name, monkeypatch):
    """Zaremba et al. drop the embedding's output, the recurrent layer's input: with a stand-in dropout
    that zeroes one coordinate, an embedded model in training gives the plain-PyTorch model that zeroes
    that coordinate of ``nn.Embedding``'s output (and of the read-out's input), not of ``A E^T x``. The
    product ``A E^T`` is not formed while training."""
    from spectral_analysis.nn import recurrent

    def zero_first(x, p, kind, training, time_dim=1):
        return torch.cat([torch.zeros_like(x[..., :1]), x[..., 1:]], dim=-1) if training else x

    monkeypatch.setattr(recurrent, "sequence_dropout", zero_first)
    torch.manual_seed(6)
    V, e, n = 25, 4, 6
    options = {"activation": "tanh", **({"m1": 3, "m2": 3} if name == "spectral" else {})}
    options = options if name in ("rnn", "spectral") else {}
    model = build_model(name, V, n, V, embedding=e, dropout=0.5, **options).to(D)
    A, E = _factors(model)
    plain = {"rnn": nn.RNN, "spectral": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}[name](e, n, batch_first=True)
    plain = plain.to(D)
    with torch.no_grad():
        plain.weight_ih_l0.copy_(A)
        if name in ("rnn", "spectral"):
            plain.weight_hh_l0.copy_(model.transition_matrices()[0])
            plain.bias_ih_l0.copy_(model.biases[0])
            plain.bias_hh_l0.zero_()
        else:
            plain.weight_hh_l0.copy_(model.recurrent_weights[0])
            plain.bias_ih_l0.copy_(model.biases[0])
            plain.bias_hh_l0.copy_(model.recurrent_biases[0] if name == "gru" else torch.zeros_like(A[:, 0]))
    ids = torch.randint(0, V, (3, 8))
    factored = model.input_weights.parametrizations["0"][0]
    formed = []
    hook = factored.register_forward_hook(lambda *_: formed.append(1))
    ours = model.train()(ids)
    hook.remove()
    hidden = plain(zero_first(E[ids], 0.5, "standard", True))[0]
    theirs = model.output(zero_first(hidden, 0.5, "standard", True))
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)
    assert not formed
