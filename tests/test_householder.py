"""Reflectors (Eq. 1, 2, 8, 12, 13; Alg. 1-3) and the blocked product against their references."""

import pytest
import torch

from spectral_analysis.linalg import (
    apply_householder,
    hgrad,
    hprod,
    normalize_reflectors,
    pack_reflectors,
    packed_reflector_product,
    packed_reflector_product_sequential,
    reflector,
    reflector_loop,
    reflector_product,
    trapezoid_mask,
    unpack_reflectors,
)

D = torch.float64


def random_packed(n: int, m: int, *batch: int, dtype=D, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*batch, n, m, generator=gen, dtype=dtype) * trapezoid_mask(n, m, dtype=dtype)


def test_reflector_is_symmetric_orthogonal_with_one_negative_eigenvalue():
    u = torch.randn(4, dtype=D)
    H = reflector(u, 7)
    eye = torch.eye(7, dtype=D)
    assert torch.allclose(H, H.T, atol=1e-15)
    assert torch.allclose(H @ H, eye, atol=1e-14)
    eig = torch.linalg.eigvalsh(H)
    assert torch.allclose(eig, torch.tensor([-1.0] + [1.0] * 6, dtype=D), atol=1e-13)
    assert torch.equal(H[:3, :3], eye[:3, :3]) and torch.equal(H[:3, 3:], torch.zeros(3, 4, dtype=D))


def test_zero_vector_is_identity_with_finite_gradient():
    u = torch.zeros(3, dtype=D, requires_grad=True)
    H = reflector(u, 5)
    assert torch.equal(H, torch.eye(5, dtype=D))
    (H * torch.randn(5, 5, dtype=D)).sum().backward()
    assert torch.isfinite(u.grad).all()
    Y = torch.zeros(5, 2, dtype=D, requires_grad=True)
    Q = packed_reflector_product(Y)
    assert torch.equal(Q, torch.eye(5, dtype=D))
    Q.sum().backward()
    assert torch.isfinite(Y.grad).all()


def test_reflector_gradcheck():
    u = torch.randn(4, dtype=D, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: reflector(x, 6), (u,))


def test_reflector_rejects_too_long_vector():
    with pytest.raises(ValueError, match="1 <= k <= n"):
        reflector(torch.ones(5), 4)


def test_pack_unpack_round_trip_and_length_check():
    vectors = [torch.randn(i, dtype=D) for i in range(3, 7)]
    Y = pack_reflectors(vectors, 6)
    assert Y.shape == (6, 4)
    assert torch.equal(Y * trapezoid_mask(6, 4, dtype=D), Y)
    assert all(torch.equal(a, b) for a, b in zip(unpack_reflectors(Y), vectors, strict=True))
    with pytest.raises(ValueError, match="lengths"):
        pack_reflectors([torch.randn(3), torch.randn(5)], 5)


@pytest.mark.parametrize("method", ["sequential", "blocked"])
def test_reflector_product_matches_dense_eq2(method):
    vectors = [torch.randn(i, dtype=D) for i in range(2, 9)]
    dense = reflector_product(vectors, 8, method="dense")
    assert torch.allclose(reflector_product(vectors, 8, method=method, block_size=3), dense, atol=1e-13)


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 2e-5), (torch.float64, 1e-12)])
@pytest.mark.parametrize("n,m,block", [(9, 9, 4), (16, 5, 2), (33, 33, 64), (40, 17, 8), (6, 1, 1)])
def test_blocked_product_matches_sequential(dtype, atol, n, m, block):
    Y = random_packed(n, m, dtype=dtype, seed=n + m)
    fast = packed_reflector_product(Y, block)
    slow = packed_reflector_product_sequential(Y)
    assert torch.allclose(fast, slow, atol=atol)
    X = torch.randn(n, 3, dtype=dtype)
    assert torch.allclose(apply_householder(Y, X, block), slow @ X, atol=10 * atol)


def test_blocked_product_is_orthogonal_to_1e12_and_batched():
    Y = random_packed(50, 50, 3, seed=1)
    Q = packed_reflector_product(Y, 8)
    eye = torch.eye(50, dtype=D)
    assert (Q.mT @ Q - eye).abs().max() < 1e-12
    assert torch.allclose(Q, packed_reflector_product_sequential(Y), atol=1e-12)


def test_blocked_product_matches_torch_householder_product():
    Y = random_packed(12, 7, seed=3)
    Yn = normalize_reflectors(Y)
    pivots = torch.diagonal(Yn[:7, :7])
    ours = packed_reflector_product(Y, 3)
    theirs = torch.linalg.householder_product(Yn / pivots, 2 * pivots**2)
    # LAPACK's orgqr returns the first m columns of H(y_0)...H(y_{m-1})
    assert torch.allclose(ours[:, :7], theirs, atol=1e-12)


