# %% [markdown]
# # Check a derivative formula with the symbolic layer
#
# The ICML paper's Householder gradients (Eq. 12, 13) are derived here with SymPy from the reflector's
# definition (Eq. 1) and compared with the printed formula; the same engine runs every check of
# `spectral-analysis verify-symbolic`.

# %%
from spectral_analysis import tables
from spectral_analysis.symbolic import run_symbolic_checks

rows = run_symbolic_checks(["reflector", "householder-gradients"])
tables.checks(record for _, record in rows)[["source", "claim", "verdict"]]

# %% [markdown]
# A formula of your own, judged the same way: the gradient of `f(u) = ||H(u) x||^2` for the reflector
# `H(u) = I - 2 u u^T / ||u||^2` must vanish (a reflector is orthogonal), while a wrong one does not.

# %%
import sympy as sp

from spectral_analysis.symbolic.compare import judge

u = sp.Matrix(sp.symbols("u0:3"))
x = sp.Matrix(sp.symbols("x0:3"))
H = sp.eye(3) - 2 * u * u.T / (u.T * u)[0]
f = ((H * x).T * (H * x))[0]
derived = sp.Matrix([sp.diff(f, ui) for ui in u])
symbols = [*u, *x]
print("zero gradient:", judge(derived, sp.zeros(3, 1), symbols).verdict)
print("a wrong printed formula:", judge(derived, 2 * x, symbols).verdict)
