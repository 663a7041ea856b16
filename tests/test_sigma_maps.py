"""Singular-value maps: Eq. 7 (sigmoid range), hard clipping, and the ||sigma - 1||^2 penalty."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spectral_analysis.linalg import SigmaMap, svd_compose

D = torch.float64


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=20), st.floats(0.01, 2.0),
       st.floats(0.5, 3.0), st.sampled_from(["sigmoid", "clip"]))
def test_bounded_maps_stay_in_range_for_any_raw_value(raw, r, star, kind):
    sigma = SigmaMap(kind, star, r)(torch.tensor(raw, dtype=D))
    assert bool((sigma >= star - r - 1e-12).all() and (sigma <= star + r + 1e-12).all())


def test_sigmoid_map_is_eq7_and_its_derivative_matches_autograd():
    raw = torch.randn(7, dtype=D, requires_grad=True)
    smap = SigmaMap("sigmoid", 1.0, 0.2)
    sigma = smap(raw)
    assert torch.allclose(sigma, 2 * 0.2 * (torch.sigmoid(raw) - 0.5) + 1.0)
    (grad,) = torch.autograd.grad(sigma.sum(), raw)
    assert torch.allclose(grad, smap.derivative(raw.detach()))


@pytest.mark.parametrize("kind", ["sigmoid", "clip", "none"])
def test_inverse_round_trip(kind):
    smap = SigmaMap(kind, 1.0, 0.3)
    sigma = torch.tensor([0.75, 1.0, 1.2], dtype=D)
    assert torch.allclose(smap(smap.inverse(sigma)), sigma, atol=1e-12)


def test_inverse_names_values_outside_the_range():
    with pytest.raises(ValueError, match=r"\[0\.9, 1\.1\]"):
        SigmaMap("sigmoid", 1.0, 0.1).inverse(torch.tensor([1.0, 1.5]))
    with pytest.raises(ValueError, match="outside"):
        SigmaMap("sigmoid", 1.0, 0.1).inverse(torch.tensor([1.1]))  # open interval


def test_clip_projection_and_penalty():
    smap = SigmaMap("clip", 1.0, 0.1)
    raw = torch.tensor([0.5, 1.0, 3.0])
    smap.project_(raw)
    assert torch.equal(raw, torch.tensor([0.9, 1.0, 1.1]))
    free = SigmaMap("none")
    assert float(free.penalty(torch.tensor([1.0, 3.0, -1.0]))) == pytest.approx(8.0)


@pytest.mark.parametrize("kwargs,match", [({"kind": "tanh"}, "unknown sigma map"),
                                          ({"r": -0.1}, "r must be"), ({"r": float("nan")}, "r must be"),
                                          ({"sigma_star": float("inf")}, "finite")])
def test_bad_maps_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SigmaMap(**kwargs)


@pytest.mark.parametrize("kind", ["sigmoid", "clip"])
def test_zero_radius_pins_every_singular_value(kind):
    smap = SigmaMap(kind, 1.0, 0.0)
    assert torch.equal(smap(torch.tensor([-50.0, 0.0, 7.0])), torch.ones(3))
    assert torch.equal(smap(smap.inverse(torch.ones(4))), torch.ones(4))
    with pytest.raises(ValueError, match="outside"):
        smap.inverse(torch.tensor([1.0, 1.01]))


def test_composed_matrix_has_constrained_singular_values():
    gen = torch.Generator().manual_seed(0)
    u = [torch.randn(i, dtype=D, generator=gen) for i in range(1, 9)]
    v = [torch.randn(i, dtype=D, generator=gen) for i in range(5, 9)]
    raw = 100 * torch.randn(8, dtype=D, generator=gen)
    svals = torch.linalg.svdvals(svd_compose(u, v, SigmaMap("sigmoid", 1.0, 0.05)(raw), (8, 8)))
    assert bool((svals >= 0.95 - 1e-12).all() and (svals <= 1.05 + 1e-12).all())
