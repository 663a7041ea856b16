"""Theorem 5 / Corollary 1 in log space, the explicit A.6 bound, margins, Eq. 17 absorption, Lemma 3."""

from __future__ import annotations

import math

import pytest
import torch

from spectral_analysis.analysis import (
    classification_margins,
    complexity_term,
    eq17_network,
    margin_loss,
    margin_quantile,
    pac_bayes_bound,
    perturbation_check,
    weight_norms,
)
from spectral_analysis.analysis import perturbation as perturbation_module
from spectral_analysis.analysis.bounds import GAMMA_UNION_CONSTANT, SIGMA_CONSTANT, gamma_grid_point
from spectral_analysis.analysis.network import Eq17Network
from spectral_analysis.nn import build_model


def _net(W: torch.Tensor, M: torch.Tensor, Y: torch.Tensor, activation: str = "relu") -> Eq17Network:
    return Eq17Network(W.double(), M.double(), Y.double(), activation, 0.2, False, False, False, M.shape[1],
                       None)


def _literal_g(W, M, Y, B, T, gamma):
    """Theorem 5 evaluated literally in floats (small T only)."""
    spec = [float(torch.linalg.matrix_norm(A, ord=2)) for A in (W, M, Y)]
    h = max(W.shape[0], M.shape[1], Y.shape[0])
    w2 = sum(float(A.norm()) ** 2 for A in (W, M, Y))
    return (B ** 2 * T ** 4 * h * math.log(h) / gamma ** 2 * w2 * max(spec[0] ** (2 * T - 2), 1)
            * max(spec[1] ** 2, 1) * max(spec[2] ** 2, 1))


@pytest.mark.parametrize("scale", [0.5, 1.7])
def test_log10_g_matches_the_formula_literally(scale):
    torch.manual_seed(0)
    W, M, Y = torch.randn(6, 6) * scale / 6 ** 0.5, torch.randn(6, 3) * 2, torch.randn(4, 6) * 0.3
    net = _net(W, M, Y)
    term = complexity_term(weight_norms(net), 7, net.sizes["h"], 1.3, 0.7)
    literal = _literal_g(W.double(), M.double(), Y.double(), 1.3, 7, 0.7)
    assert term.log10_G == pytest.approx(math.log10(literal), rel=1e-12)
    assert sum(term.factors.values()) == pytest.approx(term.log10_G)


def test_long_sequence_with_norm_two_is_finite_in_log_space():
    Q, _ = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64))
    net = _net(2 * Q, torch.eye(8, 2, dtype=torch.float64), torch.eye(3, 8, dtype=torch.float64))
    term = complexity_term(weight_norms(net), 784, 8, 1.0, 1.0)
    assert math.isfinite(term.log10_G)
    assert term.factors["max(||W||^(2T-2), 1)"] == pytest.approx(1566 * math.log10(2))
    with pytest.raises(OverflowError):  # why log space is needed
        _literal_g(2 * Q, net.M, net.Y, 1.0, 784, 1.0)


def test_corollary1_uses_the_sigma_map_bound_for_spectral_rnn():
    torch.manual_seed(1)
    model = build_model("spectral", 3, 8, 2, r=0.05, m1=4, m2=4)
    net = eq17_network(model)
    assert net.singular_value_bound == pytest.approx(1.05)
    term = complexity_term(weight_norms(net), 100, net.sizes["h"], 1.0, 1.0, net.singular_value_bound)
    assert term.corollary and term.factors["max(||W||^(2T-2), 1)"] == pytest.approx(198 * math.log10(1.05))
    assert eq17_network(build_model("rnn", 3, 8, 2)).singular_value_bound is None


@pytest.mark.parametrize("activation", ["relu", "tanh", "leaky_relu", "abs"])
def test_absorbed_network_computes_the_model_exactly(activation):
    torch.manual_seed(2)
    model = build_model("rnn", 3, 6, 4, activation=activation, output_bias=True).double()
    with torch.no_grad():
        model.biases[0].normal_()
        model.output.bias.normal_()
    net = eq17_network(model)
    assert net.constant_input and net.output_unit
    assert net.sizes == {"n": 7, "n_i": 4, "n_y": 4, "h": 7}
    x = torch.randn(5, 9, 3, dtype=torch.float64)
    _, y = net.final(net.inputs(x))
    assert torch.allclose(y, model(x)[:, -1], atol=1e-12)
    assert net.data_bound(2.0) == pytest.approx(math.sqrt(5.0))


