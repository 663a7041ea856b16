"""The ``graph`` route's plumbing, on the CPU: ``cuda_graphs.replay`` stood in by a twin that keeps one
set of buffers per key and reruns the body on them, as a replay does (the GPU tests in
``tests/test_gpu.py`` replay real CUDA graphs). Every scan that takes ``graphs`` (the dense scan, the
dense modReLU scan, KRU's two-block scan with and without modReLU) gives its eager states and
gradients, and every model reaches it by ``recurrence='graph'``."""

import pytest
import torch

from spectral_analysis.nn import build_model
from spectral_analysis.nn.kronecker_scan import kronecker_scan
from spectral_analysis.nn.modrelu import dense_modrelu_scan
from spectral_analysis.nn.time_loop import recurrence_scan

D = torch.float64


def _replay_twin(monkeypatch) -> dict:
    """Stand ``cuda_graphs.replay`` in by the twin; returns the kept buffers by key."""
    from spectral_analysis.nn import cuda_graphs

    kept: dict = {}

    def replay_twin(key, make_outputs, body, inputs):
        if key not in kept:
            kept[key] = {name: torch.empty_like(value) for name, value in inputs.items()} | make_outputs()
        for name, value in inputs.items():
            kept[key][name].copy_(value)
        body(kept[key])
        return kept[key]

    monkeypatch.setattr(cuda_graphs, "replay", replay_twin)
    return kept


def _dense(activation):
    def scan(v, graphs):
        return recurrence_scan(v["xp"], v["W"], v["h0"], activation, 0.2, graphs=graphs)

    return scan, {"xp": (20, 3, 6), "W": (6, 6), "h0": (3, 6)}


def _dense_modrelu(v, graphs):
    return dense_modrelu_scan(v["xp"], v["W"], v["h0"], v["b"], graphs)


def _kronecker(activation):
    def scan(v, graphs):
        bias = v["b"] if activation == "modrelu" else None
        factors = [torch.complex(v["F0"], v["F1"]), torch.complex(v["F2"], v["F3"])] if bias is not None \
            else [v["F0"], v["F1"]]
        return kronecker_scan(v["xp"], factors, v["h0"], activation, 0.2, bias=bias, graphs=graphs)

    planes = 2 if activation == "modrelu" else 1
    shapes = {"xp": (12, 3, planes * 6), "h0": (3, planes * 6), "F0": (2, 2), "F1": (3, 3)}
    if planes == 2:
        shapes = {**shapes, "F0": (2, 2), "F1": (2, 2), "F2": (3, 3), "F3": (3, 3), "b": (6,)}
    return scan, shapes


SCANS = {
    "dense leaky_relu": _dense("leaky_relu"),
    "dense abs": _dense("abs"),
    "dense identity": _dense("identity"),
    "dense modrelu": (_dense_modrelu, {"xp": (20, 3, 8), "W": (8, 8), "h0": (3, 8), "b": (4,)}),
    "kronecker tanh": _kronecker("tanh"),
    "kronecker modrelu": _kronecker("modrelu"),
}


@pytest.mark.parametrize("name", SCANS)
def test_replayed_buffers_give_the_eager_scan(name, monkeypatch):
    """Two sequences of one shape, both forwards before either backward, give the eager states and every
    gradient exactly: the route keeps its own copies of what the next replay overwrites."""
    scan, shapes = SCANS[name]
    kept = _replay_twin(monkeypatch)
    gen = torch.Generator().manual_seed(3)
    cases = [{key: (0.5 * torch.randn(shape, dtype=D, generator=gen)).requires_grad_()
              for key, shape in shapes.items()} for _ in range(2)]
    weights = [torch.randn(shapes["xp"], dtype=D, generator=gen) for _ in cases]
    results = []
    for graphs in (False, True):
        states = [scan(v, graphs) for v in cases]
        grads = [torch.autograd.grad((H * w).sum(), list(v.values()))
                 for H, v, w in zip(states, cases, weights, strict=True)]
        results.append(([H.detach() for H in states], grads))
    assert len(kept) == 2  # one forward and one backward graph for the shape
    (eager_states, eager_grads), (states, grads) = results
    for H, H_eager in zip(states, eager_states, strict=True):
        assert torch.equal(H, H_eager)
    for g, g_eager in zip(grads, eager_grads, strict=True):
        for a, b in zip(g, g_eager, strict=True):
            assert torch.equal(a, b)


MODELS = {
    "spectral": ("spectral", 8, {"activation": "leaky_relu"}),
    "rnn": ("rnn", 8, {"activation": "leaky_relu"}),
    "kru dense fallback": ("kru", 8, {"activation": "leaky_relu"}),
    "kru two blocks": ("kru", 512, {"activation": "tanh"}),
    "kru modrelu dense fallback": ("kru", 8, {"complex": True, "activation": "modrelu"}),
    "kru modrelu two blocks": ("kru", 256, {"complex": True, "activation": "modrelu"}),
}


@pytest.mark.parametrize("name", MODELS)
def test_models_hand_the_graph_route_to_the_replayed_scan(name, monkeypatch):
    """``recurrence='graph'`` reaches the replayed loops through every model that has them (KRU's two
    Kronecker blocks and its dense fallback, with modReLU or not) and gives the eager scan's outputs and
    gradients. ``resolve_recurrence`` is let through on the CPU."""
    from spectral_analysis.nn import modrelu_rnn, recurrent

    kept = _replay_twin(monkeypatch)
    for module in (recurrent, modrelu_rnn):
        monkeypatch.setattr(module, "resolve_recurrence", lambda mode, activation, device, *shape: mode)
    model_name, hidden, options = MODELS[name]
    torch.manual_seed(0)
    model = build_model(model_name, 2, hidden, 3, **options).double()
    x = torch.randn(4, 15, 2, dtype=D)
    runs = []
    for route in ("scan", "graph"):
        model.zero_grad()
        y = model.run(x, recurrence=route).last_outputs()
        y.square().sum().backward()
        runs.append((y.detach(), [p.grad.clone() for p in model.parameters()]))
        assert bool(kept) == (route == "graph")
    assert torch.equal(runs[1][0], runs[0][0])
    for a, b in zip(runs[1][1], runs[0][1], strict=True):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-14)


def test_the_urnn_keeps_its_own_scan(monkeypatch):
    """The uRNN applies W by its factors: ``auto`` stays on its scan where it would take ``graph``, and
    ``graph`` asked for by name is refused with a clear error."""
    from spectral_analysis.nn import modrelu_rnn

    monkeypatch.setattr(modrelu_rnn, "resolve_recurrence",
                        lambda mode, activation, device, *shape: "graph" if mode == "auto" else mode)
    model = build_model("urnn", 2, 6, 3)
    x = torch.randn(2, 5, 2)
    assert torch.equal(model.run(x, recurrence="auto").outputs, model.run(x, recurrence="scan").outputs)
    with pytest.raises(ValueError, match="no recurrence='graph' route"):
        model.run(x, recurrence="graph")
    monkeypatch.undo()
    with pytest.raises(ValueError, match="needs a CUDA device"):
        build_model("kru", 2, 8, 3, complex=True, activation="modrelu").run(x, recurrence="graph")
