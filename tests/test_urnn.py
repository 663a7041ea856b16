"""The uRNN (Arjovsky et al.): its transition as the printed product, its modReLU scan against the autograd
loop and finite differences, modReLU's floor, and older files loading."""

from __future__ import annotations

import pytest
import torch

from spectral_analysis.nn import build_model
from spectral_analysis.nn.modrelu import modrelu
from spectral_analysis.nn.unitary_scan import unitary_scan
from spectral_analysis.nn.urnn import UnitaryTransition
from spectral_analysis.train import load_checkpoint, save_checkpoint

D = torch.float64


def test_urnn_transition_is_the_printed_product_and_unitary():
    torch.manual_seed(2)
    T = UnitaryTransition(8).double()
    n = 8
    F = torch.fft.fft(torch.eye(n, dtype=torch.complex128), norm="ortho")  # the unitary DFT matrix
    phases = [torch.diag(torch.exp(1j * T.thetas[j].detach())) for j in range(3)]
    v = [torch.complex(T.reflections[j, 0], T.reflections[j, 1]).detach() for j in range(2)]
    eye = torch.eye(n, dtype=torch.complex128)
    R = [eye - 2 * torch.outer(x, x.conj()) / x.abs().square().sum() for x in v]
    Pi = torch.eye(n, dtype=torch.complex128)[T.permutation]
    W = phases[2] @ R[1] @ F.conj().T @ phases[1] @ Pi @ R[0] @ F @ phases[0]
    assert torch.allclose(T.complex_matrix(), W, atol=1e-12)
    assert torch.allclose(W.mH @ W, torch.eye(n, dtype=W.dtype), atol=1e-12)
    h = torch.randn(3, 2 * n, dtype=D)
    assert torch.allclose(T.apply_reference(h), h @ T.matrix().T, atol=1e-12)
    assert T.parameter_count() == 7 * n


def test_urnn_run_matches_a_complex_recurrence_and_is_refused_by_the_bound(tmp_path):
    torch.manual_seed(3)
    model = build_model("urnn", 3, 4, 2).double()
    with torch.no_grad():
        model.biases[0].copy_(torch.tensor([-0.5, 0.2, 0.0, 0.1]))
    x = torch.randn(2, 5, 3, dtype=D)
    W = model.transitions[0].complex_matrix()
    V = model.input_weights[0]
    Vc = torch.complex(V[:4], V[4:])
    start = model.start_states[0].detach()
    h = torch.complex(start[:4], start[4:]).expand(2, 4)  # the learned h_0
    assert float(start.abs().min()) > 0
    b = model.biases[0]
    for t in range(5):
        z = h @ W.T + x[:, t].to(torch.complex128) @ Vc.T
        h = torch.relu(z.abs() + b) / z.abs() * z  # modReLU
    assert torch.allclose(model.run(x).state[0], torch.cat([h.real, h.imag], dim=-1), atol=1e-12)
    assert model.parameter_counts()["total"] == sum(p.numel() for p in model.parameters())
    save_checkpoint(tmp_path / "urnn.safetensors", model, {"task": {"name": "addition"}})
    loaded = load_checkpoint(tmp_path / "urnn.safetensors").model
    assert torch.equal(loaded(x), model(x))
    from spectral_analysis.analysis import eq17_network

    with pytest.raises(ValueError, match="modReLU"):
        eq17_network(model)


@pytest.mark.slow
def test_the_urnn_scan_gradchecks_against_finite_differences():
    """The one-node time loop's hand-written backward, in torch's complex convention, for every input."""
    torch.manual_seed(5)
    T, B, n = 4, 3, 6
    C = torch.complex128
    u, h0 = torch.randn(T, B, n, dtype=C), torch.randn(B, n, dtype=C)
    phases, conjugates, scaled = (torch.randn(rows, n, dtype=C) for rows in (3, 2, 2))
    b = torch.linspace(-0.6, 0.4, n, dtype=D)
    inputs = [t.requires_grad_() for t in (u, h0, phases, conjugates, scaled, b)]
    permutation = torch.randperm(n)
    assert torch.autograd.gradcheck(lambda *a: unitary_scan(*a, permutation), inputs)


@pytest.mark.parametrize("layers", [1, 2])
def test_the_urnn_scan_matches_its_autograd_loop_in_outputs_and_every_gradient(layers):
    """``run``'s one-node scan against ``recurrence="loop"`` (autograd through each step), with a loss on
    every step's output (a batch-first, strided gradient into the node) and modReLU's b of both signs."""
    torch.manual_seed(6)
    model = build_model("urnn", 3, 6, 2, num_layers=layers).double()
    with torch.no_grad():
        model.biases[0].copy_(torch.linspace(-0.8, 0.3, 6))
    x, weights = torch.randn(4, 7, 3, dtype=D), torch.randn(4, 7, 2, dtype=D)
    h0 = torch.randn(layers, 4, 12, dtype=D)  # a given start state: its gradient is dL/dh_0 (the analyzers')
    results = {}
    for recurrence in ("loop", None):
        model.zero_grad()
        start = h0.clone().requires_grad_()
        run = model.run(x, start, recurrence=recurrence)
        ((run.outputs * weights).sum() + run.state.square().sum()).backward()
        trained = [p.grad.clone() for p in model.parameters() if p.grad is not None]  # not start_states
        results[recurrence] = run.outputs.detach(), [*trained, start.grad]
    (loop_out, loop_grads), (scan_out, scan_grads) = results["loop"], results[None]
    assert torch.allclose(scan_out, loop_out, atol=1e-12)
    for scan_grad, loop_grad in zip(scan_grads, loop_grads, strict=True):
        assert torch.allclose(scan_grad, loop_grad, atol=1e-12)
    assert all(float(g.abs().max()) > 0 for g in scan_grads)
    with pytest.raises(ValueError, match="recurrence 'torch' is not available"):
        model.run(x, recurrence="torch")  # PyTorch's fused kernel has no modReLU


