"""Householder reflectors (ICML Eq. 1, 8, 12, 13 and Algorithm 3), derived with SymPy.

Componentwise for n = 2..6 (the vectors are explicit symbols), and for a symbolic dimension n with
indexed sums where SymPy can (Eq. 12, 13). The gradients are derived from the scalar
``l = g^T H(u) h`` with g held fixed: ``dl/dh = J_h^T g`` and ``dl/du = J_u^T g`` are exactly the
back-propagated gradients of any loss whose gradient at ``H(u) h`` is g.
"""

from __future__ import annotations

import functools

import numpy as np
import sympy as sp
import torch

from spectral_analysis.checks import CheckRecord
from spectral_analysis.linalg import hgrad, hprod, reflector
from spectral_analysis.symbolic.compare import Judgement, judge, numeric_error

QUOTES = {
    "ICML Eq. 1": r"we define the $n \times n$ Householder reflector $\mathcal{H}_k^n(u)$ to be:",
    "ICML Eq. 8": r"= h - 2\frac{\hat{u}_k^{\top}h}{\hat{u}_k^{\top}\hat{u}_k}\hat{u}_k \quad (8)$$",
    "ICML Eq. 12": r"= g - 2\frac{\hat{u}_k^{\top}g}{\hat{u}_k^{\top}\hat{u}_k}\hat{u}_k,$$ (12)",
    "ICML Eq. 13": r"+ 4\frac{\hat{u}_k^\top h}{\hat{u}_k^\top \hat{u}_k} "
                   r"\frac{\hat{u}_k^\top g}{\hat{u}_k^\top \hat{u}_k} \hat{u}_k.$$ (13)",
    "ICML Eq. 13 (matrix form)": r"= -2\left(\frac{\hat{u}_k^\top h}{\hat{u}_k^\top \hat{u}_k} I_n + "
                                 r"\frac{1}{\hat{u}_k^\top \hat{u}_k} h \hat{u}_k^\top",
    "ICML Algorithm 3": r"Output: $\bar{h} = \frac{\partial L}{\partial h}, \bar{u}_k = \frac{\partial L}"
                        r"{\partial u_k}$",
}


SIZES = (2, 3, 4, 5, 6)


def rational_zero(expr: sp.Expr) -> sp.Expr:
    """Decides zero for rational functions: the expanded numerator of the combined fraction."""
    return sp.expand(sp.numer(sp.together(expr)))


def vectors(n: int) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """Symbol vectors ``u, h, g`` of length n."""
    return tuple(sp.Matrix(sp.symbols(f"{name}0:{n}", real=True)) for name in "uhg")


def reflector_matrix(u: sp.Matrix) -> sp.Matrix:
    """Eq. 1 (k = n): ``I - 2 u u^T / ||u||^2``."""
    return sp.eye(u.rows) - 2 * u * u.T / (u.T * u)[0, 0]


def eq8_printed(u: sp.Matrix, h: sp.Matrix) -> sp.Matrix:
    return h - 2 * (u.T * h)[0, 0] / (u.T * u)[0, 0] * u


def eq12_printed(u: sp.Matrix, g: sp.Matrix) -> sp.Matrix:
    return g - 2 * (u.T * g)[0, 0] / (u.T * u)[0, 0] * u


def eq13_printed(u: sp.Matrix, h: sp.Matrix, g: sp.Matrix) -> sp.Matrix:
    uu, uh, ug = (u.T * u)[0, 0], (u.T * h)[0, 0], (u.T * g)[0, 0]
    return -2 * uh / uu * g - 2 * ug / uu * h + 4 * uh / uu * ug / uu * u


def eq13_printed_matrix_form(u: sp.Matrix, h: sp.Matrix, g: sp.Matrix) -> sp.Matrix:
    """The middle expression of Eq. 13: ``-2 (u^T h/u^T u I + h u^T/u^T u - 2 u^T h/(u^T u)^2 u u^T) g``."""
    uu, uh = (u.T * u)[0, 0], (u.T * h)[0, 0]
    return -2 * (uh / uu * sp.eye(u.rows) + h * u.T / uu - 2 * uh / uu**2 * u * u.T) * g


def algorithm3_printed(u: sp.Matrix, h: sp.Matrix, g: sp.Matrix) -> sp.Matrix:
    """Algorithm 3: ``alpha = 2 u^T h/||u||^2``, ``beta = 2 u^T g/||u||^2``, ``h_bar = g - beta u``,
    ``u_bar = -alpha g - beta h + alpha beta u``; returns ``(h_bar; u_bar)`` stacked."""
    alpha = 2 * (u.T * h)[0, 0] / (u.T * u)[0, 0]
    beta = 2 * (u.T * g)[0, 0] / (u.T * u)[0, 0]
    return (g - beta * u).col_join(-alpha * g - beta * h + alpha * beta * u)


