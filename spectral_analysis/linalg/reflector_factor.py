"""Orthogonal matrices as products of Householder reflectors with prescribed lengths.

Lemma A (proved here; the paper's Theorem 1 is its case m = n). For ``Q`` in O(n) and ``m <= n``,
``Q = H_n(u_n) H_{n-1}(u_{n-1}) ... H_{n-m+1}(u_{n-m+1})`` for some vectors (zeros allowed)
**iff** ``rank(Q - I) <= m``.

*Only if*: the product is ``I - Y T Y^T`` with ``Y`` n x m (compact WY), so ``rank(Q - I) <= m``.
*If* (constructive, :func:`orthogonal_to_reflectors`): at step s the current ``Q`` fixes
``e_1 .. e_{s-1}``. Take y = e_s if ``Q e_s != e_s``, else any e_j with ``Q e_j != e_j``, and the
reflector with normal ``nu = Q y - y`` (it swaps ``y`` and ``Q y``). ``nu`` is orthogonal to
``e_1..e_{s-1}`` and to ``fix(Q)`` (because ``range(Q - I) = fix(Q)^perp``), so ``H Q`` keeps
every fixed vector, also fixes ``y`` and ``e_s``, and ``rank(HQ - I) = rank(Q - I) - 1``. After
``rank(Q - I)`` steps the product is ``I``.

Lemma B (completion). Given columns ``q_j`` for ``j`` in a set J (orthonormal), there is ``Q`` in
O(n) with ``Q e_j = q_j`` and ``range(Q - I) = span{q_j - e_j}``, so the smallest reflector count
for such a ``Q`` is ``rank([q_j - e_j])``. (:func:`complete_orthogonal`, by orthogonal Procrustes.)
"""

from __future__ import annotations

import torch
from torch import Tensor


def default_tolerance(dtype: torch.dtype) -> float:
    """Decision tolerance for rank and equality tests: ``sqrt(eps)`` of the input's dtype."""
    return float(torch.finfo(dtype).eps) ** 0.5


def numerical_rank(A: Tensor, tol: float) -> int:
    """Number of singular values of ``A`` above ``tol`` (absolute)."""
    if A.numel() == 0:
        return 0
    return int((torch.linalg.svdvals(A) > tol).sum())


def orthogonal_to_reflectors(Q: Tensor, m: int | None = None, tol: float | None = None) -> Tensor:
    """Packed ``(n, m)`` unit reflectors ``Y`` with ``H(y_0) ... H(y_{m-1}) = Q`` (Lemma A).

    Raises ``ValueError`` when ``rank(Q - I) > m`` (then no such vectors exist) or ``Q`` is not
    orthogonal. Computed in float64. Each step is backward stable, but a step whose column
    barely moves (small ``||nu||``) amplifies earlier rounding by ``1/||nu||`` and these factors
    compound: the vectors of a fixed-count factorization are ill-conditioned there, so callers
    check the rebuilt product (:func:`spectral_analysis.linalg.svd_image.svd_image_membership`
    reports it as ``residual``).
    """
    if Q.dim() != 2 or Q.shape[0] != Q.shape[1]:
        raise ValueError(f"orthogonal_to_reflectors: expected a square matrix, got shape {tuple(Q.shape)}")
    n = Q.shape[0]
    m = n if m is None else m
    if not 0 <= m <= n:
        raise ValueError(f"orthogonal_to_reflectors: reflector count m={m} must lie in [0, {n}]")
    Q = Q.detach().to(torch.float64).clone()
    tol = default_tolerance(torch.float64) if tol is None else tol
    eye = torch.eye(n, dtype=torch.float64, device=Q.device)
    if (Q.mT @ Q - eye).abs().max() > tol:
        raise ValueError("orthogonal_to_reflectors: the matrix is not orthogonal "
                         f"(max |Q^T Q - I| = {(Q.mT @ Q - eye).abs().max().item():.3g})")
    rank = numerical_rank(Q - eye, tol)
    if rank > m:
        raise ValueError(
            f"orthogonal matrix needs {rank} reflectors, more than m={m}: rank(Q - I) = {rank} "
            f"(Lemma A: H_n...H_(n-m+1) reaches exactly the Q with rank(Q - I) <= m)")
    Y = torch.zeros(n, m, dtype=torch.float64, device=Q.device)
    for s in range(m):
        T = Q[s:, s:]
        moved = (T - eye[s:, s:]).norm(dim=0)
        if moved.max() <= tol:
            break
        j = 0 if moved[0] > tol else int(moved.argmax())
        q = T[:, j]
        nu = q.clone()
        rest = torch.cat([q[:j], q[j + 1:]]).square().sum()  # Parlett: no cancellation in q_j - 1
        nu[j] = q[j] - 1.0 if q[j] <= 0 else -rest / (q[j] + (rest + q[j] ** 2).sqrt())
        nu = nu / nu.norm()
        Y[s:, s] = nu
        Q[s:, s:] = T - 2.0 * torch.outer(nu, nu @ T)
    return Y


def complete_orthogonal(n: int, indices: list[int], columns: Tensor, tol: float | None = None) -> Tensor:
    """``Q`` in O(n) with ``Q[:, indices] = columns`` and ``range(Q - I) = span(columns - E)`` (Lemma B)."""
    columns = columns.detach().to(torch.float64)
    if columns.shape != (n, len(indices)):
        raise ValueError(f"complete_orthogonal: columns must have shape ({n}, {len(indices)}), "
                         f"got {tuple(columns.shape)}")
    tol = default_tolerance(torch.float64) if tol is None else tol
    eye = torch.eye(n, dtype=torch.float64, device=columns.device)
    if not indices:
        return eye
    E = eye[:, indices]
    basis, singular, _ = torch.linalg.svd(columns - E, full_matrices=False)
    basis = basis[:, singular > tol]
    if basis.shape[1] == 0:
        return eye
    source, target = basis.mT @ E, basis.mT @ columns
    left, _, right_t = torch.linalg.svd(target @ source.mT)
    rotation = left @ right_t
    Q = eye + basis @ (rotation - torch.eye(basis.shape[1], dtype=torch.float64)) @ basis.mT
    error = (Q[:, indices] - columns).abs().max().item()
    if error > 10 * tol:
        raise ValueError(f"complete_orthogonal: prescribed columns are not orthonormal (error {error:.3g})")
    return Q
