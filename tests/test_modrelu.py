"""KRU with its paper's modReLU units: the real-form modReLU scans against their autograd twins, the
model's routes, its refusals, and the behaviour the paper reports for it (Jose et al., Section 4.1)."""

from __future__ import annotations

import math

import pytest
import torch

from spectral_analysis.linalg import complex_vector, kron_matrix, real_matrix, real_vector
from spectral_analysis.nn import build_model
from spectral_analysis.nn.kronecker_scan import kronecker_scan
from spectral_analysis.nn.modrelu import dense_modrelu_scan, modrelu
from spectral_analysis.nn.modrelu_rnn import ModReLURNN
from spectral_analysis.nn.peer_transitions import KRONECKER_SCAN_MIN_SIZE
from spectral_analysis.train import TrainConfig, load_checkpoint, train

D = torch.float64


def _modrelu_loop(xp, W, h0, b):
    """The reference: ``h_t = modReLU(W h_(t-1) + xp_t, b)`` on complex states under autograd."""
    h, states = complex_vector(h0), []
    for u in complex_vector(xp).unbind(0):
        h = modrelu(h @ W.mT + u, b)
        states.append(h)
    return real_vector(torch.stack(states))


def _inputs(gen, n, T=5, batch=3):
    xp = torch.randn(T, batch, 2 * n, generator=gen, dtype=D, requires_grad=True)
    h0 = torch.randn(batch, 2 * n, generator=gen, dtype=D, requires_grad=True)
    b = (torch.randn(n, generator=gen, dtype=D) - 1).requires_grad_()  # some units below their threshold
    return xp, h0, b


def test_both_modrelu_scans_match_the_complex_autograd_loop_in_states_and_every_gradient():
    """The dense scan on W's real form and the two-block Kronecker scan against the loop on complex
    states, whose modReLU is the uRNN's (float64; a random W, so not unitary, and thresholds of both signs,
    so some units are cut to zero)."""
    gen = torch.Generator().manual_seed(0)
    factors = [(0.8 * torch.randn(2, 2, generator=gen, dtype=torch.complex128)).requires_grad_()
               for _ in range(4)]
    xp, h0, b = _inputs(gen, 16)
    weight = torch.randn(5, 3, 32, generator=gen, dtype=D)
    leaves = [xp, h0, b, *factors]
    runs = {"loop": _modrelu_loop(xp, kron_matrix(factors), h0, b),
            "dense": dense_modrelu_scan(xp, real_matrix(kron_matrix(factors)), h0, b),
            "kronecker": kronecker_scan(xp, factors, h0, "modrelu", 0.0, bias=b)}
    grads = {name: torch.autograd.grad((H * weight).sum(), leaves) for name, H in runs.items()}
    assert float((runs["loop"] == 0).double().mean()) > 0.05  # the threshold acted
    for name in ("dense", "kronecker"):
        assert torch.allclose(runs[name], runs["loop"], atol=1e-12)
        for fast, slow in zip(grads[name], grads["loop"], strict=True):
            assert torch.allclose(fast, slow, atol=1e-10)
    assert all(float(g.abs().max()) > 0 for g in grads["kronecker"])


def test_the_modrelu_scans_pass_no_gradient_through_the_floor_and_match_the_loop_there():
    """From ``h_0 = 0`` with zero inputs the pre-activations stay exactly 0, and inputs of 1e-9 put them
    below modReLU's floor (|z| < 1e-6): both scans' gradients are finite and equal the complex loop's,
    whose floor gets a zero gradient for ``|z|`` from autograd (the step-wise backward masks it)."""
    gen = torch.Generator().manual_seed(3)
    factors = [torch.randn(2, 2, generator=gen, dtype=torch.complex128).requires_grad_() for _ in range(4)]
    xp = torch.zeros(6, 2, 32, dtype=D)
    xp[2] = 1e-9 * torch.randn(2, 32, generator=gen, dtype=D)
    xp[4] = torch.randn(2, 32, generator=gen, dtype=D)  # and ordinary units after them
    xp.requires_grad_()
    h0 = torch.zeros(2, 32, dtype=D, requires_grad=True)
    b = torch.full((16,), 0.01, dtype=D, requires_grad=True)
    leaves = [xp, h0, b, *factors]
    runs = {"loop": _modrelu_loop(xp, kron_matrix(factors), h0, b),
            "dense": dense_modrelu_scan(xp, real_matrix(kron_matrix(factors)), h0, b),
            "kronecker": kronecker_scan(xp, factors, h0, "modrelu", 0.0, bias=b)}
    grads = {name: torch.autograd.grad(H.square().sum() + H.sum(), leaves) for name, H in runs.items()}
    for name in ("dense", "kronecker"):
        for fast, slow in zip(grads[name], grads["loop"], strict=True):
            assert torch.isfinite(fast).all() and torch.allclose(fast, slow, atol=1e-10)
    assert float(grads["loop"][0][2].abs().max()) > 0  # a gradient reaches the floored step's inputs


