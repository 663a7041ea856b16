"""The fused Triton recurrence (nn.fused_recurrence) against the float64 reference loop, forward and backward.

Without a GPU the kernels run through Triton's interpreter (tests/conftest.py sets ``TRITON_INTERPRET=1``),
on small shapes: a hidden size that is not a power of two (W padded and masked) and a batch that leaves the
last program's block part empty, so the masks are exercised. On a GPU the same tests run the compiled kernels.
"""

import pytest
import torch

from spectral_analysis.nn import ACTIVATIONS, build_model
from spectral_analysis.nn.fused_recurrence import BLOCK_ROWS, STREAMED_TILE, launch_settings, recurrence_fused
from spectral_analysis.nn.time_loop import (
    FUSED_MAX_SIZE,
    FUSED_RESIDENT_SIZE,
    recurrence_loop,
    resolve_recurrence,
)

D = torch.float64
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _inputs(T: int, B: int, n: int, dtype: torch.dtype, seed: int):
    gen = torch.Generator().manual_seed(seed)
    xp = torch.randn(T, B, n, dtype=D, generator=gen)
    W = 0.9 * torch.linalg.qr(torch.randn(n, n, dtype=D, generator=gen))[0]
    h0 = torch.randn(B, n, dtype=D, generator=gen)
    weights = torch.randn(T, B, n, dtype=D, generator=gen)
    return [t.to(DEVICE, dtype) for t in (xp, W, h0, weights)]


