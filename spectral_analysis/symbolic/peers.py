"""The peers' formulas: DizzyRNN's rotation gradient and norm preservation (Section 4, Theorems 3-4),
and KRU's Kronecker properties and parameter count (Section 3)."""

from __future__ import annotations

import numpy as np
import sympy as sp
import torch

from spectral_analysis.checks import CheckRecord
from spectral_analysis.linalg import packed_pairs
from spectral_analysis.symbolic.compare import judge, numeric_error

QUOTES = {
    "DizzyRNN Section 4.1": "ya = cos θxa + sin θxb and yb = − sin θxa + cos θxb. The derivative of L with "
                            "respect to the parameter θ is",
    "DizzyRNN Theorem 3": "Theorem 3. In a DizzyRNN cell,",
    "DizzyRNN Theorem 4": "Theorem 4. IfWx is square, then",
    "KRU Section 3 (mixed product)": r"the time complexity of hidden state computation is "
                                     r"$\mathcal{O}(N \log_2 N)$",
    "KRU Section 3.2 (Van Loan)": r"if each of the Kronecker factors $\{\mathbf{W}_0, \dots, "
                                  r"\mathbf{W}_{F-1}\}$ "
                                  r"are unitary then the full matrix \mathbf{W} is unitary (Van Loan, 2000)",
    "KRU Section 3 (2 x 2 factors)": r"When $\forall_f \{p_f = q_f = 2\}$ the number of parameters is "
                                     r"$8 \log_2 N$",
}


def givens(n: int, a: int, b: int, theta: sp.Symbol) -> sp.Matrix:
    """DizzyRNN's ``R_ab(theta)``: cos on (a, a), (b, b); ``sin`` at (a, b), ``-sin`` at (b, a)."""
    R = sp.eye(n)
    R[a, a] = R[b, b] = sp.cos(theta)
    R[a, b], R[b, a] = sp.sin(theta), -sp.sin(theta)
    return R


def _rotation_gradient_reference(n: int, a: int, b: int):
    def reference(theta: float, *rest: float) -> np.ndarray:
        t = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
        x = torch.tensor(rest[:n], dtype=torch.float64)
        g = torch.tensor(rest[n:], dtype=torch.float64)
        c, s = torch.cos(t), torch.sin(t)
        y = x.clone()
        y = torch.cat(
            [y[:a], (c * x[a] + s * x[b]).view(1), y[a + 1 : b], (-s * x[a] + c * x[b]).view(1), y[b + 1 :]]
        )
        (grad,) = torch.autograd.grad(g @ y, t)
        return grad.numpy()

    return reference


def check_dizzy_gradient() -> CheckRecord:
    n, a, b = 4, 1, 3
    theta = sp.Symbol("theta", real=True)
    x, g = sp.Matrix(sp.symbols(f"x0:{n}", real=True)), sp.Matrix(sp.symbols(f"g0:{n}", real=True))
    derived = sp.diff((g.T * givens(n, a, b, theta) * x)[0, 0], theta)
    E = sp.zeros(2, n)
    E[0, a], E[1, b] = 1, 1
    R_partial = sp.Matrix([[-sp.sin(theta), sp.cos(theta)], [-sp.cos(theta), -sp.sin(theta)]])
    printed = ((E * g).T * R_partial * E * x)[0, 0]
    result = judge(derived, printed, [theta, *x, *g], simplifier=sp.trigsimp)
    rng = np.random.default_rng(5)
    error = numeric_error(
        derived,
        [theta, *x, *g],
        _rotation_gradient_reference(n, a, b),
        [rng.standard_normal(5) for _ in range(2 * n + 1)],
    )
    return CheckRecord(
        "DizzyRNN Section 4.1",
        "dL/dtheta = (E_ab dL/dy)^T R_d(theta) E_ab x, R_d = [[-sin, cos], [-cos, -sin]]",
        result.verdict,
        f"n = {n}, (a, b) = ({a + 1}, {b + 1}): {result.evidence}; torch autograd agrees to {error:.1e}",
        {**result.numbers, "torch_max_error": error},
        derived="d/dtheta of g^T R_ab(theta) x",
        printed="(E_ab g)^T R_d(theta) E_ab x",
        quote=QUOTES["DizzyRNN Section 4.1"],
    )


def packed_rotations(n: int) -> tuple[sp.Matrix, list[sp.Symbol]]:
    """``P_1 ... P_K`` over the round-robin schedule of :func:`spectral_analysis.linalg.packed_pairs` (the
    one the toolkit's DizzyRNN uses), one angle per pair: n (n - 1) / 2 angles, every pair rotated once."""
    P, angles = sp.eye(n), []
    for pairs_a, pairs_b in packed_pairs(n):
        packed = sp.eye(n)
        for a, b in zip(pairs_a, pairs_b, strict=True):
            theta = sp.Symbol(f"theta_{a}{b}", real=True)
            angles.append(theta)
            packed = packed * givens(n, a, b, theta)
        P = P * packed
    return P, angles


def pythagorean(angles: list[sp.Symbol]):
    """A zero test for polynomials in sin and cos of ``angles``: expand, replace ``cos^2`` by
    ``1 - sin^2`` until nothing changes."""
    rule = {sp.cos(t) ** 2: 1 - sp.sin(t) ** 2 for t in angles}

    def reduce(expr: sp.Expr) -> sp.Expr:
        expr = sp.expand(expr)
        while True:
            reduced = sp.expand(expr.subs(rule))
            if reduced == expr:
                return expr
            expr = reduced

    return reduce


