"""KRU's Kronecker product, DizzyRNN's packed Givens rotations, their transitions and models."""

from __future__ import annotations

import json
import math

import pytest
import torch

from spectral_analysis.cli import main
from spectral_analysis.linalg import (
    complex_vector,
    givens_apply,
    givens_apply_transpose,
    givens_matrix,
    kron_matrix,
    kron_matvec,
    packed_pairs,
    real_matrix,
    real_vector,
    rotation_count,
)
from spectral_analysis.nn import build_model
from spectral_analysis.nn.kronecker_scan import kronecker_blocks, kronecker_scan
from spectral_analysis.nn.peer_transitions import (
    KRONECKER_SCAN_MIN_SIZE,
    GivensSVDTransition,
    GivensTransition,
    KroneckerTransition,
    default_factor_sizes,
)
from spectral_analysis.nn.time_loop import recurrence_loop, recurrence_scan
from spectral_analysis.train import TrainConfig, load_checkpoint, save_checkpoint, train

D = torch.float64


@pytest.mark.parametrize(
    "shapes, dtype",
    [([(2, 2)] * 5, D), ([(3, 2), (2, 4), (1, 3)], D), ([(2, 2)] * 3, torch.complex128), ([(4, 4)], D)],
)
def test_kron_matvec_matches_the_dense_product_and_gradcheck(shapes, dtype):
    gen = torch.Generator().manual_seed(0)
    factors = [torch.randn(p, q, generator=gen, dtype=dtype) for p, q in shapes]
    Q = math.prod(q for _, q in shapes)
    h = torch.randn(3, 2, Q, generator=gen, dtype=dtype)
    assert torch.allclose(kron_matvec(factors, h), h @ kron_matrix(factors).mT, atol=1e-12)
    leaves = [f.clone().requires_grad_() for f in factors] + [h.clone().requires_grad_()]
    assert torch.autograd.gradcheck(lambda *x: kron_matvec(list(x[:-1]), x[-1]), leaves)


def test_kron_errors_are_named():
    with pytest.raises(ValueError, match="at least one factor"):
        kron_matvec([], torch.zeros(2))
    with pytest.raises(ValueError, match="has length 3"):
        kron_matvec([torch.eye(2), torch.eye(2)], torch.zeros(3))
    with pytest.raises(ValueError, match="must be a matrix"):
        kron_matrix([torch.zeros(2, 2, 2)])


def test_kronecker_blocks_split_where_a_plus_b_is_smallest_and_multiply_back():
    gen = torch.Generator().manual_seed(1)
    factors = [torch.randn(p, p, generator=gen, dtype=D) for p in (2, 2, 3, 2, 2, 2)]
    A, B = kronecker_blocks(factors)
    assert (A.shape[0], B.shape[0]) in ((12, 8), (8, 12))  # 96 = 12 x 8 is the balanced split
    assert torch.allclose(torch.kron(A, B), kron_matrix(factors), atol=1e-12)
    with pytest.raises(ValueError, match="at least two factors"):
        kronecker_blocks(factors[:1])
    with pytest.raises(ValueError, match="square factors"):
        kronecker_blocks([torch.zeros(2, 3), torch.zeros(3, 3)])


