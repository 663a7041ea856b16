"""The fused reflector product (linalg.fused_householder) against the blocked compact-WY product and the
float64 reference loop, values and gradients, and the SVD map's use of it.

Without a GPU the kernels run through Triton's interpreter (tests/conftest.py sets ``TRITON_INTERPRET=1``)
on small shapes, n not a power of two included (the tile padded and masked)."""

import pytest
import torch

from spectral_analysis.linalg import packed_reflector_product, packed_reflector_product_sequential, svd_map
from spectral_analysis.linalg.fused_householder import fused_reflector_product
from spectral_analysis.linalg.householder import trapezoid_mask
from spectral_analysis.nn import build_model

D = torch.float64
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _packed(shape: tuple[int, ...], seed: int, dtype: torch.dtype = D) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    n, m = shape[-2:]
    Y = torch.randn(*shape, dtype=D, generator=gen) * trapezoid_mask(n, m, dtype=D)
    return Y.to(DEVICE, dtype)


@pytest.mark.parametrize(("shape", "seed"), [((20, 7), 0), ((3, 16, 16), 1), ((2, 33, 5), 2), ((9, 1), 3)])
def test_fused_product_matches_the_blocked_and_sequential_products(shape, seed):
    Y = _packed(shape, seed).requires_grad_()
    G = _packed((*shape[:-1], shape[-2]), seed + 10)
    products = [fused_reflector_product, packed_reflector_product, packed_reflector_product_sequential]
    results = []
    for product in products:
        Q = product(Y)
        results.append((Q.detach(), torch.autograd.grad((Q * G).sum(), Y)[0]))
    eye = torch.eye(shape[-2], dtype=D, device=DEVICE)
    assert torch.allclose(results[0][0].mT @ results[0][0], eye.expand_as(results[0][0]), atol=1e-13)
    for Q, grad in results[1:]:
        assert torch.allclose(results[0][0], Q, atol=1e-13)
        assert torch.allclose(results[0][1], grad, atol=1e-12)


def test_a_zero_column_is_the_identity_reflector():
    Y = _packed((6, 3), 4)
    Y[:, 1] = 0
    assert torch.allclose(fused_reflector_product(Y), packed_reflector_product(Y), atol=1e-14)


@pytest.mark.slow
def test_fused_product_gradcheck():
    Y = _packed((7, 4), 5).requires_grad_()
    assert torch.autograd.gradcheck(fused_reflector_product, (Y,))


def test_float32_stays_within_float32_rounding():
    Y = _packed((40, 16), 6)
    error = fused_reflector_product(Y.float()).double() - packed_reflector_product(Y)
    assert float(error.abs().max()) < 1e-5


def test_the_svd_map_takes_the_fused_product_where_it_may(monkeypatch):
    """With the fused product allowed (on the CPU only through the interpreter, so allowed here by hand),
    a Spectral-RNN's W and every gradient equal the blocked product's: m1 = m2 (one launch for U and V)
    and m1 != m2 (two)."""
    for m1, m2 in ((4, 4), (5, 2)):
        monkeypatch.undo()  # built on the CPU by the blocked product (a GPU has no interpreter for it)
        torch.manual_seed(7)
        model = build_model("spectral", 2, 12, 3, m1=m1, m2=m2).double().to(DEVICE)
        x = torch.randn(3, 6, 2, dtype=D, device=DEVICE)
        runs = []
        for allowed in (False, True):
            monkeypatch.setattr(svd_map, "fused_product_unavailable",
                                lambda Y, allowed=allowed: None if allowed else "blocked, for comparison")
            model.zero_grad()
            model(x).square().sum().backward()
            runs.append((model.transition_matrix().detach(), [p.grad.clone() for p in model.parameters()]))
        assert torch.allclose(runs[0][0], runs[1][0], atol=1e-13)
        for a, b in zip(runs[0][1], runs[1][1], strict=True):
            assert torch.allclose(a, b, atol=1e-11)


def test_the_fused_product_is_chosen_only_on_a_gpu_and_small_n():
    assert "CUDA device, not on 'cpu'" in svd_map.fused_product_unavailable(torch.zeros(16, 4))
    assert "up to n = 128, not 512" in svd_map.fused_product_unavailable(torch.zeros(512, 16))
    half = torch.zeros(64, 16, dtype=torch.bfloat16)
    assert "not torch.bfloat16" in svd_map.fused_product_unavailable(half)
