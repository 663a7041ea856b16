"""CUDA paths: the blocked product, SVD map and models on a GPU match the CPU (skipped without one)."""

import pytest
import torch

from spectral_analysis.linalg import packed_reflector_product, svd_compose_packed, trapezoid_mask
from spectral_analysis.nn import MODEL_NAMES, RECURRENT_MODELS, build_model

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_blocked_product_on_cuda_matches_cpu_with_gradients():
    Y = torch.randn(256, 256, dtype=torch.float64) * trapezoid_mask(256, 256, dtype=torch.float64)
    cpu = Y.clone().requires_grad_(True)
    gpu = Y.cuda().requires_grad_(True)
    G = torch.randn(256, 256, dtype=torch.float64)
    (packed_reflector_product(cpu) * G).sum().backward()
    (packed_reflector_product(gpu) * G.cuda()).sum().backward()
    assert torch.allclose(packed_reflector_product(gpu).cpu(), packed_reflector_product(cpu), atol=1e-12)
    assert torch.allclose(gpu.grad.cpu(), cpu.grad, atol=1e-10)


def test_svd_map_on_cuda():
    Yu = torch.randn(64, 16, device="cuda") * trapezoid_mask(64, 16, device="cuda", dtype=torch.float32)
    Yv = torch.randn(48, 16, device="cuda") * trapezoid_mask(48, 16, device="cuda", dtype=torch.float32)
    sigma = torch.rand(48, device="cuda") + 0.5
    W = svd_compose_packed(Yu, Yv, sigma)
    assert W.is_cuda and W.shape == (64, 48)
    assert torch.allclose(torch.linalg.svdvals(W.double()).cpu(),
                          sigma.double().sort(descending=True).values.cpu(), atol=1e-4)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_model_trains_one_step_on_cuda(name):
    torch.manual_seed(0)
    model = build_model(name, 3, 16, 2).cuda()
    x = torch.randn(4, 9, 3, device="cuda") if name in RECURRENT_MODELS else torch.randn(4, 3, device="cuda")
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss = model(x).square().mean()
    loss.backward()
    before = [p.detach().clone() for p in model.parameters()]
    opt.step()
    model.constrain_()
    assert torch.isfinite(loss)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.parametrize("activation", ["relu", "tanh", "leaky_relu", "abs"])
def test_cuda_routes_match_the_cpu_reference(activation):
    """auto on CUDA is cuDNN (relu, tanh) or the graph-replayed scan; both match the CPU reflector loop."""
    torch.manual_seed(1)
    model = build_model("spectral", 3, 12, 2, m1=6, m2=12, activation=activation).double()
    x = torch.randn(5, 30, 3, dtype=torch.float64)
    reference = model.run(x, recurrence="reflector").outputs
    reference.square().sum().backward()
    ref_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.cuda()
    out = model(x.cuda())
    out.square().sum().backward()
    assert torch.allclose(out.cpu(), reference, rtol=1e-9, atol=1e-10)
    for p, g in zip(model.parameters(), ref_grads, strict=True):
        assert torch.allclose(p.grad.cpu(), g, rtol=1e-8, atol=1e-9)


def test_bound_and_analyze_run_on_cuda(tmp_path):
    from torch import nn as torch_nn

    from spectral_analysis.analysis.report import analyze_subject
    from spectral_analysis.data.arrays import UserData
    from spectral_analysis.io import load

    torch.manual_seed(0)
    rnn = torch_nn.RNN(2, 8, batch_first=True)
    subject = load(rnn, device="cuda")
    data = UserData(torch.randn(6, 10, 2), torch.randint(0, 8, (6,)), "test")
    report = analyze_subject(subject, samples=3, trials=2, user_data=data)
    cpu = analyze_subject(load(rnn), samples=3, trials=2, user_data=data)
    assert abs(report["lyapunov_exponents"][0] - cpu["lyapunov_exponents"][0]) < 1e-6


