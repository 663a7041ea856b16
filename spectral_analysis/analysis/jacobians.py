"""Jacobian products over time, gradient flow and Lyapunov exponents of a recurrent model.

Every recurrent model exposes a flat state ``s_t = step(s_{t-1}, x_t)`` and its step Jacobian
``A_t = ds_t / ds_{t-1}`` (closed form ``D_t W`` for Eq. 4, ``torch.func`` for the others), so all
of this works for any model of the registry. For one layer ``s_t = h^(t)``.

- ``J(t) = dh^(T)/dh^(t)`` by one backward recursion ``J(t) = J(t+1) A_{t+1}``, ``J(T) = I``, batched
  over samples and rescaled at every step (its log scale is carried), so T = 784 neither overflows
  nor underflows; its singular values are reported as log10. KRU's Eq. 3 bounds
  ``||J(t)|| <= prod ||D_k W|| <= ||W||^(T-t)`` for 1-Lipschitz activations.
- ``||s_t||``, the state's own size over t (a forward blow-up shows here first).
- ``||dL/dh^(t)||`` for the task's loss: one backward pass with a zero offset added to every state.
- Lyapunov exponents by the QR method (Benettin et al.): ``Q_t R_t = A_t Q_{t-1}`` with
  ``diag(R_t) > 0``; ``lambda_i = (1/T) sum_t ln R_t[i, i]`` (natural log, per step).

``model``: a toolkit recurrent model, a :func:`~spectral_analysis.load` subject, or a user's module
(``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM``, alone or with an ``nn.Linear`` head), imported on the way;
``x`` is ``(batch, time, features)`` whatever the module's ``batch_first``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from tqdm import tqdm

from spectral_analysis.io.subjects import Subject, as_recurrent_model
from spectral_analysis.nn import RecurrentModel
from spectral_analysis.vocabulary import MODRELU

Analyzable = RecurrentModel | Subject | nn.Module  # what the analyzers take (module docstring)
LN10 = math.log(10.0)


def _check(model: RecurrentModel, x: Tensor) -> None:
    if not isinstance(model, RecurrentModel):
        raise ValueError(f"Jacobians over time need a recurrent model, got {type(model).__name__}")
    model.check_input(x)


def state_trajectory(model: RecurrentModel, x: Tensor, s0: Tensor | None = None) -> Tensor:
    """``s_0 .. s_T`` as ``(B, T + 1, d)`` (no gradients)."""
    _check(model, x)
    step = model.step_function()
    with torch.no_grad():
        s = model.flat_state(model.start_state(x.shape[0])) if s0 is None else s0
        states = [s]
        for t in range(x.shape[1]):
            s = step(s, x[:, t])
            states.append(s)
    return torch.stack(states, dim=1)


def _trajectory(model: RecurrentModel, x: Tensor, s0: Tensor | None, states: Tensor | None) -> Tensor:
    """``states`` when the caller already ran the forward pass (checked against ``x``), else a new run."""
    if states is None:
        return state_trajectory(model, x, s0)
    _check(model, x)
    if states.dim() != 3 or states.shape[:2] != (x.shape[0], x.shape[1] + 1):
        raise ValueError(f"states must be state_trajectory's (B, T + 1, d) = ({x.shape[0]}, "
                         f"{x.shape[1] + 1}, d) for inputs of shape {tuple(x.shape)}, "
                         f"got {tuple(states.shape)}")
    return states


def state_norms(model: Analyzable, x: Tensor, s0: Tensor | None = None,
                states: Tensor | None = None) -> np.ndarray:
    """``||s_t||_2`` for t = 0 .. T as ``(B, T + 1)``: the size of the forward pass's state, where a
    recurrence that blows up (``sigma_max(W) > 1`` under a non-saturating activation such as modReLU)
    shows before the loss does; ``inf`` where the state overflowed the model's dtype. ``states``: a
    trajectory already computed by ``state_trajectory(model, x, s0)``, so one forward pass serves all."""
    model = as_recurrent_model(model)
    states = _trajectory(model, x, s0, states)
    return torch.linalg.vector_norm(states.detach().double(), dim=-1).cpu().numpy()


@dataclass
class JacobianProducts:
    """``J(t) = dh^(T)/dh^(t)`` for t = 0 .. T; arrays indexed ``[sample, t]``."""

    log10_singular_values: np.ndarray  # (B, T + 1, d), descending
    matrices: Tensor | None  # (B, T + 1, d, d) when asked for (may overflow for long T)

    @property
    def log10_norms(self) -> np.ndarray:
        return self.log10_singular_values[..., 0]

    @property
    def log10_condition_numbers(self) -> np.ndarray:
        """``log10 (sigma_max / sigma_min)`` of each ``J(t)``: ``inf`` where ``J(t)`` is singular (its least
        singular value underflowed to 0), ``nan`` where it is 0 (undefined: the gradient at that cell
        vanished entirely, as through dead modReLU or ReLU units)."""
        top, bottom = self.log10_singular_values[..., 0], self.log10_singular_values[..., -1]
        with np.errstate(invalid="ignore"):  # -inf - -inf: the zero matrix's, nan
            return top - bottom


def jacobian_products(model: Analyzable, x: Tensor, s0: Tensor | None = None,
                      keep_matrices: bool = False, spectra: bool = True,
                      progress: bool = False, states: Tensor | None = None) -> JacobianProducts:
    """All ``J(t)`` by the backward recursion ``J(t) = J(t+1) A_{t+1}`` (one batched matmul a step);
    ``states`` as in ``state_norms``."""
    model = as_recurrent_model(model)
    states = _trajectory(model, x, s0, states)
    jac = model.step_jacobian_function()
    B, T1, d = states.shape
    T = T1 - 1
    with torch.no_grad():
        J = torch.eye(d, dtype=states.dtype, device=states.device).expand(B, d, d).clone()
        log_scale = torch.zeros(B, dtype=torch.float64, device=states.device)
        svals = np.zeros((B, T1, d)) if spectra else np.zeros((B, T1, 0))
        kept = [J.clone()] if keep_matrices else []  # J(T) = I: its log10 singular values stay 0
        for t in tqdm(range(T - 1, -1, -1), desc="Jacobian products", disable=not progress, leave=False):
            J = J @ jac(states[:, t], x[:, t])
            scale = J.flatten(1).norm(dim=1)
            safe = torch.where(scale > 0, scale, torch.ones_like(scale))
            J = J / safe[:, None, None]
            log_scale = log_scale + torch.where(scale > 0, safe.log().double(),
                                                torch.full_like(log_scale, -math.inf))
            if keep_matrices:
                kept.append(J * log_scale.exp().to(J.dtype)[:, None, None])
            if spectra:
                sv = torch.linalg.svdvals(J).double()
                with np.errstate(divide="ignore"):
                    svals[:, t] = (np.log(sv.cpu().numpy()) + log_scale.cpu().numpy()[:, None]) / LN10
        matrices = torch.stack(kept[::-1], dim=1) if keep_matrices else None
    return JacobianProducts(svals, matrices)


def jacobians_by_autograd(model: RecurrentModel, x: Tensor, s0: Tensor | None = None,
                          vectorize: bool = False, times: int | None = None) -> Tensor:
    """The slow twin: ``J(t)`` by a separate ``torch.autograd.functional.jacobian`` of ``s_t -> s_T``
    per sample and per t; ``(B, T + 1, d, d)``, or only t < ``times`` (``(B, times, d, d)``)."""
    states = state_trajectory(model, x, s0)
    step = model.step_function()
    B, T1, d = states.shape
    count = T1 if times is None else min(times, T1)
    out = states.new_zeros(B, count, d, d)
    for b in range(B):
        for t in range(count):
            def run_from(s: Tensor, t: int = t, b: int = b) -> Tensor:
                for k in range(t, T1 - 1):
                    s = step(s, x[b:b + 1, k])
                return s

            J = torch.autograd.functional.jacobian(run_from, states[b:b + 1, t], vectorize=vectorize)
            out[b, t] = J.reshape(d, d)
    return out


def transition_norm_bound(model: RecurrentModel, T: int) -> np.ndarray | None:
    """``log10 ||W||^(T-t)`` for t = 0 .. T (KRU Eq. 3), for one-layer nets of Eq. 4; else ``None``.

    Eq. 3 bounds the activation's Jacobian by 1, true of every elementwise activation here but not of
    modReLU (the uRNN's, KRU's in its paper): it scales a unit's tangential direction by ``relu(|z| +
    b) / |z|``, above 1 for ``b > 0``, so its nets get ``None`` too."""
    if model.num_layers != 1 or not hasattr(model, "transitions") or model.activation == MODRELU:
        return None
    with torch.no_grad():
        norm = float(torch.linalg.matrix_norm(model.transition_matrix(0).double(), ord=2))
    with np.errstate(divide="ignore"):
        return (T - np.arange(T + 1)) * np.log10(norm)


def hidden_gradient_norms(model: RecurrentModel, x: Tensor, loss_fn: Callable[[Tensor], Tensor],
                          s0: Tensor | None = None) -> np.ndarray:
    """``||dL/ds_t||`` (Frobenius over the batch) for t = 0 .. T, ``L = loss_fn(outputs (B, T, n_y))``.

    A zero offset ``e_t`` is added to every state and ``dL/de_t`` read off one backward pass; at t = 0
    this is the trainer's ``grad_h0_norm``.
    """
    _check(model, x)
    step = model.step_function()
    s = model.flat_state(model.start_state(x.shape[0])) if s0 is None else s0
    offsets = [torch.zeros_like(s, requires_grad=True) for _ in range(x.shape[1] + 1)]
    s = s + offsets[0]
    outputs = []
    for t in range(x.shape[1]):
        s = step(s, x[:, t]) + offsets[t + 1]
        outputs.append(model.readout(s))
    grads = torch.autograd.grad(loss_fn(torch.stack(outputs, dim=1)), offsets, allow_unused=True)
    return np.array([0.0 if g is None else float(g.norm()) for g in grads])


def _qr_keeping_lost_columns_last(pushed: Tensor, dead: Tensor, fresh: Tensor,
                                  tolerance: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One step of :func:`lyapunov_exponents`' QR: ``Q, diag R`` of ``pushed`` with the ``dead`` columns
    (last, replaced by the fixed ``fresh`` directions) and the ``order`` that moved the newly lost ones
    behind the live ones, ``(Q, diag, dead, order)``."""
    B, d, _ = pushed.shape
    order = torch.arange(d, device=pushed.device).expand(B, d)
    while True:
        columns = pushed.gather(2, order[:, None].expand(B, d, d))
        Q, R = torch.linalg.qr(torch.where(dead[:, None, :], fresh, columns))
        diag = torch.diagonal(R, dim1=-2, dim2=-1)
        lost = ~dead & (diag.abs() <= tolerance)
        if not lost.any():
            return Q, diag, dead, order
        behind = torch.sort((dead | lost).to(torch.int8), dim=1, stable=True).indices  # live first
        order, dead = order.gather(1, behind), (dead | lost).gather(1, behind)


