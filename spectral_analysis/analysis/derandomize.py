"""Certificates of the deterministic network itself, beside the PAC-Bayes certificate of Q
(:mod:`~spectral_analysis.analysis.certify`), from data the network never trained on.

- **Derandomized through margins** (the route of Neyshabur, Bhojanapalli & Srebro 2018, Lemma 1, and the
  paper's Lemma 3, measured instead of bounded by worst-case constants). For Q centred on the checkpoint
  ``w`` (``u ~ N(0, diag s^2)``) and any margin ``gamma``: where ``f_w`` errs on ``x`` (margin ``<= 0``),
  either ``f_{w+u}`` has margin ``< gamma/2`` there, or the perturbation moved an output by at least
  ``gamma/4`` (a margin moves by at most twice the largest output change). So

  ``L_0(f_w) <= L_{gamma/2}(Q) + R_gamma``, with
  ``R_gamma = P_{x ~ D, u ~ Q}[max_j |f_{w+u}(x)_j - f_w(x)_j| >= gamma/4]``.

  ``L_{gamma/2}(Q)`` is bounded as the 0-1 certificate bounds Q's error (Monte Carlo on the training set,
  then PAC-Bayes-kl with Q's KL), with the margin loss; ``R_gamma`` by the binomial kl inverse on
  held-out sequences, one fresh ``u`` per chunk of them (the chunk rates are independent, as in the Monte
  Carlo step). ``w`` must not depend on those sequences (beyond choosing among ``selections`` checkpoints,
  charged by a union bound), and neither must Q's variances: a prior learned from the held-out split takes
  half of it, and ``R_gamma`` is measured on the other half. Q's noise, fitted for the stochastic
  certificate, is also scaled down by each of :data:`NOISE_SCALES` (less noise moves the outputs less, at a
  larger KL); both terms run over that grid and :data:`GAMMA_GRID`, a union bound; the certificate is the
  smallest sum, at confidence ``1 - delta - delta' - delta_held``.
- **Q with less noise** comes with it: each scaled Q is a stochastic network centred on ``w`` too, and its
  bounded margin loss at the smallest gamma (margin ``< 1/32``) bounds its 0-1 error. The smallest over the
  scales is the tightest certificate of a stochastic network of mean ``w`` that the grid holds (the fit of Q
  minimizes a surrogate of the bound, and it can stop at more noise than the bound's optimum).
- **Held out** (Langford 2005's test-set bound): the binomial kl inverse of ``f_w``'s error on those
  held-out sequences, at ``delta_held / selections``. Tighter than any of the above wherever enough
  sequences are held out; it is the comparison a referee makes, so it is reported beside them.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from spectral_analysis.analysis.evaluation_store import EvaluationStore
from spectral_analysis.analysis.posterior import (
    PRIOR_GRID,
    Posterior,
    error_rate,
    kl_inverse_upper,
    last_logits,
    monte_carlo_losses,
    pac_bayes_complexity,
)

GAMMA_GRID = tuple(2.0 ** k for k in range(-4, 5))  # margins (in logits) from 1/16 to 16
NOISE_SCALES = tuple(2.0 ** -k for k in range(7))  # Q's noise times 1, 1/2, ..., 1/64
HELD_CHUNK = 10  # held-out sequences per sampled perturbation in R_gamma's estimate


def margins(logits: Tensor, labels: Tensor) -> Tensor:
    """``f_y - max_{j != y} f_j`` of each row (negative where the network errs).

    ```python
    >>> margins(torch.tensor([[1.0, 3.0, 2.0], [5.0, -1.0, 4.5]]), torch.tensor([1, 2])).tolist()
    [1.0, -0.5]

    ```
    """
    true = logits.gather(1, labels[:, None]).squeeze(1)
    others = logits.scatter(1, labels[:, None], -math.inf)
    return true - others.max(dim=1).values


def held_out_bound(model: torch.nn.Module, weights: dict[str, Tensor], inputs: Tensor, labels: Tensor,
                   delta: float, selections: int = 1) -> dict[str, float]:
    """The test-set bound on ``f_w``'s 0-1 error from ``n`` held-out sequences: ``kl(e_H || e) <=
    ln(selections / delta) / n`` (``selections``: how many checkpoints the split chose among)."""
    error = error_rate(model, weights, inputs, labels)
    bound = kl_inverse_upper(error, math.log(selections / delta) / len(inputs))
    return {"held_out_error": error, "held_out_bound": bound, "held_out_n": len(inputs)}


def perturbation_rates(model: torch.nn.Module, posterior: Posterior, inputs: Tensor,
                       gammas: tuple[float, ...], seed: int = 0) -> tuple[list[float], int, int]:
    """For each ``gamma``: the share of held-out sequences on which a perturbed network ``w + u`` moves some
    output by at least ``gamma/4`` from ``f_w``'s, a fresh ``u`` per chunk of :data:`HELD_CHUNK` (the
    sequences left over by the chunking count as moved); with the number of chunks and of leftovers."""
    chunks = len(inputs) // HELD_CHUNK
    if chunks < 1:
        raise ValueError(f"R_gamma needs at least {HELD_CHUNK} held-out sequences, got {len(inputs)}")
    generator = torch.Generator().manual_seed(seed)
    moved = torch.zeros(len(gammas), dtype=torch.long)
    thresholds = torch.tensor(gammas, dtype=torch.float64) / 4
    with torch.no_grad():
        for j in range(chunks):
            x = inputs[j * HELD_CHUNK:(j + 1) * HELD_CHUNK]
            change = (last_logits(model, posterior.sample(generator), x)
                      - last_logits(model, posterior.mu, x)).abs().amax(dim=1).double().cpu()
            moved += (change[:, None] >= thresholds[None, :]).sum(dim=0)
    return [int(c) / (chunks * HELD_CHUNK) for c in moved], chunks, len(inputs) - chunks * HELD_CHUNK


def _scaled(posterior: Posterior, scale: float) -> Posterior:
    """Q with its standard deviations multiplied by ``scale`` (the same mean and prior)."""
    shift = math.log(scale)
    return Posterior(posterior.mu, {k: v + shift for k, v in posterior.log_s.items()}, posterior.w0,
                     posterior.log_prior_var)


def derandomized_certificate(model: torch.nn.Module, posterior: Posterior, prior_variance: float,
                             inputs: Tensor, labels: Tensor, held_inputs: Tensor, delta: float = 0.025,
                             delta_prime: float = 0.01, delta_held: float = 0.01, mc_samples: int = 20000,
                             chunk_size: int = 50, selections: int = 1, seed: int = 0,
                             progress: bool = False, store: EvaluationStore | None = None
                             ) -> dict[str, float | list | None]:
    """The certificate of ``f_w`` (module docstring) for Q centred on ``w = posterior.mu`` and its noise
    scaled by each of :data:`NOISE_SCALES` (less noise moves the outputs less, at more KL), against the
    prior ``N(w_0, prior_variance I)`` the 0-1 certificate snapped to, on training ``inputs``/``labels``
    and ``held_inputs`` the network never trained on. Returns the certificate, its gamma and noise scale
    and both terms there, both terms at every scale (rows) and gamma (columns), and the tightest scaled Q's
    own certificate (:func:`quietest_certified_q`). A ``store`` keeps each scale's Monte Carlo passes and
    perturbation rates as they finish (a rerun resumes from them)."""
    if not all(0 < d < 1 for d in (delta, delta_prime, delta_held)):
        raise ValueError(f"delta, delta' and delta_held must lie in (0, 1), got {delta}, {delta_prime}, "
                         f"{delta_held}")
    k, m, n = len(GAMMA_GRID) * len(NOISE_SCALES), len(inputs), len(held_inputs)

    def margin_losses(logits: Tensor, y: Tensor) -> Tensor:
        return margins(logits, y)[:, None] < torch.tensor(GAMMA_GRID, device=logits.device)[None, :] / 2

    q_margin, r_upper, rates = [], [], []  # [scale][gamma]
    for index, scale in enumerate(NOISE_SCALES):
        noisy = _scaled(posterior, scale)
        kl = float(noisy.kl(prior_variance))
        _, uppers, _, _ = monte_carlo_losses(model, noisy, inputs, labels, margin_losses, mc_samples,
                                             min(chunk_size, m), delta_prime / k, seed, progress, store,
                                             f"margins-{index}")
        complexity = pac_bayes_complexity(kl, m, delta / (len(PRIOR_GRID) * k))
        q_margin.append([kl_inverse_upper(u, complexity) for u in uppers])
        kept = store.stage(f"moved-{index}") if store is not None else None
        if kept is None:
            moved, chunks, leftover = perturbation_rates(model, noisy, held_inputs, GAMMA_GRID, seed)
            if store is not None:
                store.keep(f"moved-{index}", {"rates": torch.tensor(moved, dtype=torch.float64),
                                              "chunks": torch.tensor([chunks, leftover])})
        else:
            moved, (chunks, leftover) = kept["rates"].tolist(), kept["chunks"].tolist()
        rates.append(moved)
        r_upper.append([((n - leftover) * kl_inverse_upper(r, math.log(2 * k * selections / delta_held)
                                                           / chunks) + leftover) / n for r in moved])
    totals = [[min(1.0, a + b) for a, b in zip(qs, rs, strict=True)] for qs, rs in zip(q_margin, r_upper,
                                                                                         strict=True)]
    s_best, g_best = min(((i, j) for i in range(len(NOISE_SCALES)) for j in range(len(GAMMA_GRID))),
                         key=lambda ij: totals[ij[0]][ij[1]])
    return {"derandomized_bound": totals[s_best][g_best], "derandomized_gamma": GAMMA_GRID[g_best],
            "derandomized_noise_scale": NOISE_SCALES[s_best], "q_margin_bound": q_margin[s_best][g_best],
            "perturbation_bound": r_upper[s_best][g_best], "perturbation_rate": rates[s_best][g_best],
            "derandomized_confidence": 1 - delta - delta_prime - delta_held, "gammas": list(GAMMA_GRID),
            "noise_scales": list(NOISE_SCALES), "q_margin_bounds": q_margin, "perturbation_bounds": r_upper,
            **quietest_certified_q(q_margin)}


def quietest_certified_q(q_margin_bounds: list[list[float]]) -> dict[str, float]:
    """The tightest certificate of a scaled Q (its noise times one of :data:`NOISE_SCALES`, the same mean)
    among ``q_margin_bounds`` (``[scale][gamma]``): its bounded margin loss at the smallest gamma, which
    is at least its 0-1 error, and that scale.

    >>> quietest_certified_q([[0.46, 0.5], [0.38, 0.4], [0.41, 0.42]])
    {'scaled_q_bound': 0.38, 'scaled_q_noise_scale': 0.5}

    """
    column = [row[0] for row in q_margin_bounds]
    best = min(range(len(column)), key=column.__getitem__)
    return {"scaled_q_bound": column[best], "scaled_q_noise_scale": NOISE_SCALES[best]}