@pytest.mark.parametrize("complex_factors", [False, True])
@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "tanh", "identity"])
@pytest.mark.parametrize("batch_first_loss", [False, True])
def test_kronecker_scan_matches_the_dense_scan_and_the_plain_loop(complex_factors, activation,
                                                                  batch_first_loss):
    """The fast two-block scan against its twins: the dense scan on the formed W and the Python loop
    under autograd (states and every gradient), in float64; also with a loss laid out batch first, whose
    gradient reaches the scan as a non-contiguous tensor (a model reading its states batch first)."""
    gen = torch.Generator().manual_seed(2)
    dtype = torch.complex128 if complex_factors else D
    factors = [(0.7 * torch.randn(2, 2, generator=gen, dtype=dtype)).requires_grad_() for _ in range(4)]
    size = 32 if complex_factors else 16
    xp = torch.randn(6, 3, size, generator=gen, dtype=D, requires_grad=True)
    h0 = torch.randn(3, size, generator=gen, dtype=D, requires_grad=True)
    weight = torch.randn(6, 3, size, generator=gen, dtype=D)
    if batch_first_loss:
        weight = weight.transpose(0, 1).contiguous().transpose(0, 1)

    def dense_weight():
        W = kron_matrix(factors)
        return real_matrix(W) if complex_factors else W

    fast = kronecker_scan(xp, factors, h0, activation, 0.2)
    dense = recurrence_scan(xp, dense_weight(), h0, activation, 0.2)
    W = dense_weight()
    loop = recurrence_loop(xp, h0, lambda h: h @ W.mT, activation, 0.2)
    leaves = [xp, h0, *factors]
    grads = [torch.autograd.grad((H * weight).sum(), leaves) for H in (fast, dense, loop)]
    for H, g in zip((dense, loop), grads[1:], strict=True):
        assert torch.allclose(fast, H, atol=1e-10)
        for a, b in zip(grads[0], g, strict=True):
            assert torch.allclose(a, b, atol=1e-9)


def test_kronecker_scan_gradcheck_and_refusals():
    gen = torch.Generator().manual_seed(3)
    factors = [torch.randn(2, 2, generator=gen, dtype=torch.complex128, requires_grad=True) for _ in range(3)]
    xp = torch.randn(4, 2, 16, generator=gen, dtype=D, requires_grad=True)
    h0 = torch.randn(2, 16, generator=gen, dtype=D, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, h, *f: kronecker_scan(x, f, h, "tanh", 0.0), (xp, h0, *factors))
    with pytest.raises(ValueError, match="activations"):
        kronecker_scan(xp, factors, h0, "abs", 0.0)


def test_kru_models_take_the_kronecker_scan_from_its_size_and_match_the_other_routes(monkeypatch):
    calls = []
    import spectral_analysis.nn.peer_transitions as peers

    monkeypatch.setattr(peers, "kronecker_scan", lambda *a, **k: calls.append(1) or kronecker_scan(*a, **k))
    x = torch.randn(2, 5, 3)
    small = build_model("kru", 3, 8, 2, complex=True)  # real form 16: the dense scan
    small.run(x, recurrence="scan")
    assert calls == []
    torch.manual_seed(0)
    large = build_model("kru", 3, KRONECKER_SCAN_MIN_SIZE // 2, 2, complex=True, activation="relu")
    fast = large.run(x, recurrence="scan").outputs
    assert calls == [1]
    assert torch.allclose(fast, large.run(x, recurrence="loop").outputs, atol=1e-4)
    assert torch.allclose(fast, large.run(x, recurrence="reflector").outputs, atol=1e-4)
    grads = []
    for route in ("scan", "loop"):  # backward through the model: its gradients arrive strided
        large.zero_grad()
        large.run(x, recurrence=route).outputs[:, -1].square().sum().backward()
        grads.append([p.grad.clone() for p in large.parameters()])
    for fast_grad, loop_grad in zip(*grads, strict=True):
        assert torch.allclose(fast_grad, loop_grad, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8])
def test_round_robin_schedule_rotates_every_pair_once(n):
    schedule = packed_pairs(n)
    assert len(schedule) == rotation_count(n) == (n - 1 if n % 2 == 0 else n)
    seen = []
    for a, b in schedule:
        assert len(set(a) | set(b)) == 2 * len(a)  # disjoint pairs in one packed rotation
        seen += list(zip(a, b, strict=True))
    assert sorted(seen) == [(i, j) for i in range(n) for j in range(i + 1, n)]


def givens_by_hand(angles, schedule, n):
    """P_1 ... P_K from explicit R_ab(theta): cos on (a,a),(b,b), sin at (a,b), -sin at (b,a)."""
    W = torch.eye(n, dtype=D)
    for theta, (a, b) in zip(angles, schedule, strict=False):
        P = torch.eye(n, dtype=D)
        for t, i, j in zip(theta, a, b, strict=True):
            R = torch.eye(n, dtype=D)
            R[i, i] = R[j, j] = torch.cos(t)
            R[i, j], R[j, i] = torch.sin(t), -torch.sin(t)
            P = P @ R
        W = W @ P
    return W


