"""Paper checks: two statements of KRU's Sections 2.2 and 3.1 about the recurrent matrix, on random
instances in float64.

- Eq. 3, ``||dL/dh_t|| <= ||W||^(T - t)`` (for a tanh RNN, as Arjovsky et al. state it): the left side
  scales with the loss and the right side does not, so as printed it fails as soon as ``||dL/dh_T|| > 1``
  (at t = T it reads ``||dL/dh_T|| <= 1``). What the chain rule gives, since ``|tanh'| <= 1``, is
  ``||dL/dh_t|| <= ||W||^(T - t) ||dL/dh_T||``; both are measured with autograd.
- Section 3.1, "if each of the factors are approximately unitary then the full matrix is approximately
  unitary": the singular values of a Kronecker product are the products of its factors', so with
  ``||W_f^H W_f - I||_2 <= eps_f`` the full matrix has ``||W^H W - I||_2 <= prod_f (1 + eps_f) - 1``, about
  ``F eps`` for F factors. Measured on products of near-unitary complex 2 x 2 factors built with
  :func:`~spectral_analysis.linalg.kronecker.kron_matrix`: the bound holds, and the deviation grows with F.
"""

from __future__ import annotations

import math

import torch

from spectral_analysis.checks import CheckRecord
from spectral_analysis.linalg.kronecker import kron_matrix

EQ3_SOURCE, SOFT_SOURCE = "KRU Section 2.2 (Eq. 3)", "KRU Section 3.1"
EQ3_QUOTE = (r"\left\|\frac{\partial \mathcal{L}}{\partial \mathbf{h}_{t}}\right\| \leq "
             r"\left\|\mathbf{W}\right\|^{T-t}.")
SOFT_QUOTE = ("if each of the factors are approximately unitary then the full matrix is approximately "
              "unitary")
ACTIVATION = torch.tanh  # Eq. 3's RNN (|tanh'| <= 1, which the corrected bound needs)
TOLERANCE = 1e-9  # float64 rounding allowed on a ratio that should be at most 1


def _hidden_gradients(weight: torch.Tensor, inputs: torch.Tensor, target: torch.Tensor,
                      scale: float) -> list[torch.Tensor]:
    """dL/dh_t for t = 0..T of h_(t+1) = tanh(W h_t + x_t), h_0 = 0, L = scale ||h_T - target||^2."""
    states = [torch.zeros(weight.shape[0], dtype=torch.float64, requires_grad=True)]
    for x in inputs:
        states.append(ACTIVATION(weight @ states[-1] + x))
    for h in states:
        h.retain_grad()
    (scale * (states[-1] - target).pow(2).sum()).backward()
    return [h.grad for h in states]


def check_eq3(draws: int, n: int = 8, steps: int = 20, seed: int = 0, loss_scale: float = 1.0) -> CheckRecord:
    """Eq. 3 as printed and with the factor ||dL/dh_T||, over ``draws`` random tanh RNNs with the loss
    ``loss_scale ||h_T - y||^2``."""
    generator = torch.Generator().manual_seed(seed)
    printed_worst = corrected_worst = 0.0
    printed_broken = pairs = 0
    norms = []
    for draw in range(draws):
        spread = 0.25 + 0.5 * draw / draws  # ||W||_2 from below 1 to above it
        weight = torch.randn(n, n, dtype=torch.float64, generator=generator) * spread / math.sqrt(n)
        inputs = torch.randn(steps, n, dtype=torch.float64, generator=generator)
        target = torch.randn(n, dtype=torch.float64, generator=generator)
        norm = float(torch.linalg.matrix_norm(weight, 2))
        norms.append(norm)
        grads = _hidden_gradients(weight, inputs, target, scale=loss_scale)
        end = float(grads[-1].norm())
        for t, g in enumerate(grads):
            power = norm ** (steps - t)
            ratio = float(g.norm()) / power
            printed_worst = max(printed_worst, ratio)
            printed_broken += ratio > 1 + TOLERANCE
            corrected_worst = max(corrected_worst, ratio / end)
            pairs += 1
    corrected = corrected_worst <= 1 + TOLERANCE
    verdict = "holds" if not printed_broken else "differs" if corrected else "fails"
    return CheckRecord(
        EQ3_SOURCE, "||dL/dh_t|| <= ||W||^(T - t) for a tanh RNN", verdict,
        f"{draws} random tanh RNNs (n = {n}, T = {steps}, ||W||_2 from {min(norms):.2f} to {max(norms):.2f}, "
        f"L = {loss_scale:g} ||h_T - y||^2): "
        f"the printed bound fails at {printed_broken} of {pairs} (t, draw) pairs (largest "
        f"||dL/dh_t|| / ||W||^(T-t) = {printed_worst:.3g}): the left side is proportional to the loss's "
        "scale and the right side is not. With the factor the chain rule gives, "
        f"||dL/dh_t|| <= ||W||^(T-t) ||dL/dh_T|| (|tanh'| <= 1), the largest ratio is {corrected_worst:.6f}",
        {"printed_violations": printed_broken, "pairs": pairs, "printed_worst_ratio": printed_worst,
         "corrected_worst_ratio": corrected_worst},
        quote=EQ3_QUOTE,
    )


