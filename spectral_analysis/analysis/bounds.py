"""The PAC-Bayes generalization bound of the ICML paper (Theorem 5, Corollary 1, Appendix A.6).

Everything is computed in log space: ``max(||W||^(2T-2), 1)`` alone overflows a float for T = 784
and ``||W|| = 2``. Norms are spectral unless called Frobenius.

**Theorem 5** (the complexity term, O-form):
``G(w) = B^2 T^4 h ln(h) / gamma^2 * ||w||^2 * max(||W||^(2T-2), 1) max(||M||^2, 1) max(||Y||^2, 1)``,
``||w||^2 = ||W||_F^2 + ||M||_F^2 + ||Y||_F^2``, ``h = max(n, n_y, n_i)``.
**Corollary 1**: the same with ``||W||`` replaced by the largest singular value the structure allows
(Spectral-RNN: ``sigma* + r``, the paper's ``1 + r``; oRNN: 1).

**The explicit bound** (:func:`pac_bayes_bound`) is what the proof in A.6 yields, with these
constants (derived here where the extracted proof is garbled or skips a step):

1. Lemma 2 (Neyshabur et al.): ``L_0 <= L^_gamma + 4 sqrt((KL + ln(6m/delta)) / (m - 1))``.
2. Prior ``N(0, sigma^2 I)``, perturbation ``u ~ N(0, sigma^2 I)``; ``KL = ||w||^2 / (2 sigma^2)``.
3. Tropp's bound and a union over the three matrices: with probability >= 1/2 every perturbation
   has spectral norm ``<= eps = sigma sqrt(2h ln(12h))`` (``3 * 2h e^{-ln 12h} = 1/2``: the paper's 12h).
4. Lemma 3 needs ``||dW|| <= ||W||/T`` and ``||dY|| <= ||Y||/T``; the proof never checks them
   (they fail for a small ``||W||``). Its induction goes through unchanged under the weaker
   ``||dW||, ||dY|| <= max(||W||, 1)/T, max(||Y||, 1)/T`` (``||W + dW|| <= (1 + 1/T) max(||W||, 1)``)
   and then gives ``|dy| <= T B beta eps (Te + e + 1)``, ``beta = max(||W||^(T-1), 1) max(||Y||, 1)
   max(||M||, 1)``. We check ``eps <= 1/T`` (which implies both) for every bound we report.
5. ``sigma = gamma / (C sqrt(2h ln 12h) T B (Te + e + 1) beta~)`` with the paper's ``C = 12`` (read from
   the garbled ``12 sqrt(2h ln(12h) TB(Te+e+1) beta~)``: the root covers ``2h ln(12h)`` only, as the
   ``T^4`` of G requires). With ``beta <= e beta~`` the output moves by at most ``gamma e / C < gamma/4``;
   any ``C >= 4e ~ 10.87`` works, so 12 is valid.
6. The grid ``beta~_s = (1 + s e) gamma / (2BT)``, ``s = 0 .. K-1`` with ``K = floor((sqrt(m) - 1)/e) + 1``
   (the paper says ``sqrt(m)/e``, one short when rounded down), ``delta -> delta / K``. We use the
   smallest grid point ``>= beta / e``. Below the grid (``2BT beta <= gamma``) every margin is
   ``<= gamma`` and the bound is trivial; above it the paper asserts the bound is >= 1 without a lower
   bound on ``||w||``; we check that claim with the smallest admissible ``beta~ = beta/e``.
7. Lemma 2 is for a fixed gamma. When gamma is taken from the training margins (a quantile), it is
   rounded down to a power of two ``2^j`` and a union bound over ``j`` is paid:
   ``delta_j = delta / (c (|j| + 1)^2)``, ``c = pi^2/3 - 1`` (so the ``delta_j`` sum to ``delta``).

The bound is on the expected 0-1 error ``L_0``; it is vacuous when above 1.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from spectral_analysis.analysis.network import Eq17Network

LOG10_E = math.log10(math.e)
SIGMA_CONSTANT = 12.0  # C in sigma = gamma / (C sqrt(2h ln 12h) T B (Te+e+1) beta~), paper's value (>= 4e)
GAMMA_UNION_CONSTANT = math.pi ** 2 / 3 - 1  # sum over j in Z of 1/(|j|+1)^2


@dataclass
class WeightNorms:
    """Spectral and Frobenius norms of W, M, Y (Eq. 17, biases absorbed)."""

    W: float
    M: float
    Y: float
    W_frobenius: float
    M_frobenius: float
    Y_frobenius: float

    @property
    def w_squared(self) -> float:
        """``||w||^2 = ||W||_F^2 + ||M||_F^2 + ||Y||_F^2``."""
        return self.W_frobenius ** 2 + self.M_frobenius ** 2 + self.Y_frobenius ** 2


def weight_norms(net: Eq17Network) -> WeightNorms:
    def spectral(A: torch.Tensor) -> float:
        return float(torch.linalg.matrix_norm(A, ord=2)) if A.numel() else 0.0

    return WeightNorms(spectral(net.W), spectral(net.M), spectral(net.Y), float(net.W.norm()),
                       float(net.M.norm()), float(net.Y.norm()))


def check_bound_inputs(T: int, B: float, gamma: float, delta: float | None = None) -> None:
    """``ValueError`` naming the bad argument."""
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ValueError(f"the sequence length T must be an integer >= 1, got {T!r}")
    if not (math.isfinite(B) and B > 0):
        raise ValueError(f"the data bound B must be a finite number > 0, got {B}")
    if not (math.isfinite(gamma) and gamma > 0):
        raise ValueError(f"the margin gamma must be > 0, got {gamma}")
    if delta is not None and not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta}")


def _log10_max_power(norm: float, power: int) -> float:
    """``log10 max(norm^power, 1)``."""
    if power == 0 or norm <= 1.0:
        return 0.0
    return power * math.log10(norm)


@dataclass
class ComplexityTerm:
    """``log10 G(w)`` with each factor's log10 (Theorem 5, or Corollary 1 when ``corollary``)."""

    log10_G: float  # noqa: N815 (the paper's G)
    factors: dict[str, float]
    W_norm_used: float  # ||W||, or the structural bound for Corollary 1
    corollary: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def complexity_term(norms: WeightNorms, T: int, h: int, B: float, gamma: float,
                    W_norm: float | None = None) -> ComplexityTerm:
    """``log10 G(w)`` of Theorem 5; with ``W_norm`` (a bound on ``||W||``), Corollary 1's version."""
    check_bound_inputs(T, B, gamma)
    w = norms.W if W_norm is None else W_norm
    h_ln_h = h * math.log(h)
    factors = {
        "B^2": 2 * math.log10(B),
        "T^4": 4 * math.log10(T),
        "h ln h": math.log10(h_ln_h) if h_ln_h > 0 else -math.inf,
        "1/gamma^2": 0.0 - 2 * math.log10(gamma),
        "||W||_F^2 + ||M||_F^2 + ||Y||_F^2": (math.log10(norms.w_squared) if norms.w_squared > 0
                                              else -math.inf),
        "max(||W||^(2T-2), 1)": _log10_max_power(w, 2 * T - 2),
        "max(||M||^2, 1)": _log10_max_power(norms.M, 2),
        "max(||Y||^2, 1)": _log10_max_power(norms.Y, 2),
    }
    return ComplexityTerm(sum(factors.values()), factors, w, W_norm is not None)


