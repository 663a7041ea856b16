"""Critical points, Theorem 5's counterexample, SVD-parameterized descent and the ``landscape`` command
(earlier version, Section 6)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from spectral_analysis.analysis.linear_rnn import (
    LinearRNNProblem,
    optimal_risk,
    population_risk,
    random_problem,
    random_transitions,
    realizable_problem,
    risk_gradient,
    stacked_powers,
)
from spectral_analysis.analysis.linear_rnn.counterexample import (
    identity_teacher_counterexample,
    inequality_ratios,
    scalar_spurious_minima,
)
from spectral_analysis.analysis.linear_rnn.critical_points import (
    catalogue,
    classify_hessian,
    gradient_descent,
    minimize_each,
    plain_objective,
    search_critical_points,
)
from spectral_analysis.analysis.linear_rnn.svd_descent import (
    determinant_signs,
    svd_objective,
    svd_parameters,
    svd_sigma_map,
    svd_transition,
)
from spectral_analysis.checks import VERDICTS, CheckRecord, checks_markdown
from spectral_analysis.cli import main
from spectral_analysis.paper.landscape import LandscapeConfig, landscape_report

D = torch.float64


def test_classify_hessian_by_signs_and_zeros():
    assert classify_hessian(torch.tensor([1.0, 2.0])) == "minimum"
    assert classify_hessian(torch.tensor([-1.0, -2.0])) == "maximum"
    assert classify_hessian(torch.tensor([-1.0, 0.0, 2.0])) == "saddle"
    assert classify_hessian(torch.tensor([0.0, 2.0])) == "degenerate"
    assert classify_hessian(torch.tensor([1e-12, 2.0])) == "degenerate"


def test_t1_search_finds_the_least_squares_point_only():
    """t = 1 is least squares: one critical point, W = Y^-1 A, a minimum with gap 0."""
    problem = random_problem(3, 1, noise=0.2)
    starts = random_transitions(3, 6, 0.0, 3.0, torch.Generator().manual_seed(0))
    points, missed = search_critical_points(problem, starts, optimal_risk(problem))
    assert missed == 0 and len(points) == 1 and points[0].starts == 6
    assert points[0].kind == "minimum" and abs(points[0].gap) < 1e-10
    assert torch.allclose(points[0].W, torch.linalg.solve(problem.Y, problem.A), atol=1e-10)


def test_scalar_t2_critical_points_match_the_roots_of_the_derivative():
    """n = 1, t = 2, Y = 1, Sigma = I, teacher a: R - C = (w - a)^2 (1 + (w + a)^2); its critical points
    are w = a and the roots of 1 + 2 w (w + a) = 0: w = (-a +- sqrt(a^2 - 2)) / 2 (max, then min)."""
    a = 2.0
    problem = LinearRNNProblem(torch.ones(1, 1, dtype=D), torch.tensor([[a, a * a]], dtype=D),
                               torch.eye(2, dtype=D), 0.0, 2, torch.tensor([[a]], dtype=D))
    starts = torch.linspace(-3.0, 3.0, 13, dtype=D).view(-1, 1, 1)
    points, _ = search_critical_points(problem, starts, optimal_risk(problem))
    found = sorted((float(p.W), p.kind) for p in points)
    expected = [((-a - math.sqrt(a * a - 2)) / 2, "minimum"), ((-a + math.sqrt(a * a - 2)) / 2, "maximum"),
                (a, "minimum")]
    assert [k for _, k in found] == [k for _, k in expected]
    assert np.allclose([w for w, _ in found], [w for w, _ in expected], atol=1e-10)
    assert scalar_spurious_minima(a, 2) == [pytest.approx(complex(expected[0][0], 0.0), abs=1e-7)]


def test_gradient_descent_is_monotone_and_minimize_each_reaches_the_t1_optimum():
    problem = random_problem(3, 1, noise=0.1)
    starts = random_transitions(3, 4, 0.0, 2.0, torch.Generator().manual_seed(2))
    (W,), history = gradient_descent(plain_objective(problem), [starts], 200)
    assert history.shape == (201, 4)
    assert bool((history[1:] <= history[:-1] + 1e-12).all())
    final, counts, converged = minimize_each(plain_objective(problem), [W])
    assert len(counts) == 4 and all(converged)
    assert torch.allclose(final[0], torch.linalg.solve(problem.Y, problem.A).expand(4, 3, 3), atol=1e-6)


def test_catalogue_merges_duplicates_and_rejects_non_critical_points():
    problem = random_problem(2, 1)
    W = torch.linalg.solve(problem.Y, problem.A)
    points, missed = catalogue(problem, torch.stack([W, W + 1e-12, W + 1.0]), optimal_risk(problem))
    assert missed == 0 and len(points) == 1 and points[0].starts == 3  # Newton takes W + 1 there too
    # n = 1, t = 3: R' has a local minimum of |R'| > 0 where R'' = 0; Newton cannot move off it
    a = 1.5
    scalar = LinearRNNProblem(torch.ones(1, 1, dtype=D), torch.tensor([[a, a ** 2, a ** 3]], dtype=D),
                              torch.eye(3, dtype=D), 0.0, 3, torch.tensor([[a]], dtype=D))
    poly = sum(np.polynomial.Polynomial([-(a ** i)] + [0] * (i - 1) + [1]) ** 2 for i in (1, 2, 3))
    flat = [w.real for w in poly.deriv(2).roots() if abs(w.imag) < 1e-12 and abs(poly.deriv(1)(w.real)) > 1]
    points, missed = catalogue(scalar, torch.tensor(flat, dtype=D).view(-1, 1, 1), 0.0)
    assert flat and missed == len(flat) and points == []


@pytest.mark.parametrize("n, t", [(1, 2), (3, 2), (2, 3), (4, 4)])
def test_identity_teacher_counterexample_refutes_theorem5(n, t):
    """A critical point with sigma_min(W) >= e whose risk gap is positive; a strict minimum that
    survives perturbing Y and Sigma; and the proof's inequality fails there."""
    e = 1.0
    found = identity_teacher_counterexample(n, t, e)
    assert found is not None
    point = found.point
    assert point.grad_norm <= found.tolerance
    assert point.sigma_min >= e and point.gap > 1.0
    assert point.kind == "minimum" and point.hessian_min > 0
    assert found.perturbed_point is not None and found.perturbed_point.gap > 1.0
    assert found.perturbed_point.sigma_min >= e
    W = point.W.clone().requires_grad_()
    (auto,) = torch.autograd.grad(population_risk(W, found.problem), W)
    assert float(auto.norm()) < 1e-9 * (1 + float(point.W.norm()))  # critical by autograd too
    assert float(inequality_ratios(point.W, found.problem, e)) < 1e-20


