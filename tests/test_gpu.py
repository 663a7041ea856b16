"""CUDA paths: the blocked product and the SVD map on a GPU agree with the CPU (skipped without one)."""

import pytest
import torch

from spectral_analysis.linalg import householder_product, svd_compose_packed, trapezoid_mask

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_blocked_product_on_cuda_matches_cpu_with_gradients():
    Y = torch.randn(256, 256, dtype=torch.float64) * trapezoid_mask(256, 256, dtype=torch.float64)
    cpu = Y.clone().requires_grad_(True)
    gpu = Y.cuda().requires_grad_(True)
    G = torch.randn(256, 256, dtype=torch.float64)
    (householder_product(cpu) * G).sum().backward()
    (householder_product(gpu) * G.cuda()).sum().backward()
    assert torch.allclose(householder_product(gpu).cpu(), householder_product(cpu), atol=1e-12)
    assert torch.allclose(gpu.grad.cpu(), cpu.grad, atol=1e-10)


def test_svd_map_on_cuda():
    Yu = torch.randn(64, 16, device="cuda") * trapezoid_mask(64, 16, device="cuda", dtype=torch.float32)
    Yv = torch.randn(48, 16, device="cuda") * trapezoid_mask(48, 16, device="cuda", dtype=torch.float32)
    sigma = torch.rand(48, device="cuda") + 0.5
    W = svd_compose_packed(Yu, Yv, sigma)
    assert W.is_cuda and W.shape == (64, 48)
    assert torch.allclose(torch.linalg.svdvals(W.double()).cpu(),
                          sigma.double().sort(descending=True).values.cpu(), atol=1e-4)
