"""Symbolic checks: each derivation against the printed formula, a deliberately wrong formula that must
come out ``differs``, numeric cross-checks against torch, and the ``verify-symbolic`` command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
import torch

from spectral_analysis.analysis.linear_rnn import LinearRNNProblem, risk_gradient
from spectral_analysis.cli import main
from spectral_analysis.symbolic import (
    SYMBOLIC_CHECKS,
    counts,
    householder,
    linear_rnn,
    peers,
    run_symbolic_checks,
)
from spectral_analysis.symbolic.algorithm1 import algorithm1, derived, setting
from spectral_analysis.symbolic.compare import judge

REPORT = Path(__file__).resolve().parents[1] / "paper_checks" / "symbolic_report.md"

EXPECTED = {
    "ICML Algorithm 1": "differs",
    "ICML Algorithm 1 (U-loop with the reflector's input)": "holds",
    "earlier version, Claim 1 (gradient)": "differs",
    "ICML Table 1 (Spectral-RNN-Local BP(n, m1, m2))": "differs",
    "ICML Table 1 (oRNN-Local FP(n, m))": "differs",
    "ICML Table 1 (oRNN-Local BP(n, m))": "differs",
}


@pytest.fixture(scope="module")
def records(symbolic_rows):
    return {record.source: record for _, record in symbolic_rows}


def test_every_verdict_is_the_expected_one_and_torch_agrees(records):
    assert len(records) == 30
    for source, record in records.items():
        assert record.verdict == EXPECTED.get(source, "holds"), (source, record.evidence)
        if "torch_max_error" in record.numbers:
            assert record.numbers["torch_max_error"] < 1e-12, source
    assert records["ICML Eq. 12"].numbers["symbolic_n"] and records["ICML Eq. 13"].numbers["symbolic_n"]


def test_algorithm3_is_counted_as_the_paper_counts_and_table1_states_its_own_contradiction(records):
    # "3n + 10k" is right under the paper's convention; the cheaper local count is a note, not an error
    algorithm3 = records["ICML Section 4.2 (Algorithm 3)"]
    assert algorithm3.verdict == "holds" and "13*k + 2" in algorithm3.evidence
    assert not any("Algorithm 3" in source and r.verdict != "holds" for source, r in records.items())
    # the oRNN is a Spectral-RNN with one side empty, yet Table 1 prints two different forward costs
    forward = records["ICML Table 1 (oRNN-Local FP(n, m))"]
    assert sp.sympify(forward.numbers["spectral_row_one_side_empty"]) == sp.sympify("4*n*m - 2*m**2")
    assert "contradicts itself" in forward.evidence and "-m**2 + 4*m*n" in forward.evidence
    backward = records["ICML Table 1 (oRNN-Local BP(n, m))"]
    assert sp.sympify(backward.numbers["spectral_row_one_side_empty"]) == sp.sympify("6*n*m - 3*m**2/2")


def test_the_committed_report_matches_a_fresh_run(records):
    text = REPORT.read_text()
    rows = re.findall(r"^\| (.+?) \| .+? \| \*\*(\w+)\*\* \|", text, flags=re.M)
    assert {source.replace("\\|", "|"): verdict for source, verdict in rows} == {
        s: r.verdict for s, r in records.items()}


def test_judge_separates_holds_differs_and_unverified():
    x, y = sp.symbols("x y")
    assert judge((x + y) ** 2, x**2 + 2 * x * y + y**2, [x, y]).verdict == "holds"
    wrong = judge((x + y) ** 2, x**2 + y**2, [x, y])
    assert wrong.verdict == "differs" and "point" in wrong.numbers
    assert judge(sp.Integer(0), x, [x]).verdict == "differs"  # a silent symbolic zero is caught
    assert judge((x + 1) ** 2 - x**2, 2 * x + 1, [x], simplifier=lambda e: e).verdict == "unverified"


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.slow
def test_wrong_householder_formulas_differ(n):
    u, h, g = householder.vectors(n)
    d_h, d_u = householder.derived_gradients(n)
    symbols = [*u, *h, *g]
    uu, uh, ug = (u.T * u)[0, 0], (u.T * h)[0, 0], (u.T * g)[0, 0]
    assert judge(d_u, householder.eq13_printed(u, h, g), symbols).verdict == "holds"
    wrong_13 = -2 * uh / uu * g - 2 * ug / uu * h + 2 * uh * ug / uu**2 * u  # 4 -> 2
    assert judge(d_u, wrong_13, symbols).verdict == "differs"
    assert judge(d_h, g + 2 * ug / uu * u, symbols).verdict == "differs"  # sign of Eq. 12
    wrong_alg3 = householder.algorithm3_printed(u, h, g)
    wrong_alg3[n] += 1  # perturb one entry of u_bar
    assert judge(d_h.col_join(d_u), wrong_alg3, symbols).verdict == "differs"


def test_algorithm1_printed_u_loop_is_wrong_only_in_du():
    s = setting(2)
    difference = (derived(2) - algorithm1(2, u_loop_input=False)).applyfunc(householder.rational_zero)
    u_entries = sum(len(s["u"][k]) for k in (1, 2))
    assert any(e != 0 for e in difference[:u_entries])
    assert all(e == 0 for e in difference[u_entries:])  # dL/dv, dL/dsigma, dL/dh are right


def test_wrong_sigma_map_derivative_differs():
    sh, r, star = sp.symbols("sigma_hat r sigma_star", real=True)
    f = 1 / (1 + sp.exp(-sh))
    sigma = 2 * r * (f - sp.Rational(1, 2)) + star
    assert judge(sp.diff(sigma, sh), r * f * (1 - f), [sh, r, star]).verdict == "differs"


@pytest.mark.slow
def test_claim1_derived_gradient_is_the_toolkit_gradient():
    s = linear_rnn.setting()
    gradient = sp.Matrix([sp.diff(linear_rnn.derived_risk(), w) for w in s["W"]])
    rng = np.random.default_rng(11)
    values = {sym: float(rng.standard_normal()) for sym in s["symbols"]}
    Sigma = np.array(s["Sigma"].subs(values), dtype=np.float64)
    Sigma = Sigma @ Sigma.T + np.eye(4)  # a valid second moment
    for i in range(4):
        for j in range(4):
            values[s["Sigma"][i, j]] = Sigma[i, j]
    numeric = np.array(gradient.subs(values), dtype=np.float64).reshape(2, 2)
    problem = LinearRNNProblem(torch.tensor(np.array(s["Y"].subs(values), dtype=np.float64)),
                               torch.tensor(np.array(s["A"].subs(values), dtype=np.float64)),
                               torch.tensor(Sigma), float(values[s["C"]]) ** 2, 2)
    W = torch.tensor(np.array(s["W"].subs(values), dtype=np.float64))
    assert np.allclose(numeric, risk_gradient(W, problem).numpy(), rtol=1e-10, atol=1e-10)


def test_wrong_peer_formulas_differ():
    theta = sp.Symbol("theta", real=True)
    x, g = sp.Matrix(sp.symbols("x0:4", real=True)), sp.Matrix(sp.symbols("g0:4", real=True))
    derived_theta = sp.diff((g.T * peers.givens(4, 1, 3, theta) * x)[0, 0], theta)
    E = sp.zeros(2, 4)
    E[0, 1], E[1, 3] = 1, 1
    wrong = sp.Matrix([[sp.sin(theta), sp.cos(theta)], [-sp.cos(theta), sp.sin(theta)]])
    assert judge(derived_theta, ((E * g).T * wrong * E * x)[0, 0], [theta, *x, *g]).verdict == "differs"
    A, B, C, D = (sp.Matrix(2, 2, sp.symbols(f"{c}0:4")) for c in "ABCD")
    kron = sp.kronecker_product
    assert judge(kron(A, B) * kron(C, D), kron(C * A, B * D), [*A, *B, *C, *D]).verdict == "differs"


def test_counts_find_the_per_reflector_cost_behind_each_row():
    n, m = counts.n, counts.m
    assert counts.matching_cost(4 * n * m - m**2, m) == 2 * n + 2 * counts.k
    assert counts.matching_cost(7 * n * m - 2 * m**2, m) == 3 * n + 4 * counts.k
    assert sp.expand(counts.leading(counts.layer(4 * counts.k, m), (n, m))) == 4 * n * m - 2 * m**2
    wrong = (counts.ny + counts.ni + counts.m1 + counts.m2 + 2) * n  # without the reflector correction
    assert judge(counts.spectral_parameter_count(), wrong, [n, counts.m1, counts.m2, counts.ny, counts.ni],
                 positive=True).verdict == "differs"


def test_verify_symbolic_command(tmp_path, capsys):
    out = tmp_path / "report.md"
    args = ["--only", "kru", "--only", "parameter-counts", "--json", "--md", str(out)]
    assert main(["verify-symbolic", *args]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in payload["checks"]] == ["kru"] * 3 + ["parameter-counts"] * 3
    fields = {"source", "claim", "verdict", "evidence", "derived", "printed"}
    assert all(fields <= set(c) for c in payload["checks"])
    assert "| KRU Section 3 (mixed product) |" in out.read_text()
    assert main(["verify-symbolic", "--only", "nonsense"]) == 1
    assert "unknown symbolic check" in capsys.readouterr().err
    assert set(SYMBOLIC_CHECKS) >= {"claim1", "table1", "algorithm1"}


def test_wrong_reflector_properties_and_a_zero_preactivation_differ():
    u, _, _ = householder.vectors(3)
    H = householder.reflector_matrix(u)
    assert judge(H.trace(), 3 - 1, list(u)).verdict == "differs"  # one eigenvalue is -1, not 1
    assert judge(H * u, u, list(u)).verdict == "differs"
    P, angles = peers.packed_rotations(3)
    g = sp.Matrix(sp.symbols("g0:3", real=True))
    back = P.T * sp.diag(0, 1, 1) * g  # sign(z_1) = 0
    assert judge((back.T * back)[0, 0], (g.T * g)[0, 0], [*angles, *g],
                 simplifier=peers.pythagorean(angles)).verdict == "differs"


def test_count_checks_take_evidence_only_from_configurations_that_exist():
    """A reflector of length k (or m reflectors) in R^n needs k <= n: no evidence point beyond it."""
    records = [r for _, r in run_symbolic_checks(["table1", "parameter-counts"])]
    points = [r.numbers["point"] for r in records if "point" in r.numbers]
    assert points, "some count differs, so some evidence point is reported"
    for point in points:
        n = int(point["n"])
        assert all(int(point[s]) <= n for s in ("k", "m", "m1", "m2") if s in point), point