def test_zero_biases_are_not_absorbed_and_symbol_ids_are_one_hot():
    model = build_model("rnn", 5, 6, 2).double()
    net = eq17_network(model, symbolic_inputs=True)
    assert not net.constant_input and net.data_bound(1.0) == 1.0
    ids = torch.randint(0, 5, (3, 4))
    assert torch.allclose(net.final(net.inputs(ids))[1], model(ids)[:, -1], atol=1e-12)


@pytest.mark.parametrize("name, options, message", [
    ("lstm", {}, "LSTM"), ("gru", {}, "a GRU's gated update"),
    ("rnn", {"num_layers": 2}, "one recurrent layer"), ("mlp", {}, "FeedForwardNet is not one")])
def test_models_outside_theorem5_are_refused_by_name(name, options, message):
    with pytest.raises(ValueError, match=message):
        eq17_network(build_model(name, 3, 4, 2, **options))


def test_margins_and_margin_loss():
    outputs = torch.tensor([[2.0, 1.0, 0.5], [0.0, 3.0, 3.0], [1.0, 4.0, -1.0]])
    margins = classification_margins(outputs, torch.tensor([0, 1, 0]))
    assert margins.tolist() == [1.0, 0.0, -3.0]
    assert margin_loss(margins, 0.0) == pytest.approx(2 / 3)  # a tie counts as an error
    assert margin_loss(margins, 1.0) == 1.0
    assert margin_quantile(torch.tensor([0.5, 1.0, 2.0, 3.0]), 0.5) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="misclassified"):
        margin_quantile(margins, 0.5)
    with pytest.raises(ValueError, match="quantile must lie in"):
        margin_quantile(margins, 1.5)


def _small_net():
    torch.manual_seed(3)
    return _net(torch.randn(4, 4) * 0.3, torch.randn(4, 2) * 0.5, torch.randn(3, 4) * 0.5)


def test_explicit_bound_follows_lemma2_with_the_proofs_sigma():
    net, T, B, gamma, m, delta = _small_net(), 3, 1.0, 0.5, 10 ** 10, 0.05
    result = pac_bayes_bound(net, T, B, gamma, 0.1, m, delta)
    assert result.regime == "grid" and not result.vacuous
    norms = weight_norms(net)
    h = net.sizes["h"]
    K = math.floor((math.sqrt(m) - 1) / math.e) + 1
    beta = max(norms.W ** (T - 1), 1) * max(norms.M, 1) * max(norms.Y, 1)
    beta_tilde = 10 ** result.log10_beta_tilde
    assert beta / math.e <= beta_tilde <= math.e * beta  # the grid point covers beta
    sigma = gamma / (SIGMA_CONSTANT * math.sqrt(2 * h * math.log(12 * h)) * T * B * (T * math.e + math.e + 1)
                     * beta_tilde)
    assert 10 ** result.log10_sigma == pytest.approx(sigma, rel=1e-10)
    kl = norms.w_squared / (2 * sigma ** 2)
    expected = 0.1 + 4 * math.sqrt((kl + math.log(6 * m * K / delta)) / (m - 1))
    assert result.bound == pytest.approx(expected, rel=1e-10)
    assert result.eps_times_length <= 1


def test_the_chosen_sigma_satisfies_lemma2s_perturbation_condition():
    """Lemma 2 needs P_u[max_x |f_{w+u}(x) - f_w(x)| < gamma/4] >= 1/2: sample u and measure."""
    net, T, gamma = _small_net(), 3, 0.5
    result = pac_bayes_bound(net, T, 1.0, gamma, 0.0, 10 ** 8, 0.05)
    sigma = 10 ** result.log10_sigma
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(256, T, 2, generator=generator, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True).clamp(min=1.0)  # ||x_t|| <= B = 1
    _, y = net.final(x)
    inside = 0
    for _ in range(200):
        W, M, Y = (A + sigma * torch.randn(A.shape, generator=generator, dtype=torch.float64)
                   for A in (net.W, net.M, net.Y))
        inside += float((net.final(x, W, M, Y)[1] - y).abs().max()) < gamma / 4
    assert inside / 200 >= 0.5


