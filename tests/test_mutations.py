"""Mutation tests: plant a wrong version of a central formula or number and the check that guards it
must turn to differs/fails. The score (caught / planted) is quoted in the README ("Paper checks")."""

import importlib
import math

import pytest

from spectral_analysis.analysis import perturbation
from spectral_analysis.paper import baselines, bounds, parameter_counts
from spectral_analysis.symbolic import householder

BAD = ("differs", "fails")
bound_report_module = importlib.import_module("spectral_analysis.analysis.bound_report")


@pytest.fixture(scope="module")
def trained():
    """The checkpoints the bounds check reads (the zoo's paper-scale addition models)."""
    from spectral_analysis.io import resolve_checkpoint

    return {model: resolve_checkpoint(name) for model, name in bounds.ZOO.items()}


def _by_source(records):
    return {r.source: r for r in records}


@pytest.mark.slow
def test_unmutated_checks_hold(trained):
    records = _by_source(bounds.records_from_checkpoints(trained))
    assert records["ICML Lemma 3"].verdict == records["ICML Theorem 5 (RNN)"].verdict == "holds"
    assert _by_source(baselines.run())["ICML Section 7.1 (addition baseline)"].verdict == "holds"


@pytest.mark.slow
def test_a_sign_flipped_in_eq13_is_caught(monkeypatch):
    printed = householder.eq13_printed

    def flipped(u, h, g):
        return -printed(u, h, g)

    monkeypatch.setattr(householder, "eq13_printed", flipped)
    records = _by_source(householder.gradient_checks())
    assert records["ICML Eq. 13"].verdict in BAD


@pytest.mark.slow
def test_a_wrong_factor_in_g_is_caught(monkeypatch, trained):
    """G(w) with ||W||^(T-1) instead of ||W||^(2T-2): Theorem 5's slope is no longer 2 log10 ||W||."""
    real = bound_report_module.complexity_term

    def wrong(norms, T, h, B, gamma, W_norm=None):
        term = real(norms, T, h, B, gamma, W_norm)
        term.log10_G -= (T - 1) * math.log10(max(norms.W if W_norm is None else W_norm, 1.0))
        return term

    monkeypatch.setattr(bound_report_module, "complexity_term", wrong)
    records = _by_source(bounds.records_from_checkpoints(trained))
    assert records["ICML Theorem 5 (RNN)"].verdict in BAD


@pytest.mark.slow
def test_a_wrong_printed_count_is_caught(monkeypatch):
    rows = [("spectral", 9, 128, {"m1": 16, "m2": 16}), *parameter_counts.TABLE2[1:]]
    monkeypatch.setattr(parameter_counts, "TABLE2", rows)
    record = next(r for r in parameter_counts.run() if r.claim.startswith("spectral, n_h = 128"))
    assert record.verdict in BAD


def test_a_wrong_baseline_is_caught(monkeypatch):
    monkeypatch.setattr(baselines, "PRINTED_ADDITION_BASELINE", 0.2)
    assert _by_source(baselines.run())["ICML Section 7.1 (addition baseline)"].verdict in BAD


@pytest.mark.parametrize("divisor, caught", [(2.0, False), (5.0, True)])
@pytest.mark.slow
def test_a_lemma3_bound_made_smaller(monkeypatch, trained, divisor, caught):
    """Halved, the bound still holds on everything measured (the tightest case found, W = M = Y = I, sits
    at 0.25 of it), so that mutation survives; divided by 5 it is caught."""
    real = perturbation.lemma3_right_hand_sides

    def smaller(*args):
        hidden, output = real(*args)
        return hidden - math.log10(divisor), output - math.log10(divisor)

    monkeypatch.setattr(perturbation, "lemma3_right_hand_sides", smaller)
    record = _by_source(bounds.records_from_checkpoints(trained))["ICML Lemma 3"]
    assert (record.verdict in BAD) == caught