def test_replay_captures_once_per_key_reads_new_inputs_and_keeps_the_latest_graphs():
    from spectral_analysis.nn import cuda_graphs

    cuda_graphs.clear()
    calls = []

    def body(b):
        calls.append(1)  # Python runs only at the warm-up and the capture, never at a replay
        torch.mul(b["x"], 2, out=b["y"])

    def outputs():
        return {"y": torch.empty(3, device="cuda")}

    first = cuda_graphs.replay("k", outputs, body, {"x": torch.ones(3, device="cuda")})
    assert first["y"].tolist() == [2.0, 2.0, 2.0] and len(calls) == 2
    second = cuda_graphs.replay("k", outputs, body, {"x": torch.arange(3.0, device="cuda")})
    assert second["y"] is first["y"] and second["y"].tolist() == [0.0, 2.0, 4.0] and len(calls) == 2
    for i in range(cuda_graphs.MAX_GRAPHS):  # "k" is the least recently used: dropped
        cuda_graphs.replay(("other", i), outputs, body, {"x": torch.ones(3, device="cuda")})
    calls.clear()
    assert cuda_graphs.replay("k", outputs, body, {"x": torch.ones(3, device="cuda")})["y"].sum() == 6
    assert len(calls) == 2
    cuda_graphs.clear()


@pytest.mark.parametrize("activation", ["leaky_relu", "relu", "tanh", "abs", "identity"])
def test_graph_route_equals_the_scan_across_shapes_and_new_inputs(activation):
    """recurrence='graph' against the eager scan (float64): hidden states and every gradient, on a shape
    met first, met again with new inputs (a replay), and a second shape (its own graphs)."""
    from spectral_analysis.nn import cuda_graphs
    from spectral_analysis.nn.time_loop import recurrence_scan

    cuda_graphs.clear()
    torch.manual_seed(0)
    for T, B in ((30, 4), (30, 4), (12, 5)):
        xp = torch.randn(T, B, 6, dtype=torch.float64, device="cuda", requires_grad=True)
        W = (0.5 * torch.randn(6, 6, dtype=torch.float64, device="cuda")).requires_grad_()
        h0 = torch.randn(B, 6, dtype=torch.float64, device="cuda", requires_grad=True)
        weights = torch.randn(T, B, 6, dtype=torch.float64, device="cuda")
        runs = []
        for graphs in (False, True):
            H = recurrence_scan(xp, W, h0, activation, 0.1, graphs=graphs)
            runs.append((H.detach(), torch.autograd.grad((H * weights).sum(), (xp, W, h0))))
        (H1, g1), (H2, g2) = runs
        assert torch.allclose(H2, H1, rtol=0, atol=1e-12), (T, B)
        for a, b in zip(g2, g1, strict=True):
            assert torch.allclose(a, b, rtol=1e-12, atol=1e-12), (T, B)
    cuda_graphs.clear()


GRAPH_MODELS = {"spectral": ("spectral", 16, {"activation": "leaky_relu"}),
                "rnn": ("rnn", 16, {"activation": "leaky_relu"}),
                "kru": ("kru", 16, {"activation": "leaky_relu"}),
                "kru modrelu dense": ("kru", 16, {"complex": True, "activation": "modrelu"}),
                "kru modrelu two blocks": ("kru", 256, {"complex": True, "activation": "modrelu"})}


