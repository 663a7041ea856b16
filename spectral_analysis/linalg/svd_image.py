"""Membership in the image of the SVD map ``M_{k1,k2}^{r,c}`` (Eq. 3, 15) and its inverse.

The paper leaves the image of ``M_{k1,k2}`` open (Section 8). By Lemma A
(:mod:`spectral_analysis.linalg.reflector_factor`), with ``m1 = r - k1 + 1``, ``m2 = c - k2 + 1``:

    W is in the image  <=>  W = U D V^T with U, V orthogonal, D real r x c diagonal,
                            rank(U - I) <= m1 and rank(V - I) <= m2,

where columns of U, V that meet a zero of D are free (Lemma B). Consequences used here:

1. Certificate of non-membership: ``W - D = -(U - I) D V^T - D (V - I)^T`` has rank <= m1 + m2,
   so every block ``W[R, C]`` with row and column index sets disjoint avoids D and has rank
   <= m1 + m2.
2. When the nonzero singular values of W are distinct, its factorizations W = U D V^T are
   exactly the signed pairings of its SVD (slot j of D gets singular triplet i, with signs),
   a finite set; a depth-first search over them, pruned by the two rank budgets, decides
   membership exactly (up to the tolerance), within a node budget.
3. Diagonal recovery: when ``2 (m1 + m2) + 2 <= min(r, c)``, the diagonal of the rank-(m1 + m2)
   matrix ``W - D`` is fixed by its off-diagonal entries (a low-rank completion through two
   disjoint halves of the indices), so D, hence the pairing and the products of signs, is
   found in polynomial time; only the signs of U's columns are left to search.
4. When all singular values are equal (``W = s O``, O orthogonal, square): W is in the image
   iff ``rank(O Lambda - I) <= m1 + m2`` for a sign matrix Lambda (then split the greedy
   reflectors of ``O Lambda`` between U and V). Theorem 3 is the case m1 + m2 >= n.
Other cases (repeated but unequal singular values) that the search cannot settle are reported
as undecided (:class:`MembershipUndecidedError`), never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from spectral_analysis.linalg.householder import unpack_reflectors
from spectral_analysis.linalg.pairing_search import (
    Pairing,
    fix_determinants,
    forced_signs,
    pairing_from_diagonal,
    recover_diagonal,
    search_pairing,
    side_mode,
    sign_search,
)
from spectral_analysis.linalg.reflector_factor import (
    complete_orthogonal,
    default_tolerance,
    numerical_rank,
    orthogonal_to_reflectors,
)

DEFAULT_SEARCH_LIMIT = 2 * 10**8
"""Work budget of the searches, in flop-like units (each expansion costs at least 10^4): ~2 s."""
ACCEPTED_RESIDUAL = 1e-6
"""Largest relative error ||M(u, v, sigma) - W||_F / ||W||_F of a reported decomposition for
float64 input (``1000 eps`` of the input's dtype when that is larger, e.g. 1.2e-4 for float32,
whose data are members only up to their rounding). The decision is by rank tests at ``tol``;
partial-count factors can be ill-conditioned (see :func:`orthogonal_to_reflectors`), so their
achieved error is reported as ``residual``."""


def accepted_residual(dtype: torch.dtype) -> float:
    """The rebuild error below which a decomposition of a ``dtype`` matrix is returned."""
    return max(ACCEPTED_RESIDUAL, 1e3 * float(torch.finfo(dtype).eps))


class MembershipUndecidedError(ValueError):
    """Raised when membership in the image of ``M_{k1,k2}`` could not be settled."""


@dataclass
class ImageMembership:
    """Verdict on ``W in image(M_{k1,k2})``: ``member`` is True, False, or None (undecided)."""

    member: bool | None
    reason: str
    shape: tuple[int, int]
    m1: int
    m2: int
    u_vectors: list[Tensor] = field(default_factory=list)
    v_vectors: list[Tensor] = field(default_factory=list)
    sigma: Tensor | None = None
    residual: float | None = None
    nodes: int = 0


def _validate(W: Tensor, m1: int | None, m2: int | None) -> tuple[int, int, int, int]:
    if not isinstance(W, Tensor):
        raise ValueError(f"expected a torch.Tensor matrix, got {type(W).__name__}")
    if W.dim() != 2 or W.shape[0] == 0 or W.shape[1] == 0:
        raise ValueError(f"expected a non-empty 2-D matrix, got shape {tuple(W.shape)}")
    if not W.is_floating_point():
        raise ValueError(f"expected a floating-point matrix, got dtype {W.dtype}")
    if not bool(torch.isfinite(W).all()):
        raise ValueError("matrix has non-finite entries (nan or inf)")
    r, c = W.shape
    p = min(r, c)
    m1 = p if m1 is None else int(m1)
    m2 = p if m2 is None else int(m2)
    if not 0 <= m1 <= r:
        raise ValueError(f"m1={m1} reflectors for U must lie in [0, {r}] (U is {r} x {r})")
    if not 0 <= m2 <= c:
        raise ValueError(f"m2={m2} reflectors for V must lie in [0, {c}] (V is {c} x {c})")
    return r, c, m1, m2


def _off_diagonal_certificate(W: Tensor, budget: int, tol: float) -> str | None:
    """A block W[R, C] (R, C disjoint) of rank > m1 + m2, described, or None (consequence 1)."""
    r, c = W.shape
    p = min(r, c)
    for a in sorted({p // 2, p // 3, (2 * p) // 3, 1} - {0}):
        for rows, cols, label in ((slice(0, a), slice(a, c), f"W[0:{a}, {a}:{c}]"),
                                  (slice(a, r), slice(0, a), f"W[{a}:{r}, 0:{a}]")):
            block = W[rows, cols]
            if min(block.shape) <= budget:
                continue
            rank = numerical_rank(block, tol)
            if rank > budget:
                return (f"the off-diagonal block {label} has rank {rank} > m1 + m2 = {budget}, "
                        "but every matrix in the image is diagonal + rank <= m1 + m2")
    return None


def _factor_from_columns(n: int, cols: dict[int, Tensor], m: int, tol: float) -> Tensor:
    """Packed reflectors of an orthogonal n x n matrix with the prescribed columns (Lemmas A, B)."""
    indices = sorted(cols)
    columns = (torch.stack([cols[j] for j in indices], dim=1) if indices
               else torch.zeros(n, 0, dtype=torch.float64))
    Q = complete_orthogonal(n, indices, columns, tol)
    return orthogonal_to_reflectors(Q, m, tol)


def _from_pairing(shape: tuple[int, int], U0: Tensor, s: Tensor, V0: Tensor, pairing: Pairing, m1: int,
                  m2: int, tol: float) -> tuple[Tensor, Tensor, Tensor]:
    r, c = shape
    u_cols, v_cols, sigma = {}, {}, torch.zeros(min(r, c), dtype=torch.float64)
    for j, (i, lam, mu) in enumerate(pairing.slots):
        if i is None:
            continue
        u_cols[j], v_cols[j] = lam * U0[:, i], mu * V0[:, i]
        sigma[j] = lam * mu * s[i]
    return _factor_from_columns(r, u_cols, m1, tol), _factor_from_columns(c, v_cols, m2, tol), sigma


def _orthogonal_case(W64: Tensor, scale: float, m1: int, m2: int, tol: float, limit: int):
    Orth = W64 / scale
    n = Orth.shape[0]
    lam, nodes, exhausted = sign_search(Orth, m1 + m2, tol, limit)
    if lam is None:
        return None, nodes, exhausted
    full = orthogonal_to_reflectors(Orth * lam, m1 + m2 if m1 + m2 <= n else n, tol)
    Yu = full[:, :m1]
    from spectral_analysis.linalg.wy import packed_reflector_product
    U = packed_reflector_product(Yu)
    # Orth Lambda = U V'^T with V' = Lambda V Lambda  =>  V = Lambda (Orth Lambda)^T U Lambda
    V = lam[:, None] * ((Orth * lam).mT @ U) * lam[None, :]
    return (Yu, orthogonal_to_reflectors(V, m2, tol), scale * lam), nodes, exhausted


def svd_image_membership(W: Tensor, m1: int | None = None, m2: int | None = None, *,
                         tol: float | None = None,
                         search_limit: int = DEFAULT_SEARCH_LIMIT) -> ImageMembership:
    """Decide whether ``W`` (r x c) lies in the image of ``M_{k1,k2}^{r,c}`` (Eq. 3, 15).

    ``m1``, ``m2``: reflector counts for U and V (``k1 = r - m1 + 1``, ``k2 = c - m2 + 1``);
    ``None`` gives the full counts of Theorems 2 and 4 (``min(r, c)`` each). A member comes with
    its vectors (verified by recomposing W); a non-member with the reason.
    """
    r, c, m1, m2 = _validate(W, m1, m2)
    tol = default_tolerance(W.dtype) if tol is None else float(tol)
    W64 = W.detach().to(torch.float64).cpu()
    U0, s, V0t = torch.linalg.svd(W64, full_matrices=False)
    V0 = V0t.mT
    scale = max(float(s[0]), 1e-300)
    nonzero = [bool(x > tol * scale) for x in s]
    verdict = ImageMembership(None, "", (r, c), m1, m2)
    if m1 + m2 < min(r, c) and (why := _off_diagonal_certificate(W64, m1 + m2, tol * scale)):
        verdict.member, verdict.reason = False, why
        return verdict
    factors, nodes, exhausted, pairing = None, 0, False, None
    modes = (side_mode(m1, r, nonzero), side_mode(m2, c, nonzero))
    binding = (modes[0] == "binding", modes[1] == "binding")
    distinct = all(float(s[i] - s[i + 1]) > tol * scale for i in range(len(s) - 1) if nonzero[i + 1])
    if not any(binding):
        pairing = Pairing([(i if nonzero[i] else None, 1.0, 1.0) for i in range(len(s))])
    elif r == c and all(nonzero) and float(s[0] - s[-1]) <= tol * scale:
        factors, nodes, exhausted = _orthogonal_case(W64, float(s.mean()), m1, m2, tol, search_limit)
        if factors is None:
            verdict.nodes = nodes
            if exhausted:
                verdict.member = False
                verdict.reason = (f"W is a multiple of an orthogonal O, and no sign matrix L gives "
                                  f"rank(O L - I) <= m1 + m2 = {m1 + m2}")
            else:
                verdict.reason = (f"sign search stopped after {nodes} nodes "
                                  f"(search_limit={search_limit:g} work units)")
            return verdict
    else:
        k = m1 + m2
        if 2 * k + 2 <= min(r, c) and (diag := recover_diagonal(W64, k, tol * scale)) is not None:
            Sigma = torch.zeros(r, c, dtype=torch.float64)
            Sigma[range(len(diag)), range(len(diag))] = diag
            forced = pairing_from_diagonal(diag, s, nonzero, 10 * tol * scale)
            if forced is not None and numerical_rank(W64 - Sigma, tol * scale) <= k:
                pairing = forced_signs(U0, V0, forced, m1, m2, tol)
                if pairing is None:
                    pairing, nodes, _ = search_pairing(U0, V0, nonzero, m1, m2, tol,
                                                        search_limit, forced, binding)
        if pairing is None:
            pairing, more, exhausted = search_pairing(U0, V0, nonzero, m1, m2, tol, search_limit,
                                                       binding=binding)
            nodes += more
    if pairing is not None and all(i is not None for i, _, _ in pairing.slots):
        pairing = fix_determinants(pairing, U0, V0, modes)
    if factors is None and pairing is not None:
        try:
            factors = _from_pairing((r, c), U0, s, V0, pairing, m1, m2, tol)
        except ValueError as error:  # a pairing that misses a budget is a bug, not a verdict
            verdict.reason = f"internal: pairing failed its rank budgets ({error})"
            return verdict
    verdict.nodes = nodes
    if factors is None:
        if exhausted and distinct:
            verdict.member = False
            verdict.reason = (f"no SVD of W has rank(U - I) <= m1 = {m1} and rank(V - I) <= "
                              f"m2 = {m2} (all signed pairings of its distinct singular values "
                              f"searched, {nodes} nodes)")
        elif exhausted:
            verdict.reason = ("W has repeated singular values, whose continuous SVD freedom the "
                              "signed-pairing search does not cover")
        else:
            verdict.reason = (f"pairing search stopped after {nodes} nodes "
                              f"(search_limit={search_limit:g} work units)")
        return verdict
    Yu, Yv, sigma = factors
    from spectral_analysis.linalg.svd_map import svd_compose_packed
    rebuilt = svd_compose_packed(Yu, Yv, sigma)
    residual = float((rebuilt - W64).norm() / max(float(W64.norm()), 1e-300))
    verdict.member, verdict.residual = True, residual
    verdict.u_vectors = [u.to(W.device, W.dtype) for u in unpack_reflectors(Yu)]
    verdict.v_vectors = [v.to(W.device, W.dtype) for v in unpack_reflectors(Yv)]
    verdict.sigma = sigma.to(W.device, W.dtype)
    verdict.reason = ("W = M_{k1,k2}(u, v, sigma), verified by recomposing"
                      if residual <= accepted_residual(W.dtype) else
                      f"W is in the image (rank tests at tol={tol:g}), but its fixed-count "
                      f"factorization is ill-conditioned here: the vectors rebuild W only to "
                      f"relative error {residual:.3g}")
    return verdict


def svd_decompose(W: Tensor, m1: int | None = None, m2: int | None = None, *,
                  tol: float | None = None, search_limit: int = DEFAULT_SEARCH_LIMIT
                  ) -> tuple[list[Tensor], list[Tensor], Tensor]:
    """Inverse of :func:`svd_compose`: ``(u_vectors, v_vectors, sigma)`` with ``M(...) = W``.

    ``u_vectors = [u_k1, ..., u_r]`` and ``v_vectors = [v_k2, ..., v_c]`` (u_i of length i);
    ``sigma`` of length ``min(r, c)`` (real, possibly negative). Raises ``ValueError`` saying
    why when ``W`` is not in the image for counts ``m1``, ``m2``, and
    :class:`MembershipUndecidedError` (a ``ValueError``) when that could not be settled.
    """
    verdict = svd_image_membership(W, m1, m2, tol=tol, search_limit=search_limit)
    if verdict.member is None:
        raise MembershipUndecidedError(f"membership undecided for m1={verdict.m1}, m2={verdict.m2}: "
                                  f"{verdict.reason}")
    if not verdict.member:
        raise ValueError(f"W ({verdict.shape[0]} x {verdict.shape[1]}) is not in the image of "
                         f"M_(k1,k2) with m1={verdict.m1}, m2={verdict.m2}: {verdict.reason}")
    if verdict.residual is None or verdict.residual > accepted_residual(W.dtype):
        raise ValueError(f"m1={verdict.m1}, m2={verdict.m2}: {verdict.reason}")
    return verdict.u_vectors, verdict.v_vectors, verdict.sigma
