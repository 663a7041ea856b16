"""Claim 1 of the earlier version (Section 6): the linear-RNN risk and its gradient, derived with SymPy
for n = 2, t = 2, n_y = 2 from the definition ``R = E||Y script-W vec X - A vec X - eta||^2``.

The expectation is taken on the expanded polynomial: ``x_i x_j -> Sigma_ij``, ``x_i eta_k -> 0``
(``E[eta | X] = 0``) and ``eta_k^2 -> N_kk`` with ``tr N = C`` (only ``E||eta||^2 = C`` is assumed).
"""

from __future__ import annotations

import functools

import numpy as np
import sympy as sp
import torch

from spectral_analysis.checks import CLAIM1_GRADIENT_QUOTE, CLAIM1_RISK_QUOTE, CheckRecord
from spectral_analysis.symbolic.compare import judge, numeric_error

N, T = 2, 2


@functools.cache
def setting() -> dict:
    W = sp.Matrix(N, N, sp.symbols(f"w0:{N * N}", real=True))
    Y = sp.Matrix(N, N, sp.symbols(f"y0:{N * N}", real=True))
    A = sp.Matrix(N, N * T, sp.symbols(f"a0:{N * N * T}", real=True))
    d = N * T
    entries = {}
    for i in range(d):
        for j in range(i, d):
            entries[(i, j)] = entries[(j, i)] = sp.Symbol(f"S{i}{j}", real=True)
    Sigma = sp.Matrix(d, d, lambda i, j: entries[(i, j)])
    C = sp.Symbol("C", real=True)
    script_W = W
    for power in range(2, T + 1):
        script_W = script_W.row_join(W**power)
    symbols = list(W) + list(Y) + list(A) + sorted(set(entries.values()), key=str) + [C]
    return {"W": W, "Y": Y, "A": A, "Sigma": Sigma, "C": C, "script_W": script_W, "symbols": symbols}


@functools.cache
def derived_risk() -> sp.Expr:
    """``E||o - y||^2`` from the definition (see the module docstring)."""
    s = setting()
    x = sp.Matrix(sp.symbols(f"x0:{N * T}", real=True))
    eta = sp.Matrix(sp.symbols(f"eta0:{N}", real=True))
    residual = s["Y"] * s["script_W"] * x - s["A"] * x - eta
    loss = sp.expand((residual.T * residual)[0, 0])
    noise = sp.symbols(f"n0:{N}", real=True)
    expectation = sp.Integer(0)
    for monomial, coefficient in sp.Poly(loss, *x, *eta).terms():
        xs, etas = monomial[: N * T], monomial[N * T :]
        if sum(etas) == 0:  # x_i x_j
            index = [i for i, p in enumerate(xs) for _ in range(p)]
            expectation += coefficient * s["Sigma"][index[0], index[1]]
        elif sum(etas) == 2 and sum(xs) == 0:  # eta_k^2 (only squares occur)
            expectation += coefficient * noise[etas.index(2)]
        # x_i eta_k: E[eta | X] = 0 removes it
    return sp.expand(expectation.subs(noise[-1], s["C"] - sum(noise[:-1])))


def printed_risk() -> sp.Expr:
    """``||(Y script-W - A) Sigma^(1/2)||_F^2 + C = tr(E Sigma E^T) + C`` (Sigma^(1/2) symmetric)."""
    s = setting()
    E = s["Y"] * s["script_W"] - s["A"]
    return (E * s["Sigma"] * E.T).trace() + s["C"]


def printed_gradient() -> sp.Matrix:
    """Claim 1's ``(Y script-W - A) Sigma (I | 2W | ... | t W^(t-1))^T`` (n_y = n)."""
    s = setting()
    factors = sp.eye(N)
    for power in range(2, T + 1):
        factors = factors.row_join(power * s["W"] ** (power - 1))
    return (s["Y"] * s["script_W"] - s["A"]) * s["Sigma"] * factors.T


