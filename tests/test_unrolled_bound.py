"""Bartlett et al.'s margin bound on the unrolled RNN: the fast norms against the literal unrolled
matrices, the unrolled network against the model, and the bound's arithmetic."""

import math

import pytest
import torch

from spectral_analysis.analysis.bound_report import split_margins
from spectral_analysis.analysis.network import eq17_network
from spectral_analysis.analysis.unrolled_bound import (
    model_unrolled_bound,
    unrolled_bound,
    unrolled_forward,
    unrolled_matrices,
    unrolled_norms,
)
from spectral_analysis.nn import build_model


@pytest.fixture(params=[("rnn", {}), ("spectral", {"m1": 3, "m2": 2, "r": 0.5}), ("ornn", {})])
def model(request):
    torch.manual_seed(0)
    name, options = request.param
    return build_model(name, 3, 5, 4, activation="tanh", **options).double()


def test_the_unrolled_network_computes_the_model(model):
    x = torch.randn(6, 7, 3, dtype=torch.float64)
    net = eq17_network(model)
    expected = model(x)[:, -1]
    assert torch.allclose(unrolled_forward(net, net.inputs(x)), expected, atol=1e-10)


def test_fast_norms_equal_the_literal_unrolled_matrices(model):
    """Every A_t has the block's spectral norm; the (2,1) norms of A_t - M_t are the block rows' norms."""
    T = 6
    net = eq17_network(model)
    norms = unrolled_norms(net, T)
    layers, references = unrolled_matrices(net, T)
    assert len(layers) == T + 1
    for A, M in zip(layers[:-1], references[:-1], strict=True):
        assert float(torch.linalg.matrix_norm(A, ord=2)) == pytest.approx(norms.s_recurrent, rel=1e-10)
        assert float((A - M).T.norm(dim=0).sum()) == pytest.approx(norms.b_recurrent, rel=1e-10)
    assert float(torch.linalg.matrix_norm(layers[-1], ord=2)) == pytest.approx(norms.s_output, rel=1e-10)
    assert float(layers[-1].T.norm(dim=0).sum()) == pytest.approx(norms.b_output, rel=1e-10)
    assert norms.width == max(A.shape[0] for A in layers[:-1]) and norms.s_recurrent >= 1.0


def test_spectral_complexity_formula_from_the_literal_matrices(model):
    T = 4
    net = eq17_network(model)
    layers, references = unrolled_matrices(net, T)
    s = [float(torch.linalg.matrix_norm(A, ord=2)) for A in layers]
    b = [float((A - M).T.norm(dim=0).sum()) for A, M in zip(layers, references, strict=True)]
    expected = math.prod(s) * sum((bi / si) ** (2 / 3) for bi, si in zip(b, s, strict=True)) ** 1.5
    assert unrolled_norms(net, T).log_complexity() == pytest.approx(math.log(expected), rel=1e-10)


def test_the_bound_at_its_gamma_by_hand():
    """The bound's terms recomputed from the module docstring at the gamma it reports."""
    torch.manual_seed(1)
    model = build_model("rnn", 2, 3, 2, activation="relu").double()
    x, y = torch.randn(400, 5, 2, dtype=torch.float64), torch.randint(0, 2, (400,))
    bound = model_unrolled_bound(model, x, y, delta=0.05)
    net = eq17_network(model)
    norms = unrolled_norms(net, 5)
    margins = split_margins(model, x, y)
    ratio = 1 + 1 / 5
    indices = [math.ceil(math.log(q) / math.log(ratio) - 1e-12) for q in
               (norms.s_recurrent, norms.b_recurrent, norms.s_output, norms.b_output)]
    j = round(math.log(bound.gamma) / math.log(ratio))
    data_norm = float(net.inputs(x).pow(2).sum().sqrt())
    assert bound.data_norm == pytest.approx(data_norm, rel=1e-10)
    log_r_a = norms.log_complexity(*(ratio ** i for i in indices))
    term = 48 * math.log(400) * data_norm * math.sqrt(math.log(2 * norms.width ** 2)) * math.exp(log_r_a) / (
        bound.gamma * 400)
    union = sum(math.log((math.pi ** 2 / 3 - 1) * (abs(i) + 1) ** 2) for i in [*indices, j])
    loss = float((margins <= bound.gamma).double().mean())
    expected = loss + 8 / 400 + term + 3 * math.sqrt((math.log(2 / 0.05) + union) / 800)
    assert bound.bound == pytest.approx(expected, rel=1e-9) and bound.margin_loss == pytest.approx(loss)
    assert bound.bound > 1  # vacuous, as the s_r^T growth predicts


def test_bound_grows_with_the_weights_and_refuses_bad_input():
    torch.manual_seed(2)
    model = build_model("rnn", 2, 3, 2).double()
    x, y = torch.randn(200, 6, 2, dtype=torch.float64), torch.randint(0, 2, (200,))
    small = model_unrolled_bound(model, x, y)
    with torch.no_grad():
        model.transitions[0].weight.mul_(3.0)
    large = model_unrolled_bound(model, x, y)
    assert large.log10_spectral_complexity > small.log10_spectral_complexity
    norms = unrolled_norms(eq17_network(model), 6)
    with pytest.raises(ValueError, match="delta must lie in"):
        unrolled_bound(norms, torch.ones(10), 1.0, delta=1.0)
    with pytest.raises(ValueError, match="data norm"):
        unrolled_bound(norms, torch.ones(10), 0.0)
    with pytest.raises(ValueError, match="one label per sequence"):
        model_unrolled_bound(model, x, y[:5])
    lstm = build_model("lstm", 2, 3, 2)
    with pytest.raises(ValueError, match="gated update"):
        model_unrolled_bound(lstm, x.float(), y)