@pytest.mark.slow
def test_no_counterexample_where_the_family_has_none():
    assert identity_teacher_counterexample(3, 1, 1.0) is None  # t = 1: R is convex
    assert identity_teacher_counterexample(1, 3, 1.0) is None  # real z, odd t: z^3 = a^3 only at a
    with pytest.raises(ValueError, match="e > 0"):
        identity_teacher_counterexample(2, 2, -1.0)


def test_svd_descent_keeps_sigma_in_range_and_the_determinant_sign():
    problem = realizable_problem(3, 2, low=1.0, high=2.0)
    gen = torch.Generator().manual_seed(3)
    starts = torch.cat([random_transitions(3, 3, 1.1, 1.9, gen), random_transitions(3, 3, 0.5, 2.5, gen)])
    sigma_map = svd_sigma_map(1.0, 2.0)
    params = svd_parameters(starts, sigma_map)
    W0 = svd_transition(params, sigma_map)
    inside = (torch.linalg.svdvals(starts) > 1.0) & (torch.linalg.svdvals(starts) < 2.0)
    assert bool(inside[:3].all())
    assert torch.allclose(W0[:3], starts[:3], atol=1e-10)  # starts inside the range are reproduced
    assert not torch.allclose(W0[3:], starts[3:], atol=1e-3)  # the others are clamped into it
    assert torch.equal(determinant_signs(W0), determinant_signs(starts))
    final, history = gradient_descent(svd_objective(problem, sigma_map), params, 100)
    W = svd_transition(final, sigma_map)
    s = torch.linalg.svdvals(W)
    assert bool((s >= 1.0 - 1e-12).all()) and bool((s <= 2.0 + 1e-12).all())
    assert torch.equal(determinant_signs(W), determinant_signs(starts))
    assert bool((history[-1] < history[0]).all())
    with pytest.raises(ValueError, match="0 < low < high"):
        svd_sigma_map(0.0, 1.0)