@pytest.mark.parametrize("name", GRAPH_MODELS)
def test_graph_route_trains_as_the_scan_does(name):
    """Three Adam steps of a model by recurrence='graph' and by 'scan' from the same start end at the same
    parameters: every replay reads the step's new W (KRU with modReLU: its dense and two-block loops)."""
    model_name, hidden, options = GRAPH_MODELS[name]
    finals = []
    for route in ("scan", "graph"):
        torch.manual_seed(0)
        model = build_model(model_name, 2, hidden, 3, recurrence=route, **options).cuda()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        gen = torch.Generator(device="cuda").manual_seed(1)
        for _ in range(3):
            x = torch.randn(8, 40, 2, device="cuda", generator=gen)
            opt.zero_grad()
            model.run(x).last_outputs().square().mean().backward()
            opt.step()
        finals.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.allclose(finals[1], finals[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["kronecker tanh", "kronecker modrelu", "dense modrelu"])
def test_kru_graph_loops_equal_their_eager_runs_across_shapes(name):
    """KRU's loops replayed as CUDA graphs against their eager runs (float64): states and every gradient,
    on a shape met first, met again with new inputs, and a second shape."""
    from spectral_analysis.nn import cuda_graphs
    from spectral_analysis.nn.kronecker_scan import kronecker_scan
    from spectral_analysis.nn.modrelu import dense_modrelu_scan

    cuda_graphs.clear()
    torch.manual_seed(0)
    cfg = {"dtype": torch.float64, "device": "cuda"}
    for T, B in ((30, 4), (30, 4), (12, 5)):
        if name == "dense modrelu":
            args = [torch.randn(T, B, 8, **cfg), 0.5 * torch.randn(8, 8, **cfg), torch.randn(B, 8, **cfg),
                    0.1 * torch.randn(4, **cfg)]

            def scan(a, graphs):
                return dense_modrelu_scan(*a, graphs)
        else:
            modrelu = name == "kronecker modrelu"
            planes = 2 if modrelu else 1
            args = [torch.randn(T, B, planes * 6, **cfg), torch.randn(B, planes * 6, **cfg),
                    *(0.5 * torch.randn(k, k, **cfg) for k in ((2, 2, 3, 3) if modrelu else (2, 3))),
                    *((0.1 * torch.randn(6, **cfg),) if modrelu else ())]

            def scan(a, graphs, modrelu=modrelu):
                factors = [torch.complex(a[2], a[3]), torch.complex(a[4], a[5])] if modrelu else a[2:4]
                return kronecker_scan(a[0], factors, a[1], "modrelu" if modrelu else "tanh", 0.0,
                                      bias=a[6] if modrelu else None, graphs=graphs)
        args = [a.requires_grad_() for a in args]
        weights = torch.randn_like(args[0])
        runs = []
        for graphs in (False, True):
            H = scan(args, graphs)
            runs.append((H.detach(), torch.autograd.grad((H * weights).sum(), args)))
        (H1, g1), (H2, g2) = runs
        assert torch.allclose(H2, H1, rtol=0, atol=1e-12), (T, B)
        for a, b in zip(g2, g1, strict=True):
            assert torch.allclose(a, b, rtol=1e-12, atol=1e-12), (T, B)
    cuda_graphs.clear()


@pytest.mark.parametrize("size", [16, 200])  # W formed by the fused product (n <= 128) and by the blocked one
def test_replayed_weight_formation_trains_as_the_eager_one(size):
    """``graph_weight_formation``'s real capture: three Adam steps of a float64 Spectral-RNN end at the
    eager model's parameters, from one capture, and two backward passes accumulate the eager gradients."""
    from spectral_analysis.nn import graph_weight_formation

    finals, grads = [], []
    for graphed in (False, True):
        torch.manual_seed(0)
        model = build_model("spectral", 2, size, 3, m1=4, m2=5).to(device="cuda", dtype=torch.float64)
        graph_weight_formation(model, graphed)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        gen = torch.Generator(device="cuda").manual_seed(1)
        for _ in range(3):
            x = torch.randn(8, 20, 2, device="cuda", dtype=torch.float64, generator=gen)
            opt.zero_grad(set_to_none=True)
            model(x).square().mean().backward()
            opt.step()
        finals.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
        model(x).square().mean().backward()  # a second pass onto the last step's gradients
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert torch.allclose(finals[1], finals[0], rtol=1e-10, atol=1e-12)
    assert torch.allclose(grads[1], grads[0], rtol=1e-10, atol=1e-12)
