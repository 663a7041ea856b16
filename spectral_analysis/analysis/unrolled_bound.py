"""Bartlett, Foster & Telgarsky (2017)'s spectrally normalized margin bound, applied to the T-fold
unrolled recurrent network of Eq. 17 (biases absorbed, :mod:`spectral_analysis.analysis.network`).

**The unrolled network.** The input is ``z_0 = (h_0 = 0, x~_1, ..., x~_T)`` of width
``D = n + T n_i``. Layer ``t = 1..T`` is ``z_t = sigma(A_t z_{t-1})`` with
``A_t = [[W, M E_t], [0, I]]`` (``E_t`` picks ``x~_t``; the inputs are carried unchanged) and
``sigma`` = phi on the first ``n`` coordinates, the identity on the rest (1-Lipschitz, ``sigma(0) = 0``
for every activation of the toolkit); layer ``T + 1`` is the readout ``A_{T+1} = [Y, 0]``. The reference
matrices are the fixed carry ``M_t = [[0, 0], [0, I]]`` and ``M_{T+1} = 0``.

**The norms.** By a permutation of the carried inputs, every ``A_t`` has the spectral norm
``s_r = ||[[W, M], [0, I_{n_i}]]||`` and ``b_r = ||(A_t - M_t)^T||_{2,1} = sum_i ||(W_i, M_i)||_2`` (rows);
the readout has ``s_o = ||Y||``, ``b_o = sum_j ||Y_j||_2``. The spectral complexity is
``R_A = s_r^T s_o (T (b_r/s_r)^(2/3) + (b_o/s_o)^(2/3))^(3/2)``.

**The bound** (constants derived here from the paper's covering bound, Theorem 3.3:
``ln N(H_X, eps) <= ||X||^2 ln(2D^2) R_A^2 / eps^2``; Dudley's integral (their Lemma A.5) with
``alpha = 1/sqrt(m)``; the ramp loss is ``1/gamma``-Lipschitz and the margin operator 2-Lipschitz; the
margin theorem (their Lemma A.4)). With probability ``>= 1 - delta``:
``P[argmax y != label] <= R^_gamma + 8/m + 48 ln(m) ||X|| sqrt(ln(2 D^2)) R_A / (gamma m)
+ 3 sqrt(ln(2/delta_k) / (2m))``, ``R^_gamma`` the fraction of training margins ``<= gamma`` and
``||X||^2 = sum over the m sequences of sum_t ||x~_t||^2``. The bound is for fixed
``(s_r, b_r, s_o, b_o, gamma)``: each is rounded outward to the grid ``q^j`` (``q = 1 + 1/T``, up for
the norms, down for gamma, so the network stays in the class), and the union over the grid is paid as
``delta_k = delta prod_i 1 / (c (|j_i| + 1)^2)`` with ``c = pi^2/3 - 1`` (the weights sum to 1). The best
gamma of the union is taken. Tied weights (the same ``A`` at every step) are a subset of the class, so
the bound holds; it does not profit from the tying, which is why it grows like ``s_r^T``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from spectral_analysis.analysis.bound_report import split_margins
from spectral_analysis.analysis.bounds import GAMMA_UNION_CONSTANT
from spectral_analysis.analysis.network import Eq17Network, eq17_network
from spectral_analysis.nn.activations import activate
from spectral_analysis.vocabulary import ACTIVATIONS

LIPSCHITZ = dict.fromkeys(ACTIVATIONS, 1.0)  # every activation of the toolkit is 1-Lipschitz with phi(0) = 0


@dataclass
class UnrolledNorms:
    """The norms of the unrolled network (module docstring), float64."""

    s_recurrent: float
    b_recurrent: float
    s_output: float
    b_output: float
    width: int  # D = max(n + T n_i, n_y)
    T: int

    def log_complexity(self, s_r: float | None = None, b_r: float | None = None, s_o: float | None = None,
                       b_o: float | None = None) -> float:
        """``ln R_A`` (optionally at other, e.g. grid-rounded, norms)."""
        s_r = self.s_recurrent if s_r is None else s_r
        b_r = self.b_recurrent if b_r is None else b_r
        s_o = self.s_output if s_o is None else s_o
        b_o = self.b_output if b_o is None else b_o
        spread = self.T * (b_r / s_r) ** (2 / 3) + (b_o / s_o) ** (2 / 3)
        return self.T * math.log(s_r) + math.log(s_o) + 1.5 * math.log(spread)


def unrolled_norms(net: Eq17Network, T: int) -> UnrolledNorms:
    """The norms from the ``n + n_i`` block (fast path; :func:`unrolled_matrices` is its twin)."""
    if T < 1:
        raise ValueError(f"T must be >= 1, got {T}")
    if net.activation not in LIPSCHITZ:
        raise ValueError(f"no Lipschitz constant for activation {net.activation!r}")
    W, M, Y = net.W, net.M, net.Y
    n, ni = W.shape[0], M.shape[1]
    carry = torch.cat([M.new_zeros(ni, n), torch.eye(ni, dtype=M.dtype, device=M.device)], dim=1)
    block = torch.cat([torch.cat([W, M], dim=1), carry])
    return UnrolledNorms(float(torch.linalg.matrix_norm(block, ord=2)),
                         float(torch.cat([W, M], dim=1).norm(dim=1).sum()),
                         float(torch.linalg.matrix_norm(Y, ord=2)), float(Y.norm(dim=1).sum()),
                         max(n + T * ni, Y.shape[0]), T)


def unrolled_matrices(net: Eq17Network, T: int) -> tuple[list[Tensor], list[Tensor]]:
    """The literal ``A_1 .. A_{T+1}`` and reference matrices ``M_1 .. M_{T+1}`` (the slow reference)."""
    W, M, Y = net.W, net.M, net.Y
    n, ni = W.shape[0], M.shape[1]
    width = n + T * ni
    layers, references = [], []
    for t in range(T):
        A = torch.zeros(width, width, dtype=W.dtype)
        A[:n, :n] = W
        A[:n, n + t * ni:n + (t + 1) * ni] = M
        carry = torch.zeros_like(A)
        carry[n:, n:] = torch.eye(T * ni, dtype=W.dtype)
        layers.append(A + carry)
        references.append(carry)
    readout = torch.zeros(Y.shape[0], width, dtype=W.dtype)
    readout[:, :n] = Y
    layers.append(readout)
    references.append(torch.zeros_like(readout))
    return layers, references


def unrolled_forward(net: Eq17Network, dense_inputs: Tensor) -> Tensor:
    """``F_A(z_0)`` of the literal unrolled network on Eq. 17's dense inputs ``(B, T, n_i)``."""
    T, n = dense_inputs.shape[1], net.W.shape[0]
    layers, _ = unrolled_matrices(net, T)
    z = torch.cat([dense_inputs.new_zeros(dense_inputs.shape[0], n), dense_inputs.flatten(1)], dim=1)
    for A in layers[:-1]:
        z = z @ A.T
        z = torch.cat([activate(z[:, :n], net.activation, net.leak), z[:, n:]], dim=1)
    return z @ layers[-1].T


