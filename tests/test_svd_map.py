"""The SVD map (Eq. 3, 15), its inverse, Theorems 2-4, Lemma A and the image-membership verdicts."""

import pytest
import torch

from spectral_analysis.linalg import (
    MembershipUndecidedError,
    complete_orthogonal,
    orthogonal_to_reflectors,
    pack_reflectors,
    packed_reflector_product,
    svd_compose,
    svd_compose_reference,
    svd_decompose,
    svd_image_membership,
)

D = torch.float64


def random_args(r: int, c: int, m1: int, m2: int, seed: int = 0, *batch: int):
    gen = torch.Generator().manual_seed(seed)
    u = [torch.randn(*batch, i, generator=gen, dtype=D) for i in range(r - m1 + 1, r + 1)]
    v = [torch.randn(*batch, i, generator=gen, dtype=D) for i in range(c - m2 + 1, c + 1)]
    sigma = torch.rand(*batch, min(r, c), generator=gen, dtype=D) + 0.5
    return u, v, sigma


@pytest.mark.parametrize("r,c,m1,m2", [(6, 6, 6, 6), (6, 6, 2, 3), (4, 7, 4, 4), (7, 4, 4, 4), (5, 9, 1, 0)])
def test_compose_matches_reference_eq15(r, c, m1, m2):
    u, v, sigma = random_args(r, c, m1, m2, seed=r * c)
    assert torch.allclose(svd_compose(u, v, sigma, (r, c), block_size=2),
                          svd_compose_reference(u, v, sigma, (r, c)), atol=1e-13)


def test_compose_batched_and_singular_values_are_sigma():
    u, v, sigma = random_args(5, 8, 5, 5, 1, 3)
    W = svd_compose(u, v, sigma, (5, 8))
    assert W.shape == (3, 5, 8)
    for b in range(3):
        one = svd_compose([x[b] for x in u], [x[b] for x in v], sigma[b], (5, 8))
        assert torch.allclose(W[b], one, atol=1e-14)
    assert torch.allclose(torch.linalg.svdvals(W), sigma.sort(-1, descending=True).values, atol=1e-13)


def test_compose_gradcheck():
    u, v, sigma = random_args(4, 5, 3, 4, 2)
    n_u, n_v = len(u), len(v)
    leaves = [t.requires_grad_(True) for t in (*u, *v, sigma)]

    def f(*xs):
        return svd_compose(list(xs[:n_u]), list(xs[n_u:n_u + n_v]), xs[-1], (4, 5), block_size=2)

    assert torch.autograd.gradcheck(f, tuple(leaves))


def test_compose_rejects_bad_shapes():
    u, v, sigma = random_args(4, 4, 2, 2)
    with pytest.raises(ValueError, match="sigma has length"):
        svd_compose(u, v, sigma[:3], (4, 4))
    with pytest.raises(ValueError, match="lengths"):
        svd_compose(u, v, sigma, (5, 4))


@pytest.mark.parametrize("r,c", [(1, 1), (5, 5), (12, 12), (3, 8), (8, 3), (30, 17)])
def test_full_round_trip_theorems_2_and_4(r, c):
    W = torch.randn(r, c, dtype=D, generator=torch.Generator().manual_seed(r + 10 * c))
    u, v, sigma = svd_decompose(W)
    p = min(r, c)
    assert [x.shape[0] for x in u] == list(range(r - p + 1, r + 1))  # k1 = r - p + 1
    assert [x.shape[0] for x in v] == list(range(c - p + 1, c + 1))  # k2 = c - p + 1
    assert (svd_compose(u, v, sigma, (r, c)) - W).abs().max() < 1e-10
    assert (svd_compose_reference(u, v, sigma, (r, c)) - W).abs().max() < 1e-10
    assert bool((sigma >= 0).all())


