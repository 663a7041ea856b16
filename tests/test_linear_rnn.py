"""Linear-RNN population risk (earlier version, Section 6): closed form, gradient, Hessian, printed one."""

from __future__ import annotations

import pytest
import torch

from spectral_analysis.analysis.linear_rnn import (
    LinearRNNProblem,
    monte_carlo_risk,
    optimal_risk,
    population_risk,
    printed_gradient,
    random_problem,
    random_transitions,
    realizable_problem,
    risk_gradient,
    risk_hessian,
    stacked_powers,
    theorem5_constant,
)


def random_transition(n: int, seed: int, scale: float = 0.6) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, n, generator=generator, dtype=torch.float64) * scale / n ** 0.5


def test_index_order_matches_the_recurrence():
    """o = Y script-W vec X equals running h_s = W (h_{s-1} + x_s) with the paper's x^(0) fed last."""
    n, t = 3, 4
    problem = random_problem(n, t)
    W = random_transition(n, 1)
    x = torch.randn(t, n, dtype=torch.float64)  # x[i] = x^(i)
    h = torch.zeros(n, dtype=torch.float64)
    for i in reversed(range(t)):  # x^(t-1) first, x^(0) last
        h = W @ (h + x[i])
    assert torch.allclose(problem.Y @ h, problem.Y @ stacked_powers(W, t) @ x.reshape(-1), atol=1e-12)


@pytest.mark.parametrize("n, t, ny", [(3, 1, 3), (3, 3, 2), (4, 2, 4)])
def test_closed_form_risk_matches_monte_carlo(n, t, ny):
    problem = random_problem(n, t, ny, noise=0.3)
    W = random_transition(n, 2)
    mean, stderr = monte_carlo_risk(W, problem, 200_000)
    assert abs(float(population_risk(W, problem)) - mean) < 5 * stderr


@pytest.mark.parametrize("n, t, ny", [(3, 1, 3), (3, 4, 2), (5, 3, 5)])
def test_exact_gradient_matches_autograd_and_finite_differences(n, t, ny):
    problem = random_problem(n, t, ny)
    W = random_transition(n, 3, 1.1).requires_grad_()
    (auto,) = torch.autograd.grad(population_risk(W, problem), W)
    exact = risk_gradient(W.detach(), problem)
    assert torch.allclose(exact, auto, atol=1e-12, rtol=1e-10)
    assert torch.autograd.gradcheck(lambda w: population_risk(w, problem), (W,))
    E = torch.zeros(n, n, dtype=torch.float64)
    E[1, 0] = 1.0
    h = 1e-6
    plus, minus = population_risk(W.detach() + h * E, problem), population_risk(W.detach() - h * E, problem)
    numeric = (plus - minus) / (2 * h)
    assert float(numeric) == pytest.approx(float(exact[1, 0]), rel=1e-6, abs=1e-9)


def test_hessian_is_symmetric_and_matches_autograd_of_the_risk():
    problem = random_problem(3, 3)
    W = random_transition(3, 4)
    H = risk_hessian(W, problem)
    assert torch.allclose(H, H.T, atol=1e-10)
    reference = torch.autograd.functional.hessian(lambda w: population_risk(w.reshape(3, 3), problem),
                                                  W.reshape(-1))
    assert torch.allclose(H, reference, atol=1e-10)


def test_t1_least_squares_minimum_is_a_critical_point_with_psd_hessian():
    """t = 1: R = ||(YW - A) Sigma^(1/2)||^2 + C, minimized by W = Y^-1 A (Y invertible)."""
    problem = random_problem(4, 1, noise=0.2)
    W_star = torch.linalg.solve(problem.Y, problem.A)
    assert torch.allclose(risk_gradient(W_star, problem), torch.zeros(4, 4, dtype=torch.float64), atol=1e-12)
    assert float(population_risk(W_star, problem)) == pytest.approx(0.2, abs=1e-12)
    assert float(torch.linalg.eigvalsh(risk_hessian(W_star, problem)).min()) > 0


def test_printed_gradient_differs_from_the_exact_one_even_when_w_commutes():
    """Claim 1's printed gradient lacks 2 Y^T (and orders products as if W, dW commute)."""
    problem = random_problem(3, 3)
    W_commuting = torch.diag(torch.tensor([0.5, -0.3, 0.8], dtype=torch.float64))
    exact, printed = risk_gradient(W_commuting, problem), printed_gradient(W_commuting, problem)
    assert (exact - printed).norm() > 0.1 * exact.norm()
    one_step = random_problem(3, 1)
    W = random_transition(3, 5)
    assert torch.allclose(risk_gradient(W, one_step),
                          2 * one_step.Y.T @ printed_gradient(W, one_step), atol=1e-12)