def _grid_index(value: float, ratio: float, up: bool) -> int:
    exponent = math.log(value) / math.log(ratio)
    return math.ceil(exponent - 1e-12) if up else math.floor(exponent + 1e-12)


def _union_log_weight(indices: list[int]) -> float:
    """``ln prod_i c (|j_i| + 1)^2``: what the union over the grid adds to ``ln(1/delta)``."""
    return sum(math.log(GAMMA_UNION_CONSTANT * (abs(j) + 1) ** 2) for j in indices)


@dataclass
class UnrolledBound:
    """The bound of the module docstring at its best grid gamma (``bound`` may exceed 1: vacuous)."""

    bound: float
    log10_bound: float
    gamma: float
    margin_loss: float
    log10_complexity_term: float  # log10 of 48 ln(m) ||X|| sqrt(ln 2D^2) R_A / (gamma m)
    log10_spectral_complexity: float  # log10 R_A
    s_recurrent: float
    b_recurrent: float
    s_output: float
    b_output: float
    data_norm: float
    width: int
    m: int
    T: int
    delta: float

    def as_dict(self) -> dict:
        return asdict(self)


def unrolled_bound(norms: UnrolledNorms, margins: Tensor, data_norm: float, delta: float = 0.025,
                   gammas: int = 200) -> UnrolledBound:
    """The bound at each of ``gammas`` grid points below the largest margin; the smallest is returned."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    m = margins.numel()
    if m < 2:
        raise ValueError(f"need at least 2 training margins, got {m}")
    if not data_norm > 0:
        raise ValueError(f"the data norm ||X|| must be > 0, got {data_norm}")
    ratio = 1.0 + 1.0 / norms.T
    rounded = [_grid_index(q, ratio, up=True) for q in
               (norms.s_recurrent, norms.b_recurrent, norms.s_output, norms.b_output)]
    s_r, b_r, s_o, b_o = (ratio ** j for j in rounded)
    log_r_a = norms.log_complexity(s_r, b_r, s_o, b_o)
    root_log_width = math.sqrt(math.log(2 * norms.width ** 2))
    log_fixed = log_r_a + math.log(48 * math.log(m) * data_norm * root_log_width / m)
    sorted_margins = torch.sort(margins.detach().to(torch.float64).flatten()).values
    top = float(sorted_margins[-1])
    best = None
    if top > 0:
        high = _grid_index(top, ratio, up=False)
        for j in range(high, high - gammas, -1):
            gamma = ratio ** j
            loss = int(torch.searchsorted(sorted_margins, torch.tensor(gamma, dtype=torch.float64),
                                          right=True)) / m
            log_term = log_fixed - math.log(gamma)
            confidence = math.log(2 / delta) + _union_log_weight([*rounded, j])
            value = loss + 8 / m + math.exp(min(log_term, 700.0)) + 3 * math.sqrt(confidence / (2 * m))
            if best is None or value < best[0]:
                best = (value, gamma, loss, log_term)
    if best is None:  # no positive margin: R^_gamma = 1 at every gamma
        best = (1.0 + 8 / m, 0.0, 1.0, math.inf)
    value, gamma, loss, log_term = best
    overflow = log_term >= 700.0  # the complexity term dominates: log10 of the bound is its own
    return UnrolledBound(math.inf if overflow else value,
                         log_term / math.log(10) if overflow else math.log10(value), gamma, loss,
                         log_term / math.log(10), log_r_a / math.log(10), norms.s_recurrent,
                         norms.b_recurrent, norms.s_output, norms.b_output, data_norm, norms.width, m,
                         norms.T, delta)


def model_unrolled_bound(model: torch.nn.Module, inputs: Tensor, labels: Tensor,
                         symbolic_inputs: bool = False, delta: float = 0.025) -> UnrolledBound:
    """The bound for a one-layer recurrent model of Eq. 17 on its training sequences ``(inputs, labels)``
    (``T`` is their length; margins of the last output).

    ```python
    >>> from spectral_analysis.nn import build_model
    >>> _ = torch.manual_seed(0)
    >>> x, y = torch.randn(100, 5, 2), torch.randint(0, 2, (100,))
    >>> bound = model_unrolled_bound(build_model("rnn", 2, 4, 2), x, y)
    >>> bound.bound > 1  # vacuous: it grows like s_r^T
    True

    ```
    """
    net = eq17_network(model, symbolic_inputs)
    if len(inputs) != len(labels):
        raise ValueError(f"need one label per sequence, got {len(inputs)} sequences and {len(labels)} labels")
    data_norm = math.sqrt(sum(float(net.inputs(inputs[start:start + 4096]).pow(2).sum())
                              for start in range(0, len(inputs), 4096)))
    margins = split_margins(model, inputs, labels)
    return unrolled_bound(unrolled_norms(net, inputs.shape[1]), margins, data_norm, delta)
