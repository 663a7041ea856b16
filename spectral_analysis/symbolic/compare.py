"""Judging a derived expression against a printed one, and against the torch implementation.

SymPy's ``simplify`` can miss a zero, and (as the issue warns) some matrix-form derivatives come back as
a silent 0. So a symbolic zero alone never makes a verdict: :func:`judge` also evaluates the difference
at random rational points to 60 digits.

- ``holds``: the difference simplifies to 0 and vanishes at every point;
- ``differs``: it is nonzero at some point (the point and both values are the evidence);
- ``unverified``: it vanishes at every point, but SymPy cannot simplify it to 0.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

ZERO = 1e-40  # |value| below this at 60 digits counts as zero
POINTS = 6


@dataclass
class Judgement:
    """A verdict and its evidence (see the module docstring)."""

    verdict: str
    evidence: str
    numbers: dict[str, Any]


def as_matrix(expr: Any) -> sp.Matrix:
    """A SymPy matrix from a scalar, a list or a matrix expression."""
    if isinstance(expr, sp.MatrixBase):
        return sp.Matrix(expr)
    if isinstance(expr, (list, tuple)):
        return sp.Matrix(expr)
    return sp.Matrix([expr])


def random_point(
    symbols: Sequence[sp.Symbol], rng: random.Random, positive: bool = False
) -> dict[sp.Symbol, sp.Rational]:
    """Random nonzero rationals ``p/q`` with ``|p| <= 9``, ``1 <= q <= 5``; positive integers up to 20
    with ``positive`` (for counts)."""
    point = {}
    for symbol in symbols:
        if positive:
            point[symbol] = sp.Integer(rng.randint(1, 20))
            continue
        numerator = rng.choice([k for k in range(-9, 10) if k])
        point[symbol] = sp.Rational(numerator, rng.randint(1, 5))
    return point


def _value(expr: sp.Expr, point: dict) -> complex | None:
    """The value at a point: exact for rational functions (``xreplace``), else 60 digits."""
    value = sp.sympify(expr).xreplace(point)
    if value.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
        return None
    if value.is_Rational:
        return complex(value) if value != 0 else 0j
    value = sp.N(value, 60)
    if value.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
        return None
    return complex(value)


def judge(
    derived: Any,
    printed: Any,
    symbols: Sequence[sp.Symbol],
    seed: int = 0,
    simplifier: Callable[[sp.Expr], sp.Expr] = sp.simplify,
    positive: bool = False,
    valid: Callable[[dict], bool] | None = None,
) -> Judgement:
    """Compare two expressions (scalars or matrices of the same shape); see the module docstring.
    ``positive``: sample positive integers (sizes and counts) instead of signed rationals; ``valid``:
    points it rejects (e.g. a reflector length k > n) are skipped, never evidence."""
    a, b = as_matrix(derived), as_matrix(printed)
    if a.shape != b.shape:
        return Judgement("differs", f"shapes differ: derived {a.shape}, printed {b.shape}", {})
    difference = a - b
    rng = random.Random(seed)
    kind = "integer" if positive else "rational"
    checked = 0
    for _ in range(4 * POINTS):
        point = random_point(symbols, rng, positive)
        if valid is not None and not valid(point):
            continue
        values = [_value(entry, point) for entry in difference]
        if any(v is None for v in values):  # a pole: try another point
            continue
        checked += 1
        worst = int(np.argmax([abs(v) for v in values]))
        if abs(values[worst]) > ZERO:
            where = ", ".join(f"{k} = {v}" for k, v in point.items())
            derived_value = complex(sp.N(a[worst].xreplace(point), 15))
            printed_value = complex(sp.N(b[worst].xreplace(point), 15))
            return Judgement(
                "differs",
                f"at {where}: entry {worst} is {_short(derived_value)} derived, "
                f"{_short(printed_value)} printed",
                {
                    "point": {str(k): str(v) for k, v in point.items()},
                    "entry": worst,
                    "derived_value": _short(derived_value),
                    "printed_value": _short(printed_value),
                },
            )
        if checked == POINTS:
            break
    if checked == 0:
        return Judgement("unverified", "every random point hit a pole", {"points": 0})
    symbolic_zero = all(simplifier(entry) == 0 for entry in difference)
    if symbolic_zero:
        return Judgement(
            "holds",
            f"the difference simplifies to 0, and is 0 (to 60 digits) at {checked} random {kind} points",
            {"points": checked, "symbolic_zero": True},
        )
    return Judgement(
        "unverified",
        f"0 (to 60 digits) at {checked} random {kind} points, but SymPy does not "
        "simplify the difference to 0",
        {"points": checked, "symbolic_zero": False},
    )


def _short(value: complex) -> str:
    return f"{value.real:.10g}" if abs(value.imag) < 1e-30 else f"{value.real:.10g}{value.imag:+.10g}i"


def numeric_error(
    expr: Any,
    symbols: Sequence[sp.Symbol],
    reference: Callable[..., np.ndarray],
    arrays: Sequence[np.ndarray],
) -> float:
    """Largest relative difference between the lambdified ``expr`` and ``reference`` at ``arrays``
    (one float64 array per symbol, the same length): how far the torch implementation is from the
    derived formula."""
    function = sp.lambdify(list(symbols), as_matrix(expr), "numpy")
    worst = 0.0
    for values in zip(*arrays, strict=True):
        mine = np.asarray(function(*values), dtype=np.float64).reshape(-1)
        theirs = np.asarray(reference(*values), dtype=np.float64).reshape(-1)
        worst = max(worst, float(np.abs(mine - theirs).max() / max(1.0, float(np.abs(theirs).max()))))
    return worst