@pytest.mark.parametrize("n, K", [(4, 3), (5, 5), (6, 2)])
def test_givens_product_matches_the_paper_rotations(n, K):
    schedule = packed_pairs(n)
    gen = torch.Generator().manual_seed(n)
    angles = [torch.randn(len(a), generator=gen, dtype=D) for a, _ in schedule[:K]]
    W = givens_matrix(angles, schedule, n)
    assert torch.allclose(W, givens_by_hand(angles, schedule, n), atol=1e-12)
    assert torch.allclose(W @ W.T, torch.eye(n, dtype=D), atol=1e-12)
    assert float(torch.linalg.det(W)) == pytest.approx(1.0)
    h = torch.randn(3, n, generator=gen, dtype=D)
    assert torch.allclose(givens_apply_transpose(angles, schedule, h), h @ W, atol=1e-12)
    leaves = [a.clone().requires_grad_() for a in angles]
    assert torch.autograd.gradcheck(lambda *t: givens_apply(list(t), schedule, h), leaves)


@pytest.mark.parametrize(
    "transition",
    [
        lambda: KroneckerTransition(8),
        lambda: KroneckerTransition(8, complex_factors=True),
        lambda: KroneckerTransition(12, [3, 4]),
        lambda: GivensTransition(5),
        lambda: GivensTransition(6, 2),
        lambda: GivensSVDTransition(4),
    ],
)
def test_structured_product_singular_values_and_counts(transition):
    torch.manual_seed(0)
    T = transition().double()
    with torch.no_grad():
        for p in T.parameters():
            p.add_(0.1 * torch.randn_like(p))  # off the unitary initialization
    h = torch.randn(4, T.size, dtype=D)
    W = T.matrix()
    assert torch.allclose(T.apply_reference(h), h @ W.T, atol=1e-12)
    assert torch.allclose(T.singular_values(), torch.linalg.svdvals(W), atol=1e-10)
    expected = {
        KroneckerTransition: lambda t: sum(p * p for p in t.factor_sizes) * (2 if t.complex_factors else 1),
        GivensTransition: lambda t: sum(len(a) for a, _ in t.schedule[: t.rotations]),
        GivensSVDTransition: lambda t: t.U.parameter_count() + t.V.parameter_count() + t.size,
    }
    assert T.parameter_count() == expected[type(T)](T) == sum(p.numel() for p in T.parameters())


def test_kru_counts_and_soft_unitary_penalty():
    assert KroneckerTransition(128, complex_factors=True).parameter_count() == 8 * 7  # 8 log2 N
    assert default_factor_sizes(64) == [2] * 6 and default_factor_sizes(12) == [2, 2, 3]
    T = KroneckerTransition(8, complex_factors=True).double()
    assert float(T.spectral_penalty().detach()) < 1e-10  # unitary factors at init
    W = T.complex_matrix()
    assert torch.allclose(W.mH @ W, torch.eye(8, dtype=W.dtype), atol=1e-6)  # unitary factors -> unitary W
    with torch.no_grad():
        for p in T.parameters():
            p.mul_(1.3)
    before = T.spectral_penalty()
    before.backward()
    with torch.no_grad():
        for p in T.parameters():
            p.sub_(0.01 * p.grad)
    assert float(T.spectral_penalty().detach()) < float(before.detach())
    with pytest.raises(ValueError, match="multiply to 6"):
        KroneckerTransition(8, [2, 3])