@dataclass
class PacBayesBound:
    """The explicit bound of A.6 on ``L_0`` and every quantity it is made of (logs are base 10)."""

    margin_loss: float
    m: int
    delta: float
    gamma: float  # the margin the bound uses (rounded down to 2^j when chosen from the data)
    delta_used: float  # after the union bounds over beta~ (and gamma)
    log10_beta: float
    grid_size: int
    grid_index: int | None  # s of the chosen beta~, None outside the grid
    log10_beta_tilde: float | None
    log10_sigma: float | None
    log10_kl: float | None
    eps_times_length: float | None  # eps T, must be <= 1 (Lemma 3's hypotheses, step 4)
    log10_complexity: float | None  # log10 of 4 sqrt((KL + ln(6m/delta'))/(m-1))
    bound: float | None  # L^_gamma + complexity; None when it overflows or is not covered
    vacuous: bool
    regime: str  # "grid", "below-grid (all margins <= gamma)", "above-grid (trivial)", "not covered"
    sigma_constant: float = SIGMA_CONSTANT
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def gamma_grid_point(gamma: float) -> tuple[float, int]:
    """``(2^j, j)`` with ``2^j <= gamma < 2^(j+1)``: the data-chosen margin on a fixed grid (step 7)."""
    j = math.floor(math.log2(gamma))
    return 2.0 ** j, j