def test_explicit_bound_regimes_and_data_chosen_gamma():
    net = _small_net()
    below = pac_bayes_bound(net, 3, 1.0, 1e6, 1.0, 1000, 0.05)
    assert below.regime.startswith("below-grid") and below.bound == 1.0 and below.vacuous
    Q, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))
    big = _net(3 * Q, torch.eye(6, 2), torch.eye(2, 6))
    above = pac_bayes_bound(big, 50, 1.0, 0.1, 0.0, 1000, 0.05)
    assert above.regime.startswith("above-grid") and above.vacuous and above.log10_complexity > 0
    fixed = pac_bayes_bound(net, 3, 1.0, 0.5, 0.1, 10 ** 8, 0.05)
    chosen = pac_bayes_bound(net, 3, 1.0, 0.5, 0.1, 10 ** 8, 0.05, gamma_from_data=True)
    j = gamma_grid_point(0.5)[1]
    assert chosen.delta_used == pytest.approx(fixed.delta_used / (GAMMA_UNION_CONSTANT * (abs(j) + 1) ** 2))
    assert chosen.bound > fixed.bound
    assert gamma_grid_point(0.3) == (0.25, -2)


@pytest.mark.parametrize("kwargs, message", [
    ({"gamma": 0.0}, "margin gamma must be > 0"), ({"gamma": -1.0}, "margin gamma must be > 0"),
    ({"delta": 1.0}, "delta must lie in"), ({"delta": 0.0}, "delta must lie in"),
    ({"T": 0}, "T must be an integer >= 1"), ({"B": 0.0}, "data bound B"), ({"m": 1}, "at least 2")])
def test_bad_bound_inputs_are_named(kwargs, message):
    args = {"T": 3, "B": 1.0, "gamma": 0.5, "margin_loss": 0.1, "m": 100, "delta": 0.05, **kwargs}
    with pytest.raises(ValueError, match=message):
        pac_bayes_bound(_small_net(), **args)


@pytest.mark.parametrize("activation", ["relu", "tanh", "identity"])
def test_lemma3_holds_for_admissible_perturbations(activation):
    torch.manual_seed(4)
    model = build_model("rnn", 3, 10, 4, activation=activation, init_std=0.5).double()
    with torch.no_grad():
        model.biases[0].normal_()
    net = eq17_network(model)
    x = torch.randn(16, 12, 3, dtype=torch.float64)
    check = perturbation_check(net, x, trials=10)
    assert check.holds and 0 < check.hidden_slack_max <= 1 and 0 < check.output_slack_max <= 1
    with pytest.raises(ValueError, match="Assumption 1"):
        perturbation_check(net, x, B=0.1, trials=1)


def test_lemma3_violations_are_reported_with_the_sample(monkeypatch):
    net = eq17_network(build_model("rnn", 3, 5, 2).double())
    monkeypatch.setattr(perturbation_module, "lemma3_right_hand_sides", lambda *args: (-30.0, -30.0))
    check = perturbation_check(net, torch.randn(4, 6, 3, dtype=torch.float64), trials=2)
    assert not check.holds
    assert {v["quantity"] for v in check.violations} == {"hidden", "output"}
    assert all(0 <= v["sample"] < 4 and v["ratio"] > 1 for v in check.violations)


def test_float32_margins_agree_with_the_float64_twin_and_never_flip_a_sign():
    from spectral_analysis.analysis.bound_report import MARGIN_RECHECK, split_margins, split_margins_reference

    torch.manual_seed(11)
    model = build_model("spectral", 1, 32, 10, m1=8, m2=8, output_bias=True)
    x = torch.rand(300, 100, 1)
    y = torch.randint(0, 10, (300,))
    fast, slow = split_margins(model, x, y, batch_size=128), split_margins_reference(model, x, y)
    assert fast.dtype == torch.float64 and torch.allclose(fast, slow, atol=1e-4, rtol=1e-4)
    with torch.no_grad():  # a tie: two logits made equal, margin exactly 0 in float64
        model.output.weight[1].copy_(model.output.weight[0])
        model.output.bias[1].copy_(model.output.bias[0])
    tied = split_margins(model, x, torch.zeros(300, dtype=torch.long))
    reference = split_margins_reference(model, x, torch.zeros(300, dtype=torch.long))
    assert torch.equal(torch.sign(tied), torch.sign(reference))
    assert bool((tied <= 0).all()) and MARGIN_RECHECK > 0