def test_blocked_product_and_apply_gradcheck():
    Y = random_packed(7, 5, seed=4).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda y: packed_reflector_product(y, 2), (Y,))
    X = torch.randn(7, 2, dtype=D, requires_grad=True)
    assert torch.autograd.gradcheck(lambda y, x: apply_householder(y, x, 2), (Y, X))


def test_hprod_matches_dense_reflector_batched():
    h = torch.randn(4, 6, dtype=D)
    u = torch.randn(3, dtype=D)
    assert torch.allclose(hprod(h, u), h @ reflector(u, 6).T, atol=1e-14)


def test_hgrad_matches_autograd_eq12_eq13():
    h = torch.randn(5, 6, dtype=D, requires_grad=True)
    u = torch.randn(4, dtype=D, requires_grad=True)
    g = torch.randn(5, 6, dtype=D)
    hprod(h, u).backward(g)
    grad_h, grad_u = hgrad(h.detach(), u.detach(), g)
    assert torch.allclose(grad_h, h.grad, atol=1e-13)
    assert torch.allclose(grad_u.sum(0), u.grad, atol=1e-13)
    # dL/du is orthogonal to u: H_k(u) is invariant to the scale of u
    assert abs(float(grad_u.sum(0) @ u.detach())) < 1e-12


def test_hgrad_with_reflector_output_instead_of_input_is_wrong():
    """Algorithm 1 as printed feeds Hgrad the reflector's output on the U side; it must be the input."""
    h = torch.randn(6, dtype=D)
    u = torch.randn(6, dtype=D)
    g = torch.randn(6, dtype=D)
    _, right = hgrad(h, u, g)
    _, wrong = hgrad(hprod(h, u), u, g)
    assert not torch.allclose(right, wrong, atol=1e-3)


def dense_transition(Yu, sigma, Yv):
    U, V = packed_reflector_product_sequential(Yu), packed_reflector_product_sequential(Yv)
    return U @ torch.diag(sigma) @ V.T


def test_reflector_loop_forward_and_paper_backward_match_autograd():
    n = 7
    Yu, Yv = random_packed(n, 4, seed=5), random_packed(n, 3, seed=6)
    sigma = torch.rand(n, dtype=D) + 0.5
    h = torch.randn(3, n, dtype=D)
    leaves = [t.clone().requires_grad_(True) for t in (h, Yu, sigma, Yv)]
    out = reflector_loop(*leaves)
    assert torch.allclose(out, h @ dense_transition(Yu, sigma, Yv).T, atol=1e-13)
    g = torch.randn_like(out)
    paper = torch.autograd.grad(out, leaves, g)
    ref_leaves = [t.clone().requires_grad_(True) for t in (h, Yu, sigma, Yv)]
    ref_out = ref_leaves[0] @ dense_transition(*ref_leaves[1:]).T
    reference = torch.autograd.grad(ref_out, ref_leaves, g)
    for a, b in zip(paper, reference, strict=True):
        assert torch.allclose(a, b, atol=1e-12)


def test_reflector_loop_gradcheck_and_shape_errors():
    leaves = (torch.randn(2, 5, dtype=D), random_packed(5, 3, seed=7), torch.rand(5, dtype=D) + 0.5,
              random_packed(5, 2, seed=8))
    leaves = tuple(t.requires_grad_(True) for t in leaves)
    assert torch.autograd.gradcheck(reflector_loop, leaves)
    with pytest.raises(ValueError, match="sigma must have shape"):
        reflector_loop(leaves[0], leaves[1], torch.ones(4, dtype=D), leaves[3])
    with pytest.raises(ValueError, match="Yu must have shape"):
        reflector_loop(leaves[0], random_packed(6, 2), leaves[2], leaves[3])


def test_householder_product_rejects_bad_input():
    with pytest.raises(ValueError, match="do not fit"):
        packed_reflector_product(torch.randn(3, 4))
    with pytest.raises(ValueError, match="floating"):
        packed_reflector_product(torch.ones(3, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="rows"):
        apply_householder(torch.randn(4, 2), torch.randn(3, 3))


@pytest.mark.parametrize("block", [16, 128])
def test_blocked_product_stays_accurate_for_nearly_parallel_reflectors(block):
    """The adversarial case for the T factor (T^{-1} = I/2 + striu(~1)): still matches the reference."""
    n = 200
    gen = torch.Generator().manual_seed(0)
    Y = torch.zeros(n, n, dtype=D)
    Y[-1, :] = 1.0
    Y = (Y + 1e-6 * torch.randn(n, n, dtype=D, generator=gen)) * trapezoid_mask(n, n, dtype=D)
    Q = packed_reflector_product(Y, block)
    assert (Q - packed_reflector_product_sequential(Y)).abs().max() < 1e-11
    assert (Q.T @ Q - torch.eye(n, dtype=D)).abs().max() < 1e-11