def test_check_record_rejects_unknown_verdicts_and_renders_markdown():
    with pytest.raises(ValueError, match="verdict"):
        CheckRecord("s", "c", "maybe", "e")
    table = checks_markdown([CheckRecord("ICML Eq. 1", "||a|b||", "holds", "x")])
    assert "| ICML Eq. 1 | \\|\\|a\\|b\\|\\| | **holds** | x |" in table


SMALL = ["--hidden", "2", "--length", "2", "--starts", "3", "--samples", "40", "--iterations", "60"]


@pytest.mark.slow
def test_landscape_report_verdicts_on_a_small_problem():
    report = landscape_report(LandscapeConfig(hidden=2, length=2, starts=3, samples=40, iterations=60,
                                              monte_carlo=20_000))
    verdicts = {c["source"].split(", ")[-1]: c["verdict"] for c in report["checks"]}
    assert verdicts["Claim 1 (risk)"] == "holds"
    assert verdicts["Claim 1 (gradient)"] == "differs"
    assert verdicts["Theorem 5 (proof's inequality)"] == "fails"
    assert verdicts["Theorem 5"] == "fails"
    assert set(verdicts.values()) <= set(VERDICTS)
    for check in report["checks"]:
        assert set(check) == {"source", "claim", "verdict", "evidence", "numbers", "derived", "printed",
                              "quote", "scale", "seeds", "plateaued", "stale"}
        assert check["quote"]
    descent = report["descent"]
    signs = report["checks"][4]["numbers"]
    # SVD descent never reaches R* from a start whose det sign differs from the teacher's
    for k, reached in enumerate(descent["svd"]["reached"]):
        if signs["start_det_sign"][k] != signs["teacher_det_sign"]:
            assert not reached
    json.dumps(report)


@pytest.mark.slow
def test_landscape_command_writes_report_and_figures(tmp_path, capsys):
    assert main(["landscape", *SMALL, "--json", "--out", str(tmp_path)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [c["verdict"] for c in payload["checks"]][:2] == ["holds", "differs"]
    for name in ("landscape.json", "landscape.md", "landscape_inequality.png",
                 "landscape_critical_points.png", "landscape_descent.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert "| source | claim | verdict | evidence |" in (tmp_path / "landscape.md").read_text()


@pytest.mark.parametrize("args, message", [
    (["--hidden", "0"], "hidden must lie in [1, 16]"),
    (["--e", "0"], "0 < e < high"),
    (["--e", "3", "--high", "2"], "0 < e < high"),
    (["--outputs", "0"], "outputs must be >= 1"),
])
def test_landscape_bad_input_is_named(args, message, capsys):
    assert main(["landscape", *args]) == 1
    assert message in capsys.readouterr().err


def test_landscape_keeps_the_callers_thread_count():
    threads = torch.get_num_threads()
    landscape_report(LandscapeConfig(hidden=1, length=1, starts=2, samples=10, iterations=5,
                                     monte_carlo=1000))
    assert torch.get_num_threads() == threads


def test_inequality_ratio_uses_the_realizable_optimum():
    problem = realizable_problem(2, 2)
    W = random_transitions(2, 5, 1.0, 2.5, torch.Generator().manual_seed(4))
    gap = population_risk(W, problem) - problem.C
    expected = risk_gradient(W, problem).square().sum(dim=(-2, -1)) / (
        float(torch.linalg.eigvalsh(problem.Sigma).min()) ** 2 * gap)
    assert torch.allclose(inequality_ratios(W, problem, 1.0), expected)
    assert stacked_powers(W, 2).shape == (5, 2, 4)