@pytest.mark.parametrize("n", [4, 7, 16, 40])
def test_theorem3_orthogonal_with_m1_plus_m2_equal_n(n):
    Q, _ = torch.linalg.qr(torch.randn(n, n, dtype=D, generator=torch.Generator().manual_seed(n)))
    for m1 in (0, n // 3, n // 2, n):
        u, v, sigma = svd_decompose(Q, m1, n - m1)
        assert len(u) == m1 and len(v) == n - m1
        assert (svd_compose(u, v, sigma, (n, n)) - Q).abs().max() < 1e-10


def test_generic_matrix_with_too_few_reflectors_raises_with_reason():
    W = torch.randn(12, 12, dtype=D, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="not in the image.*rank"):
        svd_decompose(W, 2, 3)
    small = torch.randn(6, 6, dtype=D, generator=torch.Generator().manual_seed(1))
    verdict = svd_image_membership(small, 2, 2)
    assert verdict.member is False and "searched" in verdict.reason


@pytest.mark.parametrize("r,c,m1,m2", [(6, 6, 3, 3), (5, 5, 2, 3), (5, 7, 2, 3), (7, 5, 3, 2),
                                       (6, 6, 4, 1), (6, 6, 6, 0), (40, 40, 5, 5), (64, 73, 8, 8)])
def test_partial_count_members_are_recovered(r, c, m1, m2):
    u, v, sigma = random_args(r, c, m1, m2, seed=r + c + m1)
    W = svd_compose(u, v, sigma, (r, c))
    u2, v2, sigma2 = svd_decompose(W, m1, m2)
    assert len(u2) == m1 and len(v2) == m2
    assert (svd_compose(u2, v2, sigma2, (r, c)) - W).norm() / W.norm() < 1e-9


def test_membership_is_not_fooled_by_one_extra_reflector():
    """A matrix built with m1 + 1 reflectors for U is generically not reachable with m1."""
    u, v, sigma = random_args(7, 7, 3, 2, seed=11)
    W = svd_compose(u, v, sigma, (7, 7))
    assert svd_image_membership(W, 3, 2).member is True
    assert svd_image_membership(W, 2, 2).member is False


def test_zero_singular_values_leave_columns_free():
    u, v, _ = random_args(6, 6, 3, 3, seed=12)
    sigma = torch.tensor([2.0, 1.5, 1.0, 0.0, 0.0, 0.0], dtype=D)
    W = svd_compose(u, v, sigma, (6, 6))
    verdict = svd_image_membership(W, 3, 3)
    assert verdict.member is True and verdict.residual < 1e-10


def test_undecided_is_reported_not_guessed():
    u, v, sigma = random_args(7, 7, 3, 3, seed=13)
    W = svd_compose(u, v, sigma, (7, 7))
    verdict = svd_image_membership(W, 3, 3, search_limit=1)
    assert verdict.member is None and "search_limit" in verdict.reason
    with pytest.raises(MembershipUndecidedError):
        svd_decompose(W, 3, 3, search_limit=1)


@pytest.mark.parametrize("bad,match", [
    (torch.randn(3), "2-D"), (torch.ones(2, 2, dtype=torch.int64), "floating"),
    (torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), "non-finite")])
def test_decompose_rejects_bad_matrices(bad, match):
    with pytest.raises(ValueError, match=match):
        svd_decompose(bad)


def test_decompose_rejects_bad_counts():
    with pytest.raises(ValueError, match="m1=5"):
        svd_decompose(torch.randn(4, 4), 5, 1)
    with pytest.raises(ValueError, match="m2=-1"):
        svd_decompose(torch.randn(4, 4), 1, -1)


@pytest.mark.parametrize("n,k", [(6, 1), (8, 3), (10, 10), (30, 12)])
def test_lemma_a_products_of_k_reflectors_have_rank_k_and_factor_back(n, k):
    gen = torch.Generator().manual_seed(n * k)
    Y = pack_reflectors([torch.randn(i, dtype=D, generator=gen) for i in range(n - k + 1, n + 1)], n)
    Q = packed_reflector_product(Y)
    assert torch.linalg.matrix_rank(Q - torch.eye(n, dtype=D)) == k
    Y2 = orthogonal_to_reflectors(Q, k)
    assert (packed_reflector_product(Y2) - Q).abs().max() < 1e-9
    if k > 1:
        with pytest.raises(ValueError, match=f"needs {k} reflectors"):
            orthogonal_to_reflectors(Q, k - 1)


def test_lemma_a_degenerate_case_fixed_first_column():
    """Q = diag(1, rotation): e_1 is fixed, yet two level-n/(n-1) reflectors suffice (rank 2)."""
    c, s = 0.6, 0.8
    Q = torch.tensor([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=D)
    Y = orthogonal_to_reflectors(Q, 2)
    assert (packed_reflector_product(Y) - Q).abs().max() < 1e-14


def test_complete_orthogonal_keeps_prescribed_columns_and_rank():
    Q0, _ = torch.linalg.qr(torch.randn(6, 6, dtype=D))
    Q = complete_orthogonal(6, [1, 4], Q0[:, [1, 4]])
    assert torch.allclose(Q[:, [1, 4]], Q0[:, [1, 4]], atol=1e-12)
    assert torch.allclose(Q.T @ Q, torch.eye(6, dtype=D), atol=1e-12)
    assert torch.linalg.matrix_rank(Q - torch.eye(6, dtype=D)) <= 2


def test_float32_input_full_and_partial_counts():
    gen = torch.Generator().manual_seed(5)
    W = torch.randn(20, 30, generator=gen)
    u, v, sigma = svd_decompose(W)
    assert u[0].dtype == torch.float32
    assert (svd_compose(u, v, sigma, (20, 30)) - W).abs().max() < 1e-5
    uu = [torch.randn(i, generator=gen) for i in range(37, 41)]
    vv = [torch.randn(i, generator=gen) for i in range(38, 41)]
    member = svd_compose(uu, vv, torch.rand(40, generator=gen) + 0.5, (40, 40))
    u, v, sigma = svd_decompose(member, 4, 3)  # singular gaps below the float32 tolerance
    assert (svd_compose(u, v, sigma, (40, 40)) - member).norm() / member.norm() < 1e-4
    assert svd_image_membership(torch.randn(40, 40, generator=gen), 4, 3).member is False