def test_bad_problems_are_named():
    Y, A, S = torch.eye(2, dtype=torch.float64), torch.zeros(2, 4, dtype=torch.float64), torch.eye(4)
    with pytest.raises(ValueError, match="A must have shape"):
        LinearRNNProblem(Y, torch.zeros(2, 3, dtype=torch.float64), S.double(), 0.0, 2)
    with pytest.raises(ValueError, match="positive semi-definite"):
        LinearRNNProblem(Y, A, -S.double(), 0.0, 2)
    with pytest.raises(ValueError, match="W must be"):
        population_risk(torch.zeros(3, 3, dtype=torch.float64), LinearRNNProblem(Y, A, S.double(), 0.0, 2))


def test_batched_risk_and_gradient_match_one_at_a_time():
    problem = random_problem(3, 3, 2)
    Ws = torch.stack([random_transition(3, seed) for seed in range(4)])
    risks, grads = population_risk(Ws, problem), risk_gradient(Ws, problem)
    for k in range(4):
        assert float(risks[k]) == pytest.approx(float(population_risk(Ws[k], problem)), rel=1e-13)
        assert torch.allclose(grads[k], risk_gradient(Ws[k], problem), atol=1e-12)


def test_realizable_problem_attains_c_at_its_teacher_and_nowhere_below():
    problem = realizable_problem(3, 3, low=1.0, high=2.0, noise=0.25)
    assert float(torch.linalg.svdvals(problem.W_star).min()) >= 1.0 - 1e-12
    assert float(torch.linalg.svdvals(problem.W_star).max()) <= 2.0 + 1e-12
    assert optimal_risk(problem) == 0.25
    assert float(population_risk(problem.W_star, problem)) == pytest.approx(0.25, abs=1e-10)
    assert float(risk_gradient(problem.W_star, problem).norm()) < 1e-9
    others = random_transitions(3, 20, 0.0, 3.0, torch.Generator().manual_seed(1))
    assert bool((population_risk(others, problem) > 0.25).all())


def test_optimal_risk_for_t1_is_the_least_squares_value_even_when_y_is_wide():
    """n_y < n: Y W = A is underdetermined, R* = C + ||(Y Y^+ - I) A Sigma^(1/2)||^2 = C."""
    for ny in (2, 5):
        problem = random_problem(4, 1, ny, noise=0.3)
        r_star = optimal_risk(problem)
        assert r_star >= 0.3 - 1e-12
        samples = random_transitions(4, 200, 0.0, 3.0, torch.Generator().manual_seed(ny))
        assert float(population_risk(samples, problem).min()) >= r_star - 1e-10
        # the least-squares point is critical
        W = torch.linalg.lstsq(problem.Y, problem.A).solution
        assert float(risk_gradient(W, problem).norm()) < 1e-10
    assert optimal_risk(random_problem(4, 1, 2, noise=0.3)) == pytest.approx(0.3, abs=1e-10)
    assert optimal_risk(random_problem(2, 1, 5, noise=0.3)) > 0.3 + 1e-3  # tall Y: A is not reachable


def test_unknown_optimum_and_bad_teacher_and_bad_e_are_named():
    with pytest.raises(ValueError, match="closed form only for t = 1"):
        optimal_risk(random_problem(3, 2))
    problem = random_problem(2, 2)
    with pytest.raises(ValueError, match="does not realize A"):
        LinearRNNProblem(problem.Y, problem.A, problem.Sigma, 0.1, 2, torch.eye(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="e > 0"):
        theorem5_constant(problem, 0.0)
    with pytest.raises(ValueError, match="low <= high"):
        random_transitions(2, 3, 2.0, 1.0, torch.Generator())


def test_theorem5_constant_is_the_printed_minimum():
    problem = random_problem(2, 3)
    s = float(torch.linalg.eigvalsh(problem.Sigma).min())
    assert theorem5_constant(problem, 0.5) == pytest.approx(s ** 2 * min(1, 4 * 0.25, 9 * 0.0625))
    assert theorem5_constant(problem, 2.0) == pytest.approx(s ** 2)