@functools.cache
def derived_gradients(n: int) -> tuple[sp.Matrix, sp.Matrix]:
    """``(dl/dh, dl/du)`` of ``l = g^T H(u) h`` for the symbols of :func:`vectors`, entry by entry."""
    u, h, g = vectors(n)
    loss = (g.T * reflector_matrix(u) * h)[0, 0]
    return (sp.Matrix([sp.diff(loss, x) for x in h]), sp.Matrix([sp.diff(loss, x) for x in u]))


def _points(n: int, count: int = 5, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + n)
    return [rng.standard_normal(count) for _ in range(3 * n)]


def _split(values: tuple[float, ...], parts: int) -> list[torch.Tensor]:
    """Symbol values in the order (u, h, g) as float64 tensors of length n each."""
    n = len(values) // parts
    flat = torch.tensor(values, dtype=torch.float64)
    return [flat[k * n : (k + 1) * n] for k in range(parts)]


def _hprod_reference(*values: float) -> np.ndarray:
    u, h = _split(values, 2)
    return hprod(h, u).numpy()


def _hgrad_reference(index: int):
    def reference(*values: float) -> np.ndarray:
        u, h, g = _split(values, 3)
        return hgrad(h, u, g)[index].numpy()

    return reference


def _hgrad_both(*values: float) -> np.ndarray:
    u, h, g = _split(values, 3)
    return torch.cat(hgrad(h, u, g)).numpy()


def _combine(parts: list[tuple[int, Judgement]]) -> tuple[str, str, dict]:
    """One verdict over sizes: the first ``differs`` wins, then ``unverified``, else ``holds``."""
    for wanted in ("differs", "unverified"):
        for n, j in parts:
            if j.verdict == wanted:
                return wanted, f"n = {n}: {j.evidence}", {"n": n, **j.numbers}
    return "holds", f"n = {', '.join(str(n) for n, _ in parts)}: {parts[0][1].evidence}", parts[0][1].numbers


def check_reflector() -> CheckRecord:
    """Eq. 1: symmetric, ``H^2 = I``, eigenvalues 1 (n - 1 times) and -1 (once), via ``tr H = n - 2``
    and ``H u = -u`` (``H^2 = I`` leaves only +-1; the trace counts them)."""
    parts, errors = [], []
    for n in SIZES:
        u, _, _ = vectors(n)
        H = reflector_matrix(u)
        derived = sp.Matrix([*(H - H.T), *(H * H - sp.eye(n)), H.trace() - (n - 2), *(H * u + u)])
        parts.append((n, judge(derived, sp.zeros(*derived.shape), list(u), simplifier=rational_zero)))
        errors.append(
            numeric_error(
                H, list(u), lambda *x: reflector(torch.tensor(x, dtype=torch.float64), len(x)), _points(n)[:n]
            )
        )
    verdict, evidence, numbers = _combine(parts)
    numbers["torch_max_error"] = max(errors)
    return CheckRecord(
        "ICML Eq. 1",
        "H = I - 2 u u^T/||u||^2 is symmetric, H^2 = I, eigenvalues 1 (n-1 times) and -1 (once)",
        verdict,
        evidence + f"; torch `reflector` agrees to {max(errors):.1e}",
        numbers,
        derived="H - H^T, H^2 - I, tr H - (n - 2), H u + u",
        printed="0",
        quote=QUOTES["ICML Eq. 1"],
    )


def check_eq8() -> CheckRecord:
    parts, errors = [], []
    for n in SIZES:
        u, h, _ = vectors(n)
        parts.append(
            (
                n,
                judge(
                    reflector_matrix(u) * h, eq8_printed(u, h), list(u) + list(h), simplifier=rational_zero
                ),
            )
        )
        errors.append(
            numeric_error(reflector_matrix(u) * h, list(u) + list(h), _hprod_reference, _points(n)[: 2 * n])
        )
    verdict, evidence, numbers = _combine(parts)
    numbers["torch_max_error"] = max(errors)
    u, h, _ = vectors(2)
    derived_text = f"{list(sp.simplify(reflector_matrix(u) * h))} (n = 2)"
    return CheckRecord(
        "ICML Eq. 8",
        "H_k(u_k) h = h - 2 (u^T h / u^T u) u",
        verdict,
        evidence + f"; torch `hprod` agrees to {max(errors):.1e}",
        numbers,
        derived=derived_text,
        printed="h - 2 (u^T h / u^T u) u",
        quote=QUOTES["ICML Eq. 8"],
    )


