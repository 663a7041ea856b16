"""``graph_weight_formation``'s plumbing on the CPU: ``torch.cuda.make_graphed_callables`` stood in by a twin
that behaves as its graphs do, one set of static buffers written at every replay (the output and the inputs'
gradients, handed out as aliases of those buffers) and inputs away from the sample's addresses copied into
the sample. The Spectral-RNN trained with its W formed that way takes the eager model's steps, gradients
accumulated over two backward passes stay right, and only the module's own parameters under autograd are
replayed. The real capture on a card: ``tests/test_gpu.py``."""

import copy

import pytest
import torch

from spectral_analysis.nn import build_model, cuda_graphs, graph_weight_formation, parametrize

D = torch.float64


def _graph_twin(monkeypatch) -> list:
    """Stand the capture in by the twin, on the CPU; returns the captures made."""
    captures: list = []

    def make_graphed_twin(function, sample_args):
        static = {"out": None, "grads": [torch.empty_like(a) for a in sample_args]}
        captures.append(sample_args)

        class Replay(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *inputs):
                with torch.no_grad():
                    for kept, given in zip(sample_args, inputs, strict=True):
                        if kept.data_ptr() != given.data_ptr():
                            kept.copy_(given)
                with torch.enable_grad():
                    leaves = [a.detach().requires_grad_() for a in sample_args]
                    out = function(*leaves)
                ctx.leaves, ctx.out = leaves, out
                if static["out"] is None:
                    static["out"] = torch.empty_like(out)
                static["out"].copy_(out.detach())
                return static["out"].detach()

            @staticmethod
            def backward(ctx, grad):
                found = torch.autograd.grad(ctx.out, ctx.leaves, grad)
                for buffer, value in zip(static["grads"], found, strict=True):
                    buffer.copy_(value)
                return tuple(b.detach() for b in static["grads"])

        return lambda *args: Replay.apply(*args)

    monkeypatch.setattr(torch.cuda, "make_graphed_callables", make_graphed_twin)
    monkeypatch.setattr(parametrize, "GRAPHED_DEVICE_TYPES", ("cuda", "cpu"))
    return captures


def _models(**options):
    torch.manual_seed(0)
    eager = build_model("spectral", 2, 6, 3, m1=3, m2=4, **options).to(D)
    return eager, graph_weight_formation(copy.deepcopy(eager))


def _loss(model, x):
    return model(x).square().mean()


def test_a_replayed_formation_trains_as_the_eager_one(monkeypatch):
    """Three Adam steps: the same outputs and parameters as the eager model's, from one capture (the
    optimizer updates the captured parameters in place, and the replay reads them there)."""
    captures = _graph_twin(monkeypatch)
    eager, graphed = _models()
    optimizers = [torch.optim.Adam(m.parameters(), lr=0.05) for m in (eager, graphed)]
    x = torch.randn(4, 5, 2, dtype=D)
    for _ in range(3):
        losses = []
        for model, optimizer in zip((eager, graphed), optimizers, strict=True):
            optimizer.zero_grad(set_to_none=True)
            loss = _loss(model, x)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-12)
    for (name, a), (_, b) in zip(eager.named_parameters(), graphed.named_parameters(), strict=True):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-14), name
    assert len(captures) == 1


def test_gradients_accumulated_over_two_backward_passes_are_not_overwritten(monkeypatch):
    """The replay writes the gradients into the same buffers each time: handed on as they are, the first
    pass's gradient would alias the buffer the second overwrites, and the sum would be twice the second."""
    _graph_twin(monkeypatch)
    eager, graphed = _models()
    x1, x2 = torch.randn(4, 5, 2, dtype=D), torch.randn(4, 5, 2, dtype=D)
    for model in (eager, graphed):
        _loss(model, x1).backward()
        _loss(model, x2).backward()
    for (name, a), (_, b) in zip(eager.named_parameters(), graphed.named_parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad, rtol=1e-12, atol=1e-14), name


def test_only_the_modules_own_parameters_under_autograd_are_replayed(monkeypatch):
    """Evaluation and ``functional_call``'s tensors form W eagerly (a replay would copy those tensors into
    the parameters the graph reads); a moved parameter is captured anew; switched off, nothing is."""
    captures = _graph_twin(monkeypatch)
    eager, graphed = _models()
    x = torch.randn(4, 5, 2, dtype=D)
    with torch.no_grad():
        assert torch.equal(graphed(x), eager(x))
    assert not captures
    other = {name: (p.detach() + 0.1).requires_grad_() for name, p in graphed.named_parameters()}
    before = {name: p.detach().clone() for name, p in graphed.named_parameters()}
    out = torch.func.functional_call(graphed, other, (x,))
    assert torch.allclose(out, torch.func.functional_call(eager, other, (x,)), rtol=1e-12)
    assert not captures and all(torch.equal(p, before[n]) for n, p in graphed.named_parameters())
    _loss(graphed, x).backward()
    assert len(captures) == 1
    for p in graphed.parameters():  # as .to(device) does: the same parameters at new addresses
        p.data = p.data.clone()
    _loss(graphed, x).backward()
    assert len(captures) == 2
    graph_weight_formation(graphed, False)
    _loss(graphed, x).backward()
    assert len(captures) == 2


def test_the_replay_hands_out_fresh_tensors(monkeypatch):
    """``graphed_function``'s output is not the graph's buffer: two calls give two tensors that both keep
    their values."""
    _graph_twin(monkeypatch)
    w = torch.randn(3, 3, dtype=D, requires_grad=True)
    square = cuda_graphs.graphed_function(lambda a: a @ a, w)
    first = square(w)
    with torch.no_grad():
        w.mul_(2.0)
    second = square(w)
    assert torch.allclose(second, 4.0 * first) and first.data_ptr() != second.data_ptr()