def _run(route, xp, W, h0, weights, activation):
    xp, W, h0 = (t.clone().requires_grad_() for t in (xp, W, h0))
    H = route(xp, W, h0)
    grads = torch.autograd.grad((H * weights).sum(), (xp, W, h0))
    return H.detach(), grads


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fused_kernels_match_the_reference_loop(activation, dtype, monkeypatch):
    """Hidden states and the gradients of xp, W and h0 agree with the autograd loop in float64; float32 with
    IEEE products stays within float32 rounding (the relative error over 12 steps, not a per-element
    tolerance)."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    T, B, n = 12, BLOCK_ROWS + 4, 20
    xp, W, h0, weights = _inputs(T, B, n, dtype, seed=3)
    fused = _run(lambda a, w, h: recurrence_fused(a, w, h, activation, 0.3), xp, W, h0, weights, activation)
    reference = _run(lambda a, w, h: recurrence_loop(a.double(), h.double(), lambda s: s @ w.double().T,
                                                     activation, 0.3),
                     xp, W, h0, weights.double(), activation)
    tolerance = 1e-12 if dtype == torch.float64 else 1e-5
    assert _rel(fused[0].double(), reference[0]) < tolerance
    for got, want in zip(fused[1], reference[1], strict=True):
        assert got.dtype == dtype
        assert _rel(got.double(), want) < tolerance


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_streamed_w_matches_the_reference_loop(activation):
    """W streamed ``BLOCK_K`` rows a step (the route past n = 128), here 16 rows of a W padded to 32 (the
    second block half masked), each state read back from the slice its program stored: the same states
    and gradients as the autograd loop, in float64."""
    T, B, n = 9, BLOCK_ROWS + 4, 20
    xp, W, h0, weights = _inputs(T, B, n, D, seed=7)
    streamed = launch_settings(W) | {"BLOCK_K": 16}
    assert streamed["BLOCK_N"] == 32
    fused = _run(lambda a, w, h: recurrence_fused(a, w, h, activation, 0.3, streamed), xp, W, h0, weights,
                 activation)
    reference = _run(lambda a, w, h: recurrence_loop(a, h, lambda s: s @ w.T, activation, 0.3),
                     xp, W, h0, weights, activation)
    for got, want in zip((fused[0], *fused[1]), (reference[0], *reference[1]), strict=True):
        assert _rel(got, want) < 1e-12


def test_past_the_resident_size_the_kernels_stream_w():
    """On chip up to the resident size; past it a read of W is one 64 KB tile (64 rows at n = 256, 32 at
    n = 512, the fastest on an H100) with 8 warps in TF32, while IEEE products keep their 16 warps."""
    resident = launch_settings(torch.eye(FUSED_RESIDENT_SIZE))
    assert resident["BLOCK_K"] == resident["BLOCK_N"] == FUSED_RESIDENT_SIZE
    for n, rows in ((FUSED_RESIDENT_SIZE + 1, 64), (512, 32)):
        streamed = launch_settings(torch.eye(n))
        assert streamed["BLOCK_N"] == max(256, n) and streamed["BLOCK_K"] == rows
        assert streamed["BLOCK_K"] * streamed["BLOCK_N"] == STREAMED_TILE and streamed["num_stages"] == 1
        assert streamed["num_warps"] == 8 and streamed["PRECISION"] == "tf32"
        assert launch_settings(torch.eye(n, dtype=torch.float64))["num_warps"] == 16


@pytest.mark.slow
def test_fused_gradcheck():
    """Finite differences through the kernels themselves, on the smooth activation (the comparisons above
    hold every activation's gradient to the autograd loop's)."""
    xp, W, h0, _ = _inputs(4, 3, 6, D, seed=4)
    inputs = tuple(t.requires_grad_() for t in (xp, W, h0))
    assert torch.autograd.gradcheck(lambda a, w, h: recurrence_fused(a, w, h, "tanh", 0.2), inputs)


@pytest.mark.parametrize("activation", ["leaky_relu", "tanh"])
def test_tf32_products_stay_within_tf32_rounding(activation):
    """Under ``torch.backends.cudnn.allow_tf32`` (PyTorch's default) float32 runs in TF32, as cuDNN's RNN
    does: 10 mantissa bits, so a relative error near 1e-3 over 12 steps and far from IEEE's 1e-7 on a
    GPU (the interpreter computes in float32 either way, so there only the bound is checked)."""
    assert torch.backends.cudnn.allow_tf32
    xp, W, h0, weights = _inputs(12, BLOCK_ROWS + 4, 20, torch.float32, seed=6)
    fused = _run(lambda a, w, h: recurrence_fused(a, w, h, activation, 0.3), xp, W, h0, weights, activation)
    reference = _run(lambda a, w, h: recurrence_loop(a.double(), h.double(), lambda s: s @ w.double().T,
                                                     activation, 0.3),
                     xp, W, h0, weights.double(), activation)
    for got, want in zip((fused[0], *fused[1]), (reference[0], *reference[1]), strict=True):
        assert _rel(got.double(), want) < 1e-2
    if DEVICE == "cuda":
        assert _rel(fused[0].double(), reference[0]) > 1e-6


def test_relu_ignores_the_leak_it_is_given():
    """relu and leaky_relu share one kernel code, relu with leak 0 whatever leak the caller passes."""
    xp, W, h0, _ = _inputs(5, 4, 8, D, seed=5)
    relu = recurrence_fused(xp, W, h0, "relu", 0.7)
    assert torch.equal(relu, recurrence_fused(xp, W, h0, "leaky_relu", 0.0))
    assert bool((relu >= 0).all())


@pytest.mark.parametrize(("name", "hidden"),
                         [("spectral", 16), ("rnn", 16), ("spectral", FUSED_RESIDENT_SIZE + 2)])
def test_a_model_on_the_fused_route_trains_as_on_the_scan(name, hidden):
    """Through ``build_model``: outputs and every parameter's gradient equal the scan's, two layers deep,
    with W on chip and (past the resident size) streamed by the settings the kernels pick themselves."""
    torch.manual_seed(0)
    options = {"m1": 4, "m2": 4} if name == "spectral" else {}
    model = build_model(name, 3, hidden, 2, num_layers=2, activation="leaky_relu", **options)
    model = model.double().to(DEVICE)
    x = torch.randn(3, 9, 3, dtype=D, device=DEVICE)
    runs = []
    for route in ("scan", "fused"):
        model.zero_grad()
        y = model.run(x, recurrence=route).outputs
        y.square().sum().backward()
        runs.append((y.detach(), [p.grad.clone() for p in model.parameters()]))
    assert _rel(runs[1][0], runs[0][0]) < 1e-12
    for got, want in zip(runs[1][1], runs[0][1], strict=True):
        assert _rel(got, want) < 1e-11


def test_auto_takes_the_fused_route_where_it_fits_on_cuda(monkeypatch):
    cuda = torch.device("cuda")
    assert resolve_recurrence("auto", "leaky_relu", cuda, 128) == "fused"
    assert resolve_recurrence("auto", "leaky_relu", cuda, 128, torch.float64) == "graph"  # IEEE products
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    assert resolve_recurrence("auto", "leaky_relu", cuda, 128) == "graph"
    monkeypatch.undo()
    assert resolve_recurrence("auto", "abs", cuda, FUSED_RESIDENT_SIZE) == "fused"
    assert resolve_recurrence("auto", "leaky_relu", cuda, FUSED_RESIDENT_SIZE + 1) == "graph"  # untimed
    assert resolve_recurrence("fused", "leaky_relu", cuda, FUSED_MAX_SIZE) == "fused"
    assert resolve_recurrence("auto", "leaky_relu", cuda, 128, torch.float16) == "graph"
    assert resolve_recurrence("auto", "relu", cuda, 128) == "torch"  # cuDNN, as fast on an H200
    assert resolve_recurrence("auto", "leaky_relu", torch.device("cpu"), 128) == "scan"


def test_the_fused_route_says_why_it_cannot_run(monkeypatch):
    cuda = torch.device("cuda")
    with pytest.raises(ValueError, match="n up to 512, and this layer has n = 1024"):
        resolve_recurrence("fused", "leaky_relu", cuda, 1024)
    with pytest.raises(ValueError, match="float32 or float64, not torch.bfloat16"):
        resolve_recurrence("fused", "tanh", cuda, 64, torch.bfloat16)
    with pytest.raises(ValueError, match="no modReLU"):
        resolve_recurrence("fused", "modrelu", cuda, 64)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="run on a CUDA device .* not on 'cpu'"):
        model = build_model("spectral", 2, 8, 2, activation="leaky_relu", recurrence="fused")
        model.run(torch.randn(2, 3, 2))