def indexed_gradients() -> tuple[Judgement, Judgement]:
    """Eq. 12 and 13 for a symbolic dimension n, with indexed sums; the Kronecker deltas leave
    ``Piecewise((x_j, j <= n), (0, True))``, and j is an index in 1..n, so the first branch is kept."""
    n = sp.Symbol("n", integer=True, positive=True)
    i, j = sp.Symbol("i", integer=True), sp.Symbol("j", integer=True, positive=True)
    u, h, g = sp.IndexedBase("u"), sp.IndexedBase("h"), sp.IndexedBase("g")

    def total(expr: sp.Expr) -> sp.Sum:
        return sp.Sum(expr, (i, 1, n))

    uu, uh, ug = total(u[i] ** 2), total(u[i] * h[i]), total(u[i] * g[i])
    loss = total(g[i] * h[i]) - 2 * uh * ug / uu

    def inside(expr: sp.Expr) -> sp.Expr:
        return expr.doit().replace(lambda e: isinstance(e, sp.Piecewise), lambda e: e.args[0][0])

    d_h, d_u = inside(sp.diff(loss, h[j])), inside(sp.diff(loss, u[j]))
    printed_h = g[j] - 2 * ug / uu * u[j]
    printed_u = -2 * uh / uu * g[j] - 2 * ug / uu * h[j] + 4 * uh * ug / uu**2 * u[j]
    results = []
    for derived, printed in ((d_h, printed_h), (d_u, printed_u)):
        zero = sp.simplify(derived - printed) == 0
        results.append(
            Judgement(
                "holds" if zero else "unverified",
                "for symbolic n (indexed sums) the difference simplifies to 0"
                if zero
                else "for symbolic n SymPy does not simplify the difference to 0",
                {"symbolic_n": zero, "derived": str(derived)},
            )
        )
    return results[0], results[1]


def _gradient_check(
    source: str, claim: str, index: int, printed_fn, printed_text: str, symbolic_n: Judgement | None
) -> CheckRecord:
    parts, errors = [], []
    for n in SIZES:
        u, h, g = vectors(n)
        derived = derived_gradients(n)[index]
        parts.append(
            (n, judge(derived, printed_fn(u, h, g), list(u) + list(h) + list(g), simplifier=rational_zero))
        )
        errors.append(
            numeric_error(derived, list(u) + list(h) + list(g), _hgrad_reference(index), _points(n))
        )
    verdict, evidence, numbers = _combine(parts)
    if symbolic_n is not None:
        evidence += f"; {symbolic_n.evidence}"
        numbers["symbolic_n"] = symbolic_n.numbers["symbolic_n"]
        if verdict == "holds" and symbolic_n.verdict != "holds":
            verdict = "unverified"
    numbers["torch_max_error"] = max(errors)
    derived_text = (
        symbolic_n.numbers["derived"] + " (entry j, symbolic n)"
        if symbolic_n is not None
        else f"{list(derived_gradients(2)[index])} (n = 2)"
    )
    return CheckRecord(
        source,
        claim,
        verdict,
        evidence + f"; torch `hgrad` agrees to {max(errors):.1e}",
        numbers,
        derived=derived_text,
        printed=printed_text,
        quote=QUOTES[source],
    )


def gradient_checks() -> list[CheckRecord]:
    """Eq. 12, Eq. 13 (both printed forms) and Algorithm 3."""
    symbolic_h, symbolic_u = indexed_gradients()
    records = [
        _gradient_check(
            "ICML Eq. 12",
            "dL/dh = g - 2 (u^T g / u^T u) u",
            0,
            lambda u, h, g: eq12_printed(u, g),
            "g - 2 (u^T g / u^T u) u",
            symbolic_h,
        ),
        _gradient_check(
            "ICML Eq. 13",
            "dL/du = -2 (u^T h/u^T u) g - 2 (u^T g/u^T u) h + 4 (u^T h)(u^T g)/(u^T u)^2 u",
            1,
            eq13_printed,
            "-2 (u^T h/u^T u) g - 2 (u^T g/u^T u) h + 4 (u^T h)(u^T g)/(u^T u)^2 u",
            symbolic_u,
        ),
        _gradient_check(
            "ICML Eq. 13 (matrix form)",
            "dL/du = -2 (u^T h/u^T u I + h u^T/u^T u - 2 u^T h/(u^T u)^2 u u^T) g",
            1,
            eq13_printed_matrix_form,
            "-2 (u^T h/u^T u I + h u^T/u^T u - 2 u^T h/(u^T u)^2 u u^T) g",
            None,
        ),
    ]
    parts, errors = [], []
    for n in SIZES:
        u, h, g = vectors(n)
        derived = derived_gradients(n)[0].col_join(derived_gradients(n)[1])
        parts.append(
            (
                n,
                judge(
                    derived,
                    algorithm3_printed(u, h, g),
                    list(u) + list(h) + list(g),
                    simplifier=rational_zero,
                ),
            )
        )
        errors.append(numeric_error(derived, list(u) + list(h) + list(g), _hgrad_both, _points(n)))
    verdict, evidence, numbers = _combine(parts)
    numbers["torch_max_error"] = max(errors)
    records.append(
        CheckRecord(
            "ICML Algorithm 3",
            "h_bar = g - beta u, u_bar = -alpha g - beta h + alpha beta u "
            "(alpha = 2 u^T h/||u||^2, beta = 2 u^T g/||u||^2)",
            verdict,
            evidence + f"; torch `hgrad` agrees to {max(errors):.1e}",
            numbers,
            derived=f"{list(derived_gradients(2)[0].col_join(derived_gradients(2)[1]))} (n = 2)",
            printed="(g - beta u; -alpha g - beta h + alpha beta u)",
            quote=QUOTES["ICML Algorithm 3"],
        )
    )
    return records