def exact_gradient() -> sp.Matrix:
    """The toolkit's closed form ``2 sum_i sum_(j<i) (W^j)^T Y^T G_i (W^(i-1-j))^T``."""
    s = setting()
    G = (s["Y"] * s["script_W"] - s["A"]) * s["Sigma"]
    total = sp.zeros(N, N)
    for i in range(1, T + 1):
        block = s["Y"].T * G[:, (i - 1) * N : i * N]
        for j in range(i):
            total += (s["W"] ** j).T * block * (s["W"] ** (i - 1 - j)).T
    return 2 * total


def _autograd_gradient(*values: float) -> np.ndarray:
    """dR/dW by torch autograd of ``tr(E Sigma E^T) + C`` at the symbols' values."""
    s = setting()
    x = torch.tensor(values, dtype=torch.float64)
    W = x[: N * N].reshape(N, N).clone().requires_grad_()
    Y = x[N * N : 2 * N * N].reshape(N, N)
    A = x[2 * N * N : 2 * N * N + N * N * T].reshape(N, N * T)
    names = [str(v) for v in s["symbols"]]
    lookup = dict(zip(names, x.tolist(), strict=True))
    Sigma = torch.tensor(
        [[lookup[str(s["Sigma"][i, j])] for j in range(N * T)] for i in range(N * T)], dtype=torch.float64
    )
    script_W = torch.cat([W, W @ W], dim=1)
    E = Y @ script_W - A
    (grad,) = torch.autograd.grad(torch.trace(E @ Sigma @ E.T), W)
    return grad.reshape(-1).numpy()


def check_claim1() -> list[CheckRecord]:
    s = setting()
    risk = judge(derived_risk(), printed_risk(), s["symbols"])
    gradient = sp.Matrix([sp.diff(derived_risk(), w) for w in s["W"]])
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(4) for _ in s["symbols"]]
    error = numeric_error(gradient, s["symbols"], _autograd_gradient, arrays)
    exact = judge(gradient, exact_gradient().reshape(N * N, 1), s["symbols"])
    printed = judge(gradient, printed_gradient().reshape(N * N, 1), s["symbols"])
    scaled = judge(gradient, (2 * s["Y"].T * printed_gradient()).reshape(N * N, 1), s["symbols"])
    return [
        CheckRecord(
            "earlier version, Claim 1 (risk)",
            "R[W] = ||(Y script-W - A) Sigma^(1/2)||_F^2 + C",
            risk.verdict,
            f"n = n_y = {N}, t = {T}, derived from E||o - y||^2: {risk.evidence}",
            risk.numbers,
            derived="E||Y script-W x - A x - eta||^2 (moments substituted)",
            printed="tr((Y script-W - A) Sigma (Y script-W - A)^T) + C",
            quote=CLAIM1_RISK_QUOTE,
        ),
        CheckRecord(
            "earlier version, Claim 1 (gradient)",
            "grad_W R = (Y script-W - A) Sigma (I | 2W | ... | t W^(t-1))^T",
            printed.verdict,
            f"n = n_y = {N}, t = {T}: {printed.evidence}; with 2 Y^T restored it still {scaled.verdict} "
            f"({scaled.evidence}); the toolkit's exact gradient 2 sum_i sum_(j<i) (W^j)^T Y^T G_i "
            f"(W^(i-1-j))^T {exact.verdict} ({exact.evidence}); the derived gradient matches torch autograd "
            f"to {error:.1e}",
            {
                "printed": printed.numbers,
                "printed_with_2Y^T": scaled.verdict,
                "exact": exact.verdict,
                "torch_max_error": error,
            },
            derived="d/dW of the derived risk, entry by entry",
            printed="(Y script-W - A) Sigma (I | 2W)^T",
            quote=CLAIM1_GRADIENT_QUOTE,
        ),
    ]
