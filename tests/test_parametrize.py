"""The torch.nn.utils.parametrize hook: any module weight in SVD form with one call."""

import pytest
import torch
from torch import nn

from spectral_analysis.linalg import SigmaMap, svd_compose
from spectral_analysis.nn import svd_parametrize, svd_singular_values

D = torch.float64


def test_linear_exact_init_keeps_the_weight_and_trains():
    torch.manual_seed(0)
    layer = nn.Linear(9, 5).double()
    before = layer.weight.detach().clone()
    svd_parametrize(layer)
    assert torch.allclose(layer.weight, before, atol=1e-12)
    params = layer.parametrizations.weight
    assert params.original0.shape == (5, 5) and params.original1.shape == (9, 5)
    assert torch.allclose(svd_singular_values(layer).sort(descending=True).values,
                          torch.linalg.svdvals(before), atol=1e-12)
    layer(torch.randn(4, 9, dtype=D)).pow(2).sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all()
               for t in (params.original0, params.original1, params.original2))


def test_rnn_hidden_weight_is_used_by_the_recurrence():
    torch.manual_seed(1)
    rnn = nn.RNN(3, 6, batch_first=True).double()
    W = svd_compose([torch.randn(i, dtype=D) for i in range(1, 7)],
                    [torch.randn(i, dtype=D) for i in range(1, 7)], torch.full((6,), 0.9, dtype=D), (6, 6))
    with torch.no_grad():
        rnn.weight_hh_l0.copy_(W)
    svd_parametrize(rnn, "weight_hh_l0", sigma_map=SigmaMap("sigmoid", 1.0, 0.2))
    x = torch.randn(2, 4, 3, dtype=D)
    out, _ = rnn(x)
    h = torch.zeros(2, 6, dtype=D)
    for t in range(4):
        h = torch.tanh(x[:, t] @ rnn.weight_ih_l0.T + rnn.bias_ih_l0
                       + h @ rnn.weight_hh_l0.T + rnn.bias_hh_l0)
    assert torch.allclose(out[:, -1], h, atol=1e-12)
    assert torch.allclose(rnn.weight_hh_l0, W, atol=1e-10)
    out.sum().backward()
    assert rnn.parametrizations.weight_hh_l0.original2.grad is not None


def test_lstm_rectangular_weight():
    lstm = nn.LSTM(4, 5, batch_first=True)
    svd_parametrize(lstm, "weight_hh_l0")  # 20 x 5
    out, _ = lstm(torch.randn(3, 6, 4))
    out.sum().backward()
    assert lstm.parametrizations.weight_hh_l0.original0.grad.shape == (20, 5)


def test_partial_counts_exact_init_explains_and_truncate_works():
    torch.manual_seed(2)
    layer = nn.Linear(16, 16).double()
    with pytest.raises(ValueError, match="not in the image"):
        svd_parametrize(layer, m1=2, m2=2)
    layer = nn.Linear(16, 16).double()
    W = layer.weight.detach().clone()
    svd_parametrize(layer, m1=4, m2=3, sigma_map=SigmaMap("sigmoid", 0.5, 0.45), init="truncate")
    svals = torch.linalg.svdvals(layer.weight.detach())
    assert bool((svals >= 0.05).all() and (svals <= 0.95).all())
    # Lemma 1: the leading m - 1 singular directions survive the truncation exactly
    U0, _, V0t = torch.linalg.svd(W)
    U1, _, V1t = torch.linalg.svd(layer.weight.detach())
    assert torch.allclose((U0[:, :3] * U1[:, :3]).sum(0).abs(), torch.ones(3, dtype=D), atol=1e-8)
    assert torch.allclose((V0t[:2] * V1t[:2]).sum(1).abs(), torch.ones(2, dtype=D), atol=1e-8)


def test_exact_init_rejects_singular_values_outside_the_map():
    layer = nn.Linear(4, 4).double()
    with torch.no_grad():
        layer.weight.copy_(3 * torch.eye(4))
    with pytest.raises(ValueError, match="outside"):
        svd_parametrize(layer, sigma_map=SigmaMap("sigmoid", 1.0, 0.1))


def test_parametrize_rejects_bad_targets():
    with pytest.raises(ValueError, match="2-D"):
        svd_parametrize(nn.Linear(3, 3), "bias")
    with pytest.raises(ValueError, match="no tensor attribute"):
        svd_parametrize(nn.Linear(3, 3), "kernel")
    with pytest.raises(ValueError, match="m1=9"):
        svd_parametrize(nn.Linear(3, 3), m1=9)
    with pytest.raises(ValueError, match="not parametrized"):
        svd_singular_values(nn.Linear(3, 3))


def test_zero_reflector_counts_give_a_scaled_diagonal_family():
    layer = nn.Linear(5, 5).double()
    with torch.no_grad():
        layer.weight.copy_(torch.diag(torch.tensor([2.0, 1.5, 1.0, 0.5, 0.25], dtype=D)))
    svd_parametrize(layer, m1=0, m2=0)
    assert layer.parametrizations.weight.original0.shape == (5, 0)
    assert torch.allclose(layer.weight, torch.diag(torch.tensor([2.0, 1.5, 1.0, 0.5, 0.25], dtype=D)))


def test_parameter_count_is_the_papers():
    """Reflector lengths sum to m n - (m^2 - m)/2 per factor (Section 4), plus min(r, c) sigmas."""
    layer = svd_parametrize(nn.Linear(9, 6), m1=4, m2=3, init="truncate")
    param = layer.parametrizations.weight[0]
    expected = (4 * 6 - (16 - 4) // 2) + (3 * 9 - (9 - 3) // 2) + 6
    assert param.parameter_count() == expected == 18 + 24 + 6