def lyapunov_exponents(model: Analyzable, x: Tensor, s0: Tensor | None = None,
                       burn_in: int = 0, progress: bool = False,
                       states: Tensor | None = None) -> np.ndarray:
    """Lyapunov spectrum ``(B, d)`` (natural log per step, descending) of the input-driven recurrence.

    QR with sign fixing: ``Q_t R_t = A_t Q_{t-1}``, ``Q_t <- Q_t S``, ``R_t <- S R_t``, ``S = sign diag R_t``;
    the first ``burn_in`` steps only align Q. A singular ``A_t`` (dead relu units) gives ``-inf``: a diagonal
    ``|R_ii| <= d eps ||A_t Q||_F`` is QR's roundoff on a lost direction, not a contraction (the rank
    tolerance of ``numpy.linalg.matrix_rank``). A lost column moves behind the live ones and QR is redone,
    its place taken by a fixed random direction: left in place, QR would complete it with a direction
    picked by roundoff, which every later column's ``R_jj`` inherits, so the finite exponents would change
    with LAPACK's thread count. ``states`` as in ``state_norms``.

    ```python
    >>> import torch
    >>> rnn = torch.nn.RNN(2, 4, nonlinearity="relu")
    >>> with torch.no_grad():
    ...     _ = rnn.weight_hh_l0.copy_(torch.diag(torch.tensor([1.0, 0.5, 0.0, 0.0])))
    ...     _ = rnn.bias_hh_l0.fill_(1.0)   # every unit fires: A_t = W
    >>> lyapunov_exponents(rnn, torch.zeros(1, 10, 2)).round(4)   # log 1, log 0.5, two lost
    array([[ 0.    , -0.6931,    -inf,    -inf]])

    ```
    """
    model = as_recurrent_model(model)
    states = _trajectory(model, x, s0, states)
    B, T1, d = states.shape
    T = T1 - 1
    if not 0 <= burn_in < T:
        raise ValueError(f"burn_in must lie in [0, {T}) for T = {T} steps, got {burn_in}")
    jac = model.step_jacobian_function()
    with torch.no_grad():
        Q = torch.eye(d, dtype=states.dtype, device=states.device).expand(B, d, d).clone()
        total = torch.zeros(B, d, dtype=torch.float64, device=states.device)
        dead = torch.zeros(B, d, dtype=torch.bool, device=states.device)  # lost columns, kept last
        generator = torch.Generator(device=states.device).manual_seed(0)
        fresh = torch.randn(d, d, generator=generator, dtype=states.dtype, device=states.device)
        roundoff = d * torch.finfo(states.dtype).eps
        for t in tqdm(range(T), desc="Lyapunov exponents", disable=not progress, leave=False):
            if t == burn_in:
                dead = torch.zeros_like(dead)  # directions lost while aligning still count
            pushed = jac(states[:, t], x[:, t]) @ Q
            tolerance = roundoff * torch.linalg.matrix_norm(pushed)[:, None]
            Q, diag, dead, order = _qr_keeping_lost_columns_last(pushed, dead, fresh, tolerance)
            sign = torch.where(diag < 0, -torch.ones_like(diag), torch.ones_like(diag))
            Q = Q * sign[:, None, :]
            if t >= burn_in:
                total = total.gather(1, order) + diag.abs().double().log().masked_fill(dead, -math.inf)
    exponents = (total / (T - burn_in)).cpu().numpy()
    return -np.sort(-exponents, axis=1)