def test_dizzy_theorems_3_and_4_norm_preserved_through_time():
    """abs + packed rotations, loss on the last state only: ||dL/dh_t|| is the same for every t, and
    with W_x a rotation product, ||dL/dx_t|| = ||dL/dh_(t-1)||."""
    torch.manual_seed(1)
    n, T = 6, 12
    model = build_model("dizzy", n, n, 1).double()
    with torch.no_grad():
        model.input_weights[0].copy_(GivensTransition(n).double().matrix())
    W, M, b = model.transition_matrix(0), model.input_weights[0], model.biases[0]
    x = torch.randn(T, n, dtype=D, requires_grad=True)
    h = torch.zeros(n, dtype=D)
    states = []
    for t in range(T):
        h = (W @ h + M @ x[t] + b).abs()
        h.retain_grad()
        states.append(h)
    (states[-1] ** 2).sum().backward()
    norms = torch.stack([s.grad.norm() for s in states[1:]])
    assert torch.allclose(norms, norms[-1].expand_as(norms), rtol=1e-12)
    assert torch.allclose(x.grad.norm(dim=1), norms[-1].expand(T), rtol=1e-12)


def test_registry_options_and_structured_route(tmp_path, monkeypatch):
    model = build_model("kru", 3, 8, 2, complex=True)
    assert model.hidden_size == 16 and model.config["options"]["complex"] is True
    x = torch.randn(2, 5, 3)
    structured = model.run(x, recurrence="reflector").outputs
    assert torch.allclose(model(x), structured, atol=1e-5)  # auto: the dense scan at this size
    monkeypatch.setattr(KroneckerTransition, "matrix", lambda self: (_ for _ in ()).throw(AssertionError))
    assert torch.allclose(model.run(x, recurrence="reflector").outputs, structured)  # W never formed
    monkeypatch.undo()
    save_checkpoint(tmp_path / "kru.safetensors", model, {"task": {"name": "addition"}})
    loaded = load_checkpoint(tmp_path / "kru.safetensors").model
    assert torch.equal(loaded(x), model(x))
    with pytest.raises(ValueError, match="rotations"):
        build_model("dizzy", 2, 6, 1, rotations=9)
    dizzy = build_model("dizzy", 2, 6, 1, svd=True, rotations=2)
    assert dizzy.transition_parameter_count() == 2 * (3 + 3) + 6
    assert float(dizzy.spectral_penalty().detach()) == 0.0


@pytest.mark.parametrize("name, options", [("kru", {"complex": True}), ("dizzy", {"svd": True}),
                                           ("urnn", {}), ("kru", {"complex": True, "activation": "modrelu"})])
@pytest.mark.slow
def test_peers_train_and_the_analyzers_run_on_their_checkpoints(name, options, tmp_path, capsys):
    out = tmp_path / name
    train(TrainConfig(model=name, task="copy", out=str(out), hidden=4, steps=10, model_options=options,
                      task_options={"length": 6, "train_size": 40, "valid_size": 20, "test_size": 20},
                      batch_size=20, record_every=5, eval_every=10, checkpoint_every=10, progress=False))
    checkpoint = str(out / "last.safetensors")
    assert main(["analyze", checkpoint, "--out", str(tmp_path / "analysis"), "--samples", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["jacobian_log10_norms"]) == 6 + 20 + 1  # copy task: T = length + 20
    assert (tmp_path / "analysis" / "jacobians.png").exists()
    if name == "urnn" or options.get("activation") == "modrelu":
        assert "modReLU" in report["bound"]["skipped"]
        assert main(["bound", checkpoint]) == 1
    else:
        assert math.isfinite(report["bound"]["log10_G"])
        assert main(["bound", checkpoint, "--json"]) == 0


def test_real_form_is_a_homomorphism():
    gen = torch.Generator().manual_seed(5)
    A = torch.randn(4, 4, dtype=torch.complex128, generator=gen)
    B = torch.randn(4, 4, dtype=torch.complex128, generator=gen)
    z = torch.randn(3, 4, dtype=torch.complex128, generator=gen)
    assert torch.allclose(real_vector(z) @ real_matrix(A).T, real_vector(z @ A.T), atol=1e-12)
    assert torch.allclose(real_matrix(A) @ real_matrix(B), real_matrix(A @ B), atol=1e-12)
    assert torch.equal(complex_vector(real_vector(z)), z)