def check_dizzy_norms() -> list[CheckRecord]:
    """Theorems 3-4: ``dL/dh_(t-1) = P^T (s o dL/dh_t)`` and ``dL/dx_t = Q^T (s o dL/dh_t)`` with
    ``s = sign(z_t)``. Their norms equal ``||dL/dh_t||`` iff every ``s_i^2 = 1``: derived by expanding
    ``||P^T D g||^2`` with ``s_i^2 -> 1`` (z_t without zero entries) and ``cos^2 = 1 - sin^2``."""
    n = 4
    P, angles = packed_rotations(n)
    g = sp.Matrix(sp.symbols(f"g0:{n}", real=True))
    s = sp.symbols(f"s0:{n}", real=True)
    reduce = pythagorean(angles)
    orthogonal = judge(P.T * P, sp.eye(n), angles, simplifier=reduce)
    back = P.T * sp.diag(*s) * g
    expanded = sp.expand((back.T * back)[0, 0])
    squared = reduce(expanded.subs({si**2: 1 for si in s}))
    norm = judge(squared, (g.T * g)[0, 0], [*angles, *g, *s], simplifier=reduce)
    drop = reduce(expanded.subs({s[0]: 0, **{si: 1 for si in s[1:]}}) - (g.T * g)[0, 0])
    caveat = (
        f"; it needs z_t without zero entries (sign(0) = 0: with z_1 = 0 the squared norm changes by "
        f"{drop}) and L depending on h_(t-1) only through h_t"
    )
    records = []
    for source, claim in (
        ("DizzyRNN Theorem 3", "||dL/dh_t||_2 = ||dL/dh_(t-1)||_2"),
        ("DizzyRNN Theorem 4", "W_x square (packed rotations Q): ||dL/dx_t||_2 = ||dL/dh_(t-1)||_2"),
    ):
        verdict = "holds" if norm.verdict == orthogonal.verdict == "holds" else "unverified"
        records.append(
            CheckRecord(
                source,
                claim,
                verdict,
                f"n = {n}, {len(angles)} angles in {n - 1} packed rotations: P^T P = I "
                f"({orthogonal.evidence}); ||P^T diag(s) g||^2 = ||g||^2 for s_i = +-1 "
                f"({norm.evidence})" + caveat,
                {**norm.numbers, "angles": len(angles)},
                derived="||P^T diag(sign z) g||^2 with sign(z_i)^2 = 1",
                printed="||g||^2",
                quote=QUOTES[source],
            )
        )
    return records


def check_kru() -> list[CheckRecord]:
    A, B, C, D = (sp.Matrix(2, 2, sp.symbols(f"{name}0:4", real=True)) for name in "ABCD")
    kron = sp.kronecker_product
    mixed = judge(kron(A, B) * kron(C, D), kron(A * C, B * D), [*A, *B, *C, *D], simplifier=sp.expand)
    error = numeric_error(
        kron(A, B) * kron(C, D),
        [*A, *B, *C, *D],
        lambda *v: (
            torch.kron(torch.tensor(v[:4]).view(2, 2), torch.tensor(v[4:8]).view(2, 2))
            @ torch.kron(torch.tensor(v[8:12]).view(2, 2), torch.tensor(v[12:]).view(2, 2))
        ).numpy(),
        [np.random.default_rng(9).standard_normal(3) + k for k in range(16)],
    )

    def unitary(tag: str) -> tuple[sp.Matrix, list[sp.Symbol]]:
        phi, alpha, beta, theta = sp.symbols(f"phi{tag} alpha{tag} beta{tag} theta{tag}", real=True)
        U = sp.exp(sp.I * phi) * sp.Matrix(
            [
                [sp.exp(sp.I * alpha) * sp.cos(theta), sp.exp(sp.I * beta) * sp.sin(theta)],
                [-sp.exp(-sp.I * beta) * sp.sin(theta), sp.exp(-sp.I * alpha) * sp.cos(theta)],
            ]
        )
        return U, [phi, alpha, beta, theta]

    U1, p1 = unitary("1")
    U2, p2 = unitary("2")
    W = kron(U1, U2)
    is_unitary = judge(W.H * W, sp.eye(4), p1 + p2, simplifier=lambda e: sp.simplify(sp.expand(e)))
    F = sp.Symbol("log2N", positive=True, integer=True)
    counted = sp.summation(2 * 2 * 2, (sp.Symbol("f", integer=True), 1, F))  # p_f q_f entries, complex
    parameters = judge(counted, 8 * F, [F])
    return [
        CheckRecord(
            "KRU Section 3 (mixed product)",
            "(A (x) B)(C (x) D) = (AC) (x) (BD)",
            mixed.verdict,
            f"2 x 2 factors: {mixed.evidence}; torch.kron agrees to {error:.1e}",
            {**mixed.numbers, "torch_max_error": error},
            derived="(A (x) B)(C (x) D)",
            printed="(AC) (x) (BD)",
            quote=QUOTES["KRU Section 3 (mixed product)"],
        ),
        CheckRecord(
            "KRU Section 3.2 (Van Loan)",
            "Kronecker products of unitary factors are unitary",
            is_unitary.verdict,
            f"two general 2 x 2 unitary factors (4 angles each): (U1 (x) U2)^H "
            f"(U1 (x) U2) - I: {is_unitary.evidence}",
            is_unitary.numbers,
            derived="(U1 (x) U2)^H (U1 (x) U2)",
            printed="I",
            quote=QUOTES["KRU Section 3.2 (Van Loan)"],
        ),
        CheckRecord(
            "KRU Section 3 (2 x 2 factors)",
            "2 x 2 complex factors give 8 log2 N parameters",
            parameters.verdict,
            f"log2 N factors of 2 x 2 complex entries (2 reals each): {parameters.evidence}",
            parameters.numbers,
            derived=str(counted),
            printed="8 log2 N",
            quote=QUOTES["KRU Section 3 (2 x 2 factors)"],
        ),
    ]