def jacobian_table(model: Analyzable, x: Tensor, s0: Tensor | None = None,
                   progress: bool = False) -> pd.DataFrame:
    """:func:`jacobian_products` as a long-form DataFrame, one row per sample and time ``t``:
    ``log10_norm`` (``log10 ||J(t)||``), ``log10_sigma_min`` and ``log10_condition_number`` of
    ``J(t) = dh^(T)/dh^(t)``, with ``steps_back = T - t``.

    ```python
    >>> import torch
    >>> table = jacobian_table(torch.nn.RNN(2, 4), torch.randn(3, 5, 2))
    >>> len(table), table.loc[table.steps_back == 0, "log10_norm"].abs().max()   # J(T) = I
    (18, 0.0)

    ```
    """
    products = jacobian_products(model, x, s0, progress=progress)
    B, T1, _ = products.log10_singular_values.shape
    with np.errstate(invalid="ignore"):
        return pd.DataFrame({
            "sample": np.repeat(np.arange(B), T1), "t": np.tile(np.arange(T1), B),
            "steps_back": np.tile(np.arange(T1)[::-1], B),
            "log10_norm": products.log10_norms.ravel(),
            "log10_sigma_min": products.log10_singular_values[..., -1].ravel(),
            "log10_condition_number": products.log10_condition_numbers.ravel()})


def lyapunov_table(model: Analyzable, x: Tensor, s0: Tensor | None = None, burn_in: int = 0,
                   progress: bool = False) -> pd.DataFrame:
    """:func:`lyapunov_exponents` as a long-form DataFrame, one row per sample and exponent: ``index``
    1 .. d (descending) and ``exponent`` (natural log per step).

    ```python
    >>> import torch
    >>> table = lyapunov_table(torch.nn.GRU(2, 4), torch.randn(3, 20, 2))
    >>> len(table), bool(table.groupby("sample").exponent.is_monotonic_decreasing.all())
    (12, True)

    ```
    """
    exponents = lyapunov_exponents(model, x, s0, burn_in=burn_in, progress=progress)
    B, d = exponents.shape
    return pd.DataFrame({"sample": np.repeat(np.arange(B), d), "index": np.tile(np.arange(1, d + 1), B),
                         "exponent": exponents.ravel()})