def pac_bayes_bound(net: Eq17Network, T: int, B: float, gamma: float, margin_loss: float, m: int,
                    delta: float, gamma_from_data: bool = False) -> PacBayesBound:
    """The explicit bound ``L_0 <= L^_gamma + 4 sqrt((KL + ln(6 m K / delta)) / (m - 1))`` of A.6.

    ``margin_loss`` is ``L^_gamma`` on ``m`` training samples at this ``gamma`` (when
    ``gamma_from_data``, at ``gamma`` already rounded with :func:`gamma_grid_point`).
    """
    check_bound_inputs(T, B, gamma, delta)
    if isinstance(m, bool) or not isinstance(m, int) or m < 2:
        raise ValueError(f"the bound needs at least 2 training samples, got m = {m!r}")
    if not 0.0 <= margin_loss <= 1.0:
        raise ValueError(f"a margin loss is a fraction in [0, 1], got {margin_loss}")
    norms = weight_norms(net)
    h = net.sizes["h"]
    notes = []
    delta_used = delta
    if gamma_from_data:
        _, j = gamma_grid_point(gamma)
        delta_used /= GAMMA_UNION_CONSTANT * (abs(j) + 1) ** 2
        notes.append(f"gamma from the training margins, rounded down to 2^{j}: union bound over j")
    K = math.floor((math.sqrt(m) - 1) / math.e) + 1
    delta_used /= K
    log_beta = (_log10_max_power(norms.W, T - 1) + _log10_max_power(norms.M, 1)
                + _log10_max_power(norms.Y, 1))
    log_unit = math.log10(gamma / (2 * B * T))  # log10 of gamma / (2BT), the grid's spacing unit
    slack = math.log(6 * m / delta_used)
    root = math.sqrt(2 * h * math.log(12 * h))
    te = T * math.e + math.e + 1

    def log_sigma(log_beta_tilde: float) -> float:
        return math.log10(gamma / (SIGMA_CONSTANT * root * T * B * te)) - log_beta_tilde

    def log_complexity(log_kl: float) -> float:
        ln_kl = log_kl / LOG10_E
        total = (math.exp(ln_kl) + slack) if ln_kl < 700 else math.inf
        if math.isinf(total):  # log10 of 4 sqrt(KL / (m - 1)) without overflowing
            return math.log10(4) + 0.5 * (log_kl - math.log10(m - 1))
        return math.log10(4 * math.sqrt(total / (m - 1)))

    def log_kl(log_s: float) -> float:
        return math.log10(norms.w_squared / 2) - 2 * log_s if norms.w_squared > 0 else -math.inf

    base = dict(margin_loss=margin_loss, m=m, delta=delta, gamma=gamma, delta_used=delta_used,
                log10_beta=log_beta, grid_size=K, notes=notes)
    if log_beta + math.log10(2 * B * T) <= math.log10(gamma):
        notes.append("2BT beta <= gamma: |f(x)[y] - f(x)[j]| <= 2 ||y|| <= 2TB beta, "
                     "every margin is <= gamma")
        return PacBayesBound(**base, grid_index=None, log10_beta_tilde=None, log10_sigma=None, log10_kl=None,
                             eps_times_length=None, log10_complexity=None, bound=1.0, vacuous=True,
                             regime="below-grid (all margins <= gamma)")
    # smallest grid point (1 + s e) unit >= beta / e
    log_ratio = log_beta - LOG10_E - log_unit  # log10 of (beta / e) / unit
    s = 0 if log_ratio <= 0 else math.ceil((10 ** log_ratio - 1) / math.e) if log_ratio < 300 else None
    if s is None or s >= K:
        lowest = log_beta - LOG10_E
        log_c = log_complexity(log_kl(log_sigma(lowest)))
        if log_c >= 0:
            notes.append("beta is above the grid; even beta~ = beta/e gives a complexity term >= 1 (trivial)")
            return PacBayesBound(**base, grid_index=None, log10_beta_tilde=None, log10_sigma=None,
                                 log10_kl=None, eps_times_length=None, log10_complexity=log_c,
                                 bound=None, vacuous=True, regime="above-grid (trivial)")
        notes.append("beta is above the grid and the paper's claim that the bound is then trivial does not "
                     "hold here (||w|| too small): no bound")
        return PacBayesBound(**base, grid_index=None, log10_beta_tilde=None, log10_sigma=None, log10_kl=None,
                             eps_times_length=None, log10_complexity=log_c, bound=None, vacuous=False,
                             regime="not covered")
    log_bt = log_unit + math.log10(1 + s * math.e)
    log_s = log_sigma(log_bt)
    eps_T = 10 ** (log_s) * root * T
    if eps_T > 1:
        notes.append(f"eps T = {eps_T:.3g} > 1: Lemma 3's hypotheses fail for this sigma, no bound")
        return PacBayesBound(**base, grid_index=s, log10_beta_tilde=log_bt, log10_sigma=log_s,
                             log10_kl=log_kl(log_s), eps_times_length=eps_T, log10_complexity=None,
                             bound=None, vacuous=False, regime="not covered")
    lk = log_kl(log_s)
    log_c = log_complexity(lk)
    complexity = 10 ** log_c if log_c < 300 else math.inf
    bound = margin_loss + complexity
    return PacBayesBound(**base, grid_index=s, log10_beta_tilde=log_bt, log10_sigma=log_s, log10_kl=lk,
                         eps_times_length=eps_T, log10_complexity=log_c,
                         bound=bound if math.isfinite(bound) else None, vacuous=bound > 1, regime="grid")