def test_the_modrelu_scans_gradcheck_against_finite_differences():
    gen = torch.Generator().manual_seed(1)
    factors = [torch.randn(2, 2, generator=gen, dtype=torch.complex128, requires_grad=True) for _ in range(3)]
    xp, h0, b = _inputs(gen, 8, T=4, batch=2)
    W = torch.randn(16, 16, generator=gen, dtype=D, requires_grad=True) / 4
    assert torch.autograd.gradcheck(dense_modrelu_scan, (xp, W, h0, b))
    assert torch.autograd.gradcheck(lambda x, h, c, *f: kronecker_scan(x, f, h, "modrelu", 0.0, bias=c),
                                    (xp, h0, b, *factors))


def test_kru_modrelu_models_take_their_size_s_scan_and_match_the_factor_by_factor_loop(monkeypatch):
    """Below the two-block size the model forms W for the dense modReLU scan, from it the Kronecker scan
    takes it; both match the per-step loop that applies W factor by factor (outputs, every gradient)."""
    import spectral_analysis.nn.peer_transitions as peers

    calls = []
    monkeypatch.setattr(peers, "kronecker_scan", lambda *a, **k: calls.append(1) or kronecker_scan(*a, **k))
    torch.manual_seed(0)
    x = torch.randn(2, 6, 3, dtype=D)
    for n, expected_calls in ((8, 0), (KRONECKER_SCAN_MIN_SIZE // 2, 1)):
        calls.clear()
        model = build_model("kru", 3, n, 2, complex=True, activation="modrelu").double()
        assert isinstance(model, ModReLURNN) and model.hidden_size == 2 * n
        results = {}
        for route in ("auto", "loop"):
            model.zero_grad()
            run = model.run(x, recurrence=route)
            run.outputs.square().sum().backward()
            results[route] = run.outputs.detach(), [p.grad.clone() for p in model.parameters()]
        assert len(calls) == expected_calls
        (fast, fast_grads), (slow, slow_grads) = results["auto"], results["loop"]
        assert torch.allclose(fast, slow, atol=1e-10)
        for a, b in zip(fast_grads, slow_grads, strict=True):
            assert torch.allclose(a, b, atol=1e-9)
        assert torch.allclose(model(x), model.run(x, recurrence="loop").outputs, atol=1e-10)


def test_kru_modrelus_input_matrix_starts_at_the_asked_scale():
    """KRU's modReLU net takes ``input_std`` as the uRNN's does (the uRNN authors' Glorot scale, 0.044 for
    pixel MNIST at N = 512); without it, 1/sqrt(2 n_i)."""
    torch.manual_seed(0)
    authors = build_model("kru", 1, 512, 10, complex=True, activation="modrelu", input_std=0.0442)
    default = build_model("kru", 1, 512, 10, complex=True, activation="modrelu")
    assert abs(authors.input_weights[0].std().item() - 0.0442) < 0.003
    assert abs(default.input_weights[0].std().item() - 2 ** -0.5) < 0.05


def test_kru_modrelu_refusals_name_the_problem():
    with pytest.raises(ValueError, match="complex units"):
        build_model("kru", 2, 8, 2, activation="modrelu")  # real factors
    with pytest.raises(ValueError, match="input_std must be a finite number > 0"):
        build_model("kru", 2, 8, 2, complex=True, activation="modrelu", input_std=-0.1)
    with pytest.raises(ValueError, match="recurrence 'torch' is not available"):
        build_model("kru", 2, 8, 2, complex=True, activation="modrelu", recurrence="torch")
    factors = [torch.randn(2, 2, dtype=torch.complex64) for _ in range(3)]
    xp, h0 = torch.randn(2, 1, 16), torch.randn(1, 16)
    with pytest.raises(ValueError, match="bias"):
        kronecker_scan(xp, factors, h0, "modrelu", 0.0)
    with pytest.raises(ValueError, match="bias"):
        kronecker_scan(xp, factors, h0, "relu", 0.0, bias=torch.zeros(8))


@pytest.mark.slow
def test_frozen_kru_with_modrelu_learns_copy_and_its_checkpoint_reloads(tmp_path):
    """KRU Section 4.1: with the recurrent matrix a fixed random unitary one and only the input, the bias
    and the read-out trained, modReLU units learn the copy problem. The recall accuracy (the 10 symbols
    after the delimiter) rises far above chance (1/8) here; with ReLU on the real and imaginary parts the
    same run stayed at chance (0.12 after 900 steps at T = 100, measured on 2026-11-26)."""
    out = tmp_path / "kru"
    summary = train(TrainConfig(
        model="kru", task="copy", out=str(out), hidden=32, steps=300, batch_size=20, lr=1e-3,
        optimizer="rmsprop", optimizer_options={"alpha": 0.9}, freeze=["transitions.*"], seed=0,
        model_options={"complex": True, "activation": "modrelu"}, record_every=100, eval_every=300,
        checkpoint_every=300, eval_batches=2, test_batches=2, progress=False,
        task_options={"length": 30, "train_size": 2000, "valid_size": 100, "test_size": 100}))
    test = summary["test"]
    assert test["accuracy_recall"] > 0.5 and test["cross_entropy"] < 10 * math.log(8) / 50 / 2
    loaded = load_checkpoint(out / "last.safetensors").model
    assert isinstance(loaded, ModReLURNN) and loaded.config["options"]["activation"] == "modrelu"