def test_the_urnn_scan_passes_no_gradient_through_modrelus_floor():
    """From ``h_0 = 0``, zero inputs keep the pre-activations exactly 0 and then inputs of 1e-9 put them
    below modReLU's floor (|a| < 1e-6): the scan's gradients are finite and equal the loop's, which get the
    floor's zero gradient for ``|a|`` from autograd."""
    torch.manual_seed(7)
    model = build_model("urnn", 1, 4, 2).double()
    with torch.no_grad():
        model.biases[0].fill_(0.01)
    x, h0 = torch.zeros(2, 5, 1, dtype=D), torch.zeros(1, 2, 8, dtype=D)
    x[:, 2] = 1e-9 * torch.randn(2, 1, dtype=D)
    grads = {}
    for recurrence in ("loop", None):
        model.zero_grad()
        model.run(x, h0, recurrence=recurrence).outputs.square().sum().backward()
        grads[recurrence] = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    for scan_grad, loop_grad in zip(grads[None], grads["loop"], strict=True):
        assert torch.isfinite(scan_grad).all() and torch.allclose(scan_grad, loop_grad, atol=1e-12)


def test_modrelu_gradient_stays_finite_at_and_below_its_floor():
    """|z| = 0, subnormal |z| (where torch.abs's gradient z / |z| overflows) and ordinary |z|."""
    z = torch.tensor([0j, 1e-40 + 1e-40j, 1e-45 + 0j, 1e-30 + 0j], dtype=torch.complex64, requires_grad=True)
    b = torch.full((4,), 0.01, requires_grad=True)
    torch.view_as_real(modrelu(z, b)).sum().backward()
    assert torch.isfinite(torch.view_as_real(z.grad)).all() and torch.isfinite(b.grad).all()
    z = torch.randn(6, dtype=torch.complex128, requires_grad=True)
    b = torch.randn(6, dtype=D, requires_grad=True)
    assert torch.autograd.gradcheck(modrelu, (z, b))
    exact = torch.relu(z.abs() + b) / z.abs() * z
    assert torch.allclose(modrelu(z, b), exact, atol=1e-14)


def test_urnn_trains_through_a_long_run_of_zero_inputs():
    """Pixel MNIST's blank first rows: from h_0 = 0 the state stayed at z = 0, where modReLU's gradient
    gains b / eps a step, and the first Adam step made the gradient nan."""
    torch.manual_seed(0)
    model = build_model("urnn", 1, 16, 3)
    x = torch.zeros(8, 120, 1)
    x[:, 100:] = torch.rand(8, 20, 1)
    y = torch.randint(0, 3, (8,))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        optimizer.zero_grad()
        nn_loss = torch.nn.functional.cross_entropy(model.run(x).outputs[:, -1], y)
        nn_loss.backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        assert torch.isfinite(grads).all()
        optimizer.step()
    assert float(model.start_states.grad.abs().max()) > 0


def test_an_older_urnn_file_without_a_start_state_loads_starting_from_zero(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from spectral_analysis.train.checkpoint import tensor_digest

    model = build_model("urnn", 3, 4, 2).double()
    path = tmp_path / "urnn.safetensors"
    save_checkpoint(path, model, {"task": {"name": "addition"}})
    with safe_open(path, "pt") as handle:
        metadata = handle.metadata()
    tensors = load_file(path)
    del tensors["model/start_states"]  # as the toolkit wrote a uRNN before it learned h_0
    metadata["sha256"] = tensor_digest(tensors, metadata["spectral_analysis"])
    save_file(tensors, path, metadata=metadata)
    loaded = load_checkpoint(path).model
    assert torch.equal(loaded.start_states, torch.zeros_like(model.start_states))
    x = torch.randn(2, 5, 3, dtype=D)
    assert torch.equal(loaded(x), loaded.run(x, torch.zeros(1, 2, 8, dtype=D)).outputs)


def test_the_urnn_input_matrix_starts_at_the_asked_scale_and_refuses_a_bad_one():
    """``input_std`` sets the input matrix's std (the authors' Glorot scale for Table 2's uRNN); without it
    the default 1/sqrt(2 n_i); a scale that is not a finite positive number is refused by name."""
    torch.manual_seed(0)
    authors = build_model("urnn", 1, 512, 10, input_std=0.0442).input_weights[0]
    default = build_model("urnn", 3, 512, 10).input_weights[0]
    assert authors.shape == (1024, 1) and abs(authors.std().item() - 0.0442) < 0.003
    assert abs(default.std().item() - 6 ** -0.5) < 0.02
    for bad in (0.0, -1.0, float("nan"), True):
        with pytest.raises(ValueError, match="input_std must be a finite number > 0"):
            build_model("urnn", 1, 8, 10, input_std=bad)
