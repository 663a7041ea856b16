"""Jacobian products against autograd, gradient flow, Lyapunov exponents' closed forms, trajectories."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from spectral_analysis.analysis import (
    hidden_gradient_norms,
    jacobian_products,
    jacobians_by_autograd,
    lyapunov_exponents,
    read_trajectory,
    state_norms,
    state_trajectory,
    trajectory_table,
    transition_norm_bound,
)
from spectral_analysis.nn import build_model
from spectral_analysis.train import TrainConfig, train

CASES = [("rnn", {"activation": "tanh"}), ("rnn", {"num_layers": 2}), ("lstm", {}),
         ("lstm", {"num_layers": 2}),
         ("spectral", {"activation": "relu", "m1": 3, "m2": 2}), ("ornn", {"activation": "abs"}),
         ("irnn", {"activation": "leaky_relu"})]


@pytest.mark.parametrize("name, options", CASES)
def test_backward_recursion_equals_per_t_autograd_jacobians(name, options):
    torch.manual_seed(0)
    model = build_model(name, 3, 5, 2, **options).double()
    x = torch.randn(2, 7, 3, dtype=torch.float64)
    products = jacobian_products(model, x, keep_matrices=True)
    reference = jacobians_by_autograd(model, x)
    assert torch.allclose(products.matrices, reference, atol=1e-12)
    assert torch.allclose(jacobians_by_autograd(model, x, times=3), reference[:, :3])
    expected = torch.linalg.svdvals(reference).numpy()
    assert np.allclose(10.0 ** products.log10_singular_values, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name, options", [*CASES, ("urnn", {}), ("urnn", {"num_layers": 2})])
def test_step_function_reproduces_the_models_run(name, options):
    torch.manual_seed(7)
    model = build_model(name, 3, 5, 2, **options).double()
    x = torch.randn(2, 6, 3, dtype=torch.float64)
    states = state_trajectory(model, x)
    run = model.run(x)
    assert torch.allclose(model.top_hidden(states[:, 1:]), run.hidden[-1], atol=1e-12)
    assert torch.allclose(model.readout(states[:, 1:]), run.outputs, atol=1e-12)
    # flat_state lays out run's per-layer state (every layer, and an LSTM's cells) as the steps do
    assert torch.allclose(model.flat_state(run.state), states[:, -1], atol=1e-12)
    resumed = model.run(x[:, 3:], h0=model.run(x[:, :3]).state)
    assert torch.allclose(resumed.outputs, run.outputs[:, 3:], atol=1e-12)


def test_symbol_id_inputs_and_the_trajectory_match_the_model_run():
    torch.manual_seed(1)
    model = build_model("rnn", 6, 5, 6).double()
    ids = torch.randint(0, 6, (3, 8))
    states = state_trajectory(model, ids)
    assert torch.allclose(states[:, 1:], model.run(ids).hidden[0], atol=1e-12)
    products = jacobian_products(model, ids, keep_matrices=True)
    assert torch.allclose(products.matrices, jacobians_by_autograd(model, ids), atol=1e-12)


def test_state_norms_follow_a_growing_linear_recurrence_past_float32():
    """One input at t = 1, then h_t = (2Q) h_(t-1): ||h_t|| = 2^(t-1) ||U x_1||, beyond float32 by t = 130."""
    model = build_model("rnn", 2, 8, 2, activation="identity").double()
    Q, _ = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64))
    with torch.no_grad():
        model.transitions[0].weight.copy_(2 * Q)
        for name, parameter in model.named_parameters():
            if "bias" in name:
                parameter.zero_()
    x = torch.zeros(3, 300, 2, dtype=torch.float64)
    x[:, 0] = torch.randn(3, 2, dtype=torch.float64)
    sizes = state_norms(model, x)
    first = torch.linalg.vector_norm(model.run(x[:, :1]).hidden[0][:, 0], dim=-1).detach().numpy()
    expected = first[:, None] * 2.0 ** np.arange(300)
    assert sizes.shape == (3, 301) and np.all(sizes[:, 0] == 0)
    assert np.allclose(sizes[:, 1:], expected, rtol=1e-12)
    assert sizes.max() > 1e80  # float64 keeps what float32 would have turned to inf


def test_a_given_trajectory_serves_every_analyzer_and_a_mismatched_one_is_refused():
    """One forward pass for norms, Jacobians and exponents; a trajectory of other inputs would give
    silently wrong Jacobians, so its shape is checked against x."""
    torch.manual_seed(3)
    model = build_model("spectral", 3, 5, 2, activation="relu", m1=3, m2=2).double()
    x = torch.randn(2, 9, 3, dtype=torch.float64)
    states = state_trajectory(model, x)
    assert np.array_equal(state_norms(model, x, states=states), state_norms(model, x))
    assert np.array_equal(jacobian_products(model, x, states=states).log10_singular_values,
                          jacobian_products(model, x).log10_singular_values)
    assert np.array_equal(lyapunov_exponents(model, x, states=states), lyapunov_exponents(model, x))
    # the given states are used, not recomputed
    assert np.all(state_norms(model, x, states=torch.zeros_like(states)) == 0)
    for wrong in (states[:, 1:], states[:1], states[..., 0]):
        with pytest.raises(ValueError, match="states must be state_trajectory's"):
            jacobian_products(model, x, states=wrong)
        with pytest.raises(ValueError, match="states must be state_trajectory's"):
            lyapunov_exponents(model, x, states=wrong)


def test_long_sequences_stay_finite_in_log_space():
    """T = 784 with ||W|| = 2 and the identity: J(t) = W^(T-t), norm 2^(T-t) (2^784 overflows float32)."""
    model = build_model("rnn", 2, 8, 2, activation="identity").double()
    Q, _ = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64))
    with torch.no_grad():
        model.transitions[0].weight.copy_(2 * Q)
    products = jacobian_products(model, torch.randn(1, 784, 2, dtype=torch.float64))
    lag = 784 - np.arange(785)
    assert np.allclose(products.log10_norms[0], lag * math.log10(2), atol=1e-9)
    assert np.allclose(products.log10_condition_numbers[0], 0.0, atol=1e-9)
    assert np.allclose(transition_norm_bound(model, 784), lag * math.log10(2))


@pytest.mark.filterwarnings("error")
def test_condition_numbers_of_singular_and_vanished_products_are_inf_and_nan_without_warnings():
    """A linear RNN with W = diag(2, ..., 2, 0): every J(t) before T is singular (condition number inf);
    with W = 0 every J(t) before T is the zero matrix (undefined: nan, as a gradient that vanished at a
    cell through dead units); J(T) = I has condition number 1 either way."""
    model = build_model("rnn", 2, 4, 2, activation="identity").double()
    x = torch.randn(1, 5, 2, dtype=torch.float64)
    for diagonal, before_T in (([2.0, 2.0, 2.0, 0.0], math.inf), ([0.0] * 4, None)):
        with torch.no_grad():
            model.transitions[0].weight.copy_(torch.diag(torch.tensor(diagonal, dtype=torch.float64)))
        condition = jacobian_products(model, x).log10_condition_numbers[0]
        assert condition[-1] == 0.0
        assert np.all(condition[:-1] == before_T) if before_T else np.all(np.isnan(condition[:-1]))


@pytest.mark.parametrize("activation", ["relu", "tanh", "leaky_relu"])
def test_norms_obey_krus_bound_for_1_lipschitz_activations(activation):
    torch.manual_seed(2)
    model = build_model("rnn", 3, 6, 2, activation=activation, init_std=0.7).double()
    x = torch.randn(4, 30, 3, dtype=torch.float64)
    norms = jacobian_products(model, x).log10_norms
    assert np.all(norms <= transition_norm_bound(model, 30) + 1e-9)
    assert transition_norm_bound(build_model("lstm", 3, 4, 2), 5) is None
    for modrelu_net in (build_model("urnn", 3, 4, 2), build_model("kru", 3, 4, 2, complex=True,
                                                                   activation="modrelu")):
        assert transition_norm_bound(modrelu_net, 5) is None  # modReLU's Jacobian exceeds 1 for b > 0


def test_gradient_norms_match_h0_grad_and_the_jacobians():
    torch.manual_seed(3)
    model = build_model("rnn", 3, 6, 2).double()
    x, y = torch.randn(4, 10, 3, dtype=torch.float64), torch.randn(4, 2, dtype=torch.float64)

    def loss(outputs):
        return ((outputs[:, -1] - y) ** 2).mean()

    norms = hidden_gradient_norms(model, x, loss)
    h0 = torch.zeros(1, 4, 6, dtype=torch.float64, requires_grad=True)
    loss(model.run(x, h0).outputs).backward()
    assert norms[0] == pytest.approx(float(h0.grad.norm()), rel=1e-12)
    states = model.run(x).hidden[0][:, -1].detach().requires_grad_()
    (g_T,) = torch.autograd.grad(loss(model.readout(states).unsqueeze(1)), states)
    J = jacobian_products(model, x, keep_matrices=True).matrices  # (B, T+1, d, d)
    expected = torch.einsum("bi,btij->btj", g_T, J).norm(dim=(0, 2)).numpy()
    assert np.allclose(norms, expected, rtol=1e-10)


def test_lyapunov_exponents_of_a_linear_rnn_are_log_abs_eigenvalues():
    torch.manual_seed(4)
    model = build_model("rnn", 3, 6, 2, activation="identity").double()
    exponents = lyapunov_exponents(model, torch.randn(1, 3000, 3, dtype=torch.float64), burn_in=100)[0]
    eigenvalues = torch.linalg.eigvals(model.transition_matrix().detach())
    expected = np.sort(np.log(eigenvalues.abs().numpy()))[::-1]
    assert np.allclose(exponents, expected, atol=5e-3)


def test_lyapunov_exponents_are_zero_for_orthogonal_w_and_abs():
    torch.manual_seed(5)
    model = build_model("ornn", 3, 8, 2, activation="abs").double()
    exponents = lyapunov_exponents(model, torch.randn(3, 200, 3, dtype=torch.float64))
    assert np.allclose(exponents, 0.0, atol=1e-12)


def _step_jacobians(model, x: torch.Tensor) -> list[torch.Tensor]:
    """``A_t = dh_(t+1)/dh_t`` along the input-driven trajectory, each ``(B, d, d)``."""
    states = state_trajectory(model, x)
    jac = model.step_jacobian_function()
    with torch.no_grad():
        return [jac(states[:, t], x[:, t]) for t in range(x.shape[1])]


def test_lyapunov_sum_is_the_mean_log_determinant():
    torch.manual_seed(6)
    model = build_model("rnn", 3, 5, 2, activation="tanh", init_std=1.5).double()
    x = torch.randn(2, 40, 3, dtype=torch.float64)
    exponents = lyapunov_exponents(model, x)
    logdet = sum(torch.linalg.slogdet(A)[1] for A in _step_jacobians(model, x)) / 40
    assert np.allclose(exponents.sum(axis=1), logdet.numpy(), atol=1e-10)
    with pytest.raises(ValueError, match="burn_in"):
        lyapunov_exponents(model, x, burn_in=40)


@pytest.mark.parametrize(("kind", "hidden", "steps", "options"), [
    ("rnn", 16, 12, {"init_std": 1.0}),
    ("kru", 36, 4, {}),  # a lost column left in place, completed by roundoff, lost live ones behind it
])
def test_lyapunov_exponents_are_finite_exactly_on_the_rank_of_the_jacobian_product(kind, hidden, steps,
                                                                                   options):
    """Directions a relu kills leave QR roundoff (|R_ii| ~ 1e-17), which must read -inf, not about -37,
    and only those: the live directions behind a lost one keep finite exponents."""
    torch.manual_seed(0)
    model = build_model(kind, 3, hidden, 2, activation="relu", **options).double()
    x = torch.randn(4, steps, 3, dtype=torch.float64)
    exponents = lyapunov_exponents(model, x)
    product = torch.eye(hidden, dtype=torch.float64).expand(4, hidden, hidden)
    for A in _step_jacobians(model, x):
        product = A @ product
    relative = torch.linalg.svdvals(product) / torch.linalg.matrix_norm(product, ord=2)[:, None]
    assert not ((relative > 1e-12) & (relative < 1e-6)).any()  # the rank is plain
    rank = (relative > 1e-9).sum(dim=1).numpy()
    assert (rank < hidden).all() and (rank > 0).all()
    assert np.array_equal(np.isfinite(exponents).sum(axis=1), rank)


def test_trajectory_reads_the_run_log(tmp_path):
    config = TrainConfig(model="spectral", task="addition", out=str(tmp_path / "run"), hidden=8,
                         model_options={"m1": 2, "m2": 2}, task_options={"length": 10, "train_size": 100,
                                                                         "valid_size": 20, "test_size": 20},
                         batch_size=10, steps=20, record_every=5, eval_every=10, checkpoint_every=10,
                         progress=False)
    train(config)
    trajectory = read_trajectory(tmp_path / "run")
    assert trajectory.model == "spectral" and trajectory.steps.tolist() == [5, 10, 15, 20]
    sv = trajectory.singular_values[0]
    assert sv.shape == (4, 8)
    assert np.allclose(trajectory.condition_numbers[0], sv[:, 0] / sv[:, -1])
    assert np.allclose(trajectory.spectral_margin, np.abs(sv - 1).max(axis=1))
    rows = trajectory.rows()
    assert len(rows) == 4 and rows[-1]["grad_h0_norm"] > 0
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = [line for line in logged if line["phase"] == "train"]
    assert [row["grad_norm_peak"] for row in rows] == [line["grad_norm_peak"] for line in logged]
    assert all(line["grad_norm_peak"] >= line["grad_norm"] > 0 for line in logged)
    older = tmp_path / "older"  # a log written before the peak was recorded reads as not recorded
    older.mkdir()
    stripped = [{k: v for k, v in line.items() if k != "grad_norm_peak"} for line in logged]
    (older / "metrics.jsonl").write_text("\n".join(json.dumps(line) for line in stripped))
    assert np.isnan(read_trajectory(older).grad_norm_peak).all()
    both = trajectory_table([tmp_path / "run", tmp_path / "run"])
    assert len(both) == 8 and {row["model"] for row in both} == {"spectral"}
    with pytest.raises(ValueError, match="no metrics.jsonl"):
        read_trajectory(tmp_path)