def _near_unitary(generator: torch.Generator, noise: float) -> torch.Tensor:
    """A random complex 2 x 2 unitary matrix (QR of a Gaussian) plus ``noise`` times a Gaussian."""
    def gaussian() -> torch.Tensor:
        return torch.complex(torch.randn(2, 2, dtype=torch.float64, generator=generator),
                             torch.randn(2, 2, dtype=torch.float64, generator=generator))

    q, _ = torch.linalg.qr(gaussian())
    return q + noise * gaussian()


def _deviation(matrix: torch.Tensor) -> float:
    """||M^H M - I||_2."""
    eye = torch.eye(matrix.shape[0], dtype=matrix.dtype)
    return float(torch.linalg.matrix_norm(matrix.conj().T @ matrix - eye, 2))


def check_soft_unitary(draws: int, factor_counts: tuple[int, ...] = (2, 5, 9), noise: float = 1e-3,
                       seed: int = 0) -> CheckRecord:
    """Products of ``F`` near-unitary 2 x 2 factors, for each F of ``factor_counts``."""
    generator = torch.Generator().manual_seed(seed)
    worst_ratio, growth = 0.0, {}
    for count in factor_counts:
        amplification = []
        for _ in range(draws):
            factors = [_near_unitary(generator, noise) for _ in range(count)]
            epsilons = [_deviation(f) for f in factors]
            full = _deviation(kron_matrix(factors))
            worst_ratio = max(worst_ratio, full / (math.prod(1 + e for e in epsilons) - 1))
            amplification.append(full / max(epsilons))
        growth[count] = (min(amplification), max(amplification))
    verdict = "holds" if worst_ratio <= 1 + TOLERANCE else "differs"
    return CheckRecord(
        SOFT_SOURCE,
        "factors with ||W_f^H W_f - I||_2 <= eps_f give ||W^H W - I||_2 <= prod_f (1 + eps_f) - 1",
        verdict,
        f"{draws} products per F of complex 2 x 2 factors, each a unitary matrix plus {noise:g} x a Gaussian "
        f"(N = 2^F): the full deviation over the bound is at most {worst_ratio:.6f}; the full deviation over "
        "the largest factor's: " + ", ".join(f"F = {f} (N = {2 ** f}): {low:.2f}-{high:.2f}"
                                              for f, (low, high) in growth.items())
        + ". Approximately unitary factors give an approximately unitary W, with an error up to F times "
        "theirs",
        {"worst_ratio_to_bound": worst_ratio, "amplification": {str(f): list(g) for f, g in growth.items()}},
        quote=SOFT_QUOTE,
    )


def run(quick: bool = True) -> list[CheckRecord]:
    """Both checks (``quick``: fewer random draws)."""
    draws = 20 if quick else 200
    return [check_eq3(draws), check_soft_unitary(draws)]
