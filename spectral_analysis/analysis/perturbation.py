"""Lemma 3 (ICML, Appendix A.6) measured: how far random admissible perturbations move h^(T) and y.

For ``||dW|| <= ||W||/T``, ``||dM|| <= ||M||/T``, ``||dY|| <= ||Y||/T`` the lemma states

- Eq. 22: ``||h'_T - h_T|| <= B T e (T ||M|| ||dW|| + ||dM||) max(||W||^(T-1), 1)``;
- output: ``||y' - y|| <= T B max(||W||^(T-1), 1) (||Y|| ||dW|| ||M|| T e + ||Y|| ||dM|| e + ||dY|| ||M||)``.

Each trial draws Gaussian directions and scales each to the largest allowed spectral norm, then
measures both changes over a batch. Right-hand sides are compared in log space (they overflow for
long sequences); the slack ratio is measured / bound and must stay <= 1.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor

from spectral_analysis.analysis.bounds import WeightNorms, weight_norms
from spectral_analysis.analysis.network import Eq17Network


@dataclass
class PerturbationCheck:
    """Worst slack ratios over the trials; ``violations`` lists (trial, which, sample, ratio)."""

    trials: int
    T: int
    B: float
    hidden_slack_max: float  # max over trials of max_x ||dh_T|| / Eq. 22's right-hand side
    output_slack_max: float
    hidden_slack: list[float]
    output_slack: list[float]
    violations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "holds": self.holds}


def _scaled_direction(shape: torch.Size, target: float, generator: torch.Generator, like: Tensor) -> Tensor:
    direction = torch.randn(shape, generator=generator, dtype=torch.float64).to(like.device)
    norm = float(torch.linalg.matrix_norm(direction, ord=2))
    return direction * (target / norm) if norm > 0 else direction


def lemma3_right_hand_sides(norms: WeightNorms, T: int, B: float, dW: float, dM: float,
                            dY: float) -> tuple[float, float]:
    """log10 of Eq. 22's bound on ``||dh_T||`` and of the output bound, for perturbation norms given."""
    W, M, Y = norms.W, norms.M, norms.Y
    log_power = (T - 1) * math.log10(W) if W > 1 else 0.0

    def log10(value: float) -> float:
        return math.log10(value) if value > 0 else -math.inf

    hidden = log10(B * T * math.e * (T * M * dW + dM)) + log_power
    output = log10(T * B * (Y * dW * M * T * math.e + Y * dM * math.e + dY * M)) + log_power
    return hidden, output


