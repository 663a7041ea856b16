"""The time-loop routes of Eq. 4 agree: scan, torch kernel, plain loop and Algorithm 1's reflector loop."""

import pytest
import torch

from spectral_analysis.nn import ACTIVATIONS, build_model
from spectral_analysis.nn.time_loop import recurrence_loop, recurrence_scan, resolve_recurrence

D = torch.float64


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_scan_gradcheck(activation):
    gen = torch.Generator().manual_seed(0)
    xp = torch.randn(5, 3, 4, dtype=D, generator=gen).requires_grad_()
    W = (0.6 * torch.randn(4, 4, dtype=D, generator=gen)).requires_grad_()
    h0 = torch.randn(3, 4, dtype=D, generator=gen).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, w, h: recurrence_scan(a, w, h, activation, 0.3), (xp, W, h0))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_scan_equals_autograd_loop(activation):
    gen = torch.Generator().manual_seed(1)
    xp = torch.randn(30, 4, 6, dtype=D, generator=gen).requires_grad_()
    W = (0.5 * torch.randn(6, 6, dtype=D, generator=gen)).requires_grad_()
    h0 = torch.randn(4, 6, dtype=D, generator=gen).requires_grad_()
    weights = torch.randn(30, 4, 6, dtype=D, generator=gen)
    results = []
    for run in (lambda: recurrence_scan(xp, W, h0, activation, 0.1),
                lambda: recurrence_loop(xp, h0, lambda h: h @ W.T, activation, 0.1)):
        H = run()
        grads = torch.autograd.grad((H * weights).sum(), (xp, W, h0))
        results.append((H.detach(), grads))
    (H1, g1), (H2, g2) = results
    assert _rel(H1, H2) < 1e-12
    for a, b in zip(g1, g2, strict=True):
        assert _rel(a, b) < 1e-12


@pytest.mark.parametrize("name", ["spectral", "ornn"])
@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "tanh", "abs", "identity"])
def test_fast_and_reflector_routes_agree_in_float64(name, activation):
    """The issue's 1e-10: outputs and every gradient of the fast paths match Algorithm 1's loop."""
    torch.manual_seed(2)
    options = {"m1": 5, "m2": 3} if name == "spectral" else {"m": 6}
    model = build_model(name, 3, 8, 2, activation=activation, num_layers=2, **options).double()
    x = torch.randn(5, 40, 3, dtype=D)
    h0 = torch.randn(2, 5, 8, dtype=D, requires_grad=True)
    routes = ["scan", "loop", "reflector"] + (["torch"] if activation in ("relu", "tanh") else [])
    outputs, grads = {}, {}
    for route in routes:
        model.zero_grad()
        h0.grad = None
        y = model.run(x, h0, recurrence=route).outputs
        y.square().sum().backward()
        outputs[route] = y.detach()
        grads[route] = [p.grad.clone() for p in model.parameters()] + [h0.grad.clone()]
    for route in routes:
        assert _rel(outputs[route], outputs["reflector"]) < 1e-10, route
        for a, b in zip(grads[route], grads["reflector"], strict=True):
            assert _rel(a, b) < 1e-10, route


def test_routes_are_validated():
    with pytest.raises(ValueError, match="supports only"):
        resolve_recurrence("torch", "leaky_relu", torch.device("cpu"))
    with pytest.raises(ValueError, match="unknown recurrence"):
        resolve_recurrence("cudnn", "relu", torch.device("cpu"))
    assert resolve_recurrence("auto", "relu", torch.device("cpu")) == "scan"
    assert resolve_recurrence("auto", "relu", torch.device("cuda")) == "torch"
    assert resolve_recurrence("auto", "abs", torch.device("cuda")) == "graph"
    assert resolve_recurrence("auto", "leaky_relu", torch.device("cuda")) == "graph"
    assert resolve_recurrence("auto", "modrelu", torch.device("cuda")) == "scan"
    assert resolve_recurrence("graph", "modrelu", torch.device("cuda")) == "graph"
    assert resolve_recurrence("graph", "leaky_relu", torch.device("cuda")) == "graph"
    with pytest.raises(ValueError, match="needs a CUDA device, not 'cpu'"):
        resolve_recurrence("graph", "leaky_relu", torch.device("cpu"))
    model = build_model("rnn", 2, 4, 1)
    with pytest.raises(ValueError, match="needs a CUDA device"):
        model.run(torch.randn(1, 3, 2), recurrence="graph")
    with pytest.raises(ValueError, match="structured transition"):
        model.run(torch.randn(1, 3, 2), recurrence="reflector")

