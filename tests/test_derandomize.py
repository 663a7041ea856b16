"""The certificates of the deterministic network: the margin, the pointwise inequality the derandomized
certificate rests on, its terms in the limit of no noise, and the held-out bound."""

import math

import pytest
import torch
from train_fixtures import constant_classifier

from spectral_analysis.analysis.derandomize import (
    GAMMA_GRID,
    HELD_CHUNK,
    NOISE_SCALES,
    _scaled,
    derandomized_certificate,
    held_out_bound,
    margins,
    perturbation_rates,
)
from spectral_analysis.analysis.posterior import Posterior, kl_inverse_upper, last_logits
from spectral_analysis.nn import build_model


def _posterior(model: torch.nn.Module, log_s: float) -> Posterior:
    params = {k: v.detach() for k, v in model.named_parameters()}
    return Posterior(params, {k: torch.full_like(v, log_s) for k, v in params.items()}, params,
                     torch.tensor(0.0))


def test_margins_are_the_true_score_less_the_best_other():
    logits, labels = torch.tensor([[1.0, 3.0, 2.0], [5.0, -1.0, 4.5]]), torch.tensor([1, 2])
    assert margins(logits, labels).tolist() == [1.0, -0.5]


def test_where_the_network_errs_a_perturbed_one_has_a_small_margin_or_moved_far():
    """The derandomization's pointwise step: f_w wrong on x implies margin_{w+u}(x) < gamma/2 or
    max |f_{w+u}(x) - f_w(x)| >= gamma/4, for every gamma, sample and perturbation."""
    torch.manual_seed(0)
    model = build_model("rnn", 2, 6, 4)
    x, y = torch.randn(300, 7, 2), torch.randint(0, 4, (300,))
    posterior = _posterior(model, math.log(0.3))
    base = last_logits(model, posterior.mu, x)
    wrong = margins(base, y) <= 0
    assert wrong.any()
    for _ in range(5):
        moved_logits = last_logits(model, posterior.sample(), x)
        change = (moved_logits - base).abs().amax(dim=1)
        for gamma in GAMMA_GRID:
            covered = (margins(moved_logits, y) < gamma / 2) | (change >= gamma / 4)
            assert bool((covered | ~wrong).all()), gamma


def test_without_noise_the_terms_are_the_margin_loss_and_zero():
    torch.manual_seed(1)
    model = build_model("rnn", 2, 6, 3)
    x, y = torch.randn(200, 5, 2), torch.randint(0, 3, (200,))
    held = torch.randn(10 * HELD_CHUNK + 3, 5, 2)
    posterior = _posterior(model, -30.0)
    rates, chunks, leftover = perturbation_rates(model, posterior, held, GAMMA_GRID)
    assert rates == [0.0] * len(GAMMA_GRID) and (chunks, leftover) == (10, 3)
    result = derandomized_certificate(model, posterior, prior_variance=1.0, inputs=x, labels=y,
                                      held_inputs=held, mc_samples=20, chunk_size=50)
    k = len(GAMMA_GRID) * len(NOISE_SCALES)
    expected_r = (100 * kl_inverse_upper(0.0, math.log(2 * k / 0.01) / 10) + 3) / 103
    assert all(r == pytest.approx(expected_r) for row in result["perturbation_bounds"] for r in row)
    margin_loss = [(margins(last_logits(model, posterior.mu, x), y) < g / 2).float().mean().item()
                   for g in GAMMA_GRID]
    for row in result["q_margin_bounds"]:  # a bound on each scale's margin loss, which is w's here
        assert all(bound >= loss for bound, loss in zip(row, margin_loss, strict=True))
    # less noise costs KL: at scale 1/64 it grows by ln 64 a weight (the variance term is negligible here)
    weights = sum(v.numel() for v in posterior.mu.values())
    assert float(_scaled(posterior, 1 / 64).kl(1.0) - posterior.kl(1.0)) == pytest.approx(
        weights * math.log(64), rel=1e-5)  # float32 sums
    scale, gamma = (NOISE_SCALES.index(result["derandomized_noise_scale"]),
                    GAMMA_GRID.index(result["derandomized_gamma"]))
    assert result["derandomized_bound"] == pytest.approx(
        min(1.0, result["q_margin_bounds"][scale][gamma] + expected_r))
    with pytest.raises(ValueError, match="at least 10 held-out sequences"):
        perturbation_rates(model, posterior, held[:9], GAMMA_GRID)


def test_the_held_out_bound_is_the_binomial_kl_inverse_with_its_selections():
    model = constant_classifier()  # always class 0
    weights = dict(model.named_parameters())
    x, y = torch.randn(400, 4, 1), torch.cat([torch.zeros(300), torch.ones(100)]).long()
    result = held_out_bound(model, weights, x, y, delta=0.01, selections=20)
    assert result["held_out_error"] == 0.25 and result["held_out_n"] == 400
    assert result["held_out_bound"] == pytest.approx(kl_inverse_upper(0.25, math.log(20 / 0.01) / 400))
    assert held_out_bound(model, weights, x, y, 0.01)["held_out_bound"] < result["held_out_bound"]


def test_a_validation_split_holds_out_as_many_selections_as_the_run_could_stop_at():
    from spectral_analysis.analysis.checkpoint_data import validation_selections

    assert validation_selections({"train": {"max_steps": None, "eval_every": 100}}) == 1
    assert validation_selections({"train": {"max_steps": 1050, "eval_every": 100}}) == 11
    assert validation_selections({"train": {"max_steps": 1000, "eval_every": 100, "lr_cut": 0.5}}) is None


def test_the_quietest_certified_q_bounds_its_own_sampled_error():
    """The scaled Q's certificate is its margin-1/32 bound at the tightest scale; for a noisy Q around a
    network that fits its labels, a quieter Q certifies tighter, and the bound holds for networks drawn
    from it."""
    torch.manual_seed(2)
    model = build_model("rnn", 2, 6, 3)
    x = torch.randn(1000, 5, 2)
    posterior = _posterior(model, math.log(0.3))
    y = last_logits(model, posterior.mu, x).argmax(dim=1)  # w makes no error
    result = derandomized_certificate(model, posterior, prior_variance=1.0, inputs=x, labels=y,
                                      held_inputs=torch.randn(4 * HELD_CHUNK, 5, 2), mc_samples=40,
                                      chunk_size=50)
    scale = NOISE_SCALES.index(result["scaled_q_noise_scale"])
    assert result["scaled_q_bound"] == min(row[0] for row in result["q_margin_bounds"])
    assert result["scaled_q_bound"] == result["q_margin_bounds"][scale][0]
    assert scale > 0 and result["scaled_q_bound"] < result["q_margin_bounds"][0][0]
    generator = torch.Generator().manual_seed(9)
    errors = [(last_logits(model, _scaled(posterior, NOISE_SCALES[scale]).sample(generator), x).argmax(dim=1)
               != y).float().mean().item() for _ in range(40)]
    assert sum(errors) / len(errors) <= result["scaled_q_bound"] < 1