def perturbation_check(net: Eq17Network, x: Tensor, B: float | None = None, trials: int = 20, seed: int = 0,
                       fraction: float = 1.0) -> PerturbationCheck:
    """Lemma 3 on a batch ``x`` (the model's inputs) with perturbations at ``fraction`` of the largest
    allowed norms; ``B`` bounds the absorbed inputs ``||x~_t||`` (default: their largest norm in the
    batch, the tightest B the lemma allows)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"the perturbation fraction must lie in (0, 1], got {fraction}")
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    xs = net.inputs(x)
    T = xs.shape[1]
    measured_B = float(xs.norm(dim=-1).max())
    B = measured_B if B is None else B
    if measured_B > B * (1 + 1e-9):
        raise ValueError(f"the batch has an input of norm {measured_B:.6g} > B = {B:.6g}: Assumption 1(a) "
                         f"fails, give a larger data bound")
    generator = torch.Generator().manual_seed(seed)
    norms = weight_norms(net)
    h_T, y = net.final(xs)
    overflow = ("the forward pass overflows float64 on these inputs ({what}, with ||W|| = {W:.3g}): "
                "Lemma 3's ratios are not computable, so the check is not run")
    if not (bool(torch.isfinite(h_T).all()) and bool(torch.isfinite(y).all())):
        raise ValueError(overflow.format(what="h_T is not finite", W=norms.W))
    hidden_slack, output_slack, violations = [], [], []
    for trial in range(trials):
        deltas = {}
        for name, A in (("W", net.W), ("M", net.M), ("Y", net.Y)):
            deltas[name] = _scaled_direction(A.shape, fraction * getattr(norms, name) / T, generator, A)
        h_p, y_p = net.final(xs, net.W + deltas["W"], net.M + deltas["M"], net.Y + deltas["Y"])
        sizes = {k: float(torch.linalg.matrix_norm(v, ord=2)) for k, v in deltas.items()}
        log_h, log_y = lemma3_right_hand_sides(norms, T, B, sizes["W"], sizes["M"], sizes["Y"])
        for which, change, log_rhs, store in (("hidden", (h_p - h_T).norm(dim=1), log_h, hidden_slack),
                                              ("output", (y_p - y).norm(dim=1), log_y, output_slack)):
            if not bool(torch.isfinite(change).all()) or not math.isfinite(log_rhs):
                raise ValueError(overflow.format(what=f"a perturbed {which} state is not finite", W=norms.W))
            worst = int(change.argmax())
            value = float(change[worst])
            ratio = 0.0 if value == 0 else 10 ** (math.log10(value) - log_rhs)
            store.append(ratio)
            if ratio > 1 + 1e-9:
                violations.append({"trial": trial, "quantity": which, "sample": worst, "ratio": ratio})
    return PerturbationCheck(trials, T, B, max(hidden_slack), max(output_slack), hidden_slack, output_slack,
                             violations)


def _project(delta: Tensor, radius: float) -> Tensor:
    """Scale ``delta`` back into the spectral-norm ball of ``radius`` (feasible, not the nearest point)."""
    norm = float(torch.linalg.matrix_norm(delta.detach(), ord=2))
    return delta * (radius / norm) if norm > radius else delta


def adversarial_perturbation(net: Eq17Network, x: Tensor, B: float | None = None, steps: int = 60,
                             seed: int = 0, lr: float = 0.05) -> dict[str, float]:
    """The largest measured / bound ratio of Lemma 3 found by projected gradient ascent on
    ``(dW, dM, dY)`` within ``||d.|| <= ||.||/T``: log of the output change (worst sample) is
    maximized with Adam, each step scaled back into the allowed balls. Random directions reach
    1e-12..1e-3 of the bound on trained nets; this searches for the perturbation the bound is about."""
    xs = net.inputs(x)
    T = xs.shape[1]
    B = float(xs.norm(dim=-1).max()) if B is None else B
    norms = weight_norms(net)
    radius = {"W": norms.W / T, "M": norms.M / T, "Y": norms.Y / T}
    generator = torch.Generator().manual_seed(seed)
    base = {"W": net.W, "M": net.M, "Y": net.Y}
    # start along the weights themselves (a uniform scaling of the net: the aligned worst case when
    # W = M = Y = I), plus a little noise so the ascent can leave it
    deltas = {k: (A * (radius[k] / max(float(torch.linalg.matrix_norm(A, ord=2)), 1e-300))
                  + 0.1 * _scaled_direction(A.shape, radius[k], generator, A)).requires_grad_()
              for k, A in base.items()}
    optimizer = torch.optim.Adam(deltas.values(), lr=lr * max(radius.values()))
    h_T, y = net.final(xs)
    best = {"hidden": 0.0, "output": 0.0}

    def ratios() -> tuple[Tensor, Tensor]:
        h_p, y_p = net.final(xs, *(base[k] + deltas[k] for k in ("W", "M", "Y")))
        sizes = {k: float(torch.linalg.matrix_norm(v.detach(), ord=2)) for k, v in deltas.items()}
        log_h, log_y = lemma3_right_hand_sides(norms, T, B, sizes["W"], sizes["M"], sizes["Y"])
        return ((h_p - h_T).norm(dim=1).max() / 10 ** log_h, (y_p - y).norm(dim=1).max() / 10 ** log_y)

    for _ in range(steps):
        optimizer.zero_grad()
        hidden, output = ratios()
        best = {"hidden": max(best["hidden"], float(hidden.detach())),
                "output": max(best["output"], float(output.detach()))}
        (-(output.clamp_min(1e-300).log() + hidden.clamp_min(1e-300).log())).backward()
        optimizer.step()
        with torch.no_grad():
            for k, d in deltas.items():
                d.copy_(_project(d, radius[k]))
    with torch.no_grad():
        for k, d in deltas.items():
            d.copy_(_project(d, radius[k]))
        hidden, output = ratios()
    return {"hidden": max(best["hidden"], float(hidden)), "output": max(best["output"], float(output)),
            "steps": steps}


def aligned_linear_network(n: int, T: int) -> tuple[Eq17Network, Tensor]:
    """``W = M = Y = I`` with the identity activation and every ``x_t`` the same unit vector: the
    case where Lemma 3's bound is nearly tight (every perturbation direction adds up over time)."""
    eye = torch.eye(n, dtype=torch.float64)
    net = Eq17Network(eye, eye.clone(), eye.clone(), "identity", 0.0, False, False, False, n, None)
    x = torch.zeros(1, T, n, dtype=torch.float64)
    x[..., 0] = 1.0
    return net, x
