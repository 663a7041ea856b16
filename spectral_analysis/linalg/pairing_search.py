"""Searches over the factorizations ``W = U D V^T`` that decide membership in the image of
``M_{k1,k2}`` (consequences 2-4 of :mod:`spectral_analysis.linalg.svd_image`).

A pairing gives slot j of D a singular triplet i of W with signs (lambda_j, mu_j): column j of U
is ``lambda_j u_i``, of V ``mu_j v_i``, and ``D_jj = lambda_j mu_j s_i``. The searches keep the
spans of ``U e_j - e_j`` and ``V e_j - e_j`` (Lemma A: their dimensions are the reflector counts
needed) and prune a branch as soon as a budget is exceeded.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

EXPANSION_FLOOR = 10**4
"""Work charged per search expansion on top of its flops (Python overhead)."""


@dataclass
class Pairing:
    slots: list[tuple[int | None, float, float]]  # per slot j: (singular index or None, lambda, mu)



def residual_norms(basis: Tensor, cand: Tensor) -> Tensor:
    if basis.shape[1]:
        cand = cand - basis @ (basis.mT @ cand)
        cand = cand - basis @ (basis.mT @ cand)
    return cand.norm(dim=0)


def extend(basis: Tensor, col: Tensor, tol: float) -> Tensor:
    res = col - basis @ (basis.mT @ col)
    res = res - basis @ (basis.mT @ res)
    norm = res.norm()
    return basis if norm <= tol else torch.cat([basis, (res / norm).unsqueeze(1)], dim=1)


def search_pairing(U0: Tensor, V0: Tensor, nonzero: list[bool], m1: int, m2: int, tol: float,
                    limit: int, forced: list[tuple[int | None, float]] | None = None,
                    binding: tuple[bool, bool] = (True, True)
                    ) -> tuple[Pairing | None, int, bool]:
    """DFS over signed pairings (consequence 2), or over signs only when ``forced`` gives each
    slot its singular index and sign product (consequence 3). Returns (pairing, nodes, exhausted)."""
    r, p = U0.shape
    c = V0.shape[0]
    eye_r = torch.eye(r, dtype=U0.dtype)
    eye_c = torch.eye(c, dtype=V0.dtype)
    zero_total = sum(1 for z in nonzero if not z)
    nodes = work = 0
    signs = [(lam, mu) for lam, mu in ((1.0, 1.0), (-1.0, -1.0), (1.0, -1.0), (-1.0, 1.0))
             if (binding[0] or lam > 0) and (binding[1] or mu > 0 or forced is not None)]
    if forced is not None and not binding[0]:  # the sign product is forced: let mu carry it
        signs = [(1.0, 1.0), (1.0, -1.0)]

    def candidates(j: int, used: set[int], zeros_used: int, bu: Tensor, bv: Tensor):
        nonlocal work
        if forced is not None:
            i_forced = forced[j][0]
            avail = [] if i_forced is None else [i_forced]
        else:
            avail = [i for i in range(p) if nonzero[i] and i not in used]
        work += EXPANSION_FLOOR + 2 * len(avail) * (r * (1 + bu.shape[1]) + c * (1 + bv.shape[1]))
        out = []
        if avail:
            idx = torch.tensor(avail)
            cu = torch.cat([U0[:, idx] - eye_r[:, j:j + 1], -U0[:, idx] - eye_r[:, j:j + 1]], 1)
            cv = torch.cat([V0[:, idx] - eye_c[:, j:j + 1], -V0[:, idx] - eye_c[:, j:j + 1]], 1)
            ru, rv = residual_norms(bu, cu), residual_norms(bv, cv)
            k = len(avail)
            for a, i in enumerate(avail):
                for lam, mu in signs:
                    if forced is not None and lam * mu != forced[j][1]:
                        continue
                    cost_u = binding[0] and bool(ru[a if lam > 0 else a + k] > tol)
                    cost_v = binding[1] and bool(rv[a if mu > 0 else a + k] > tol)
                    if (cost_u and bu.shape[1] >= m1) or (cost_v and bv.shape[1] >= m2):
                        continue
                    out.append((cost_u + cost_v, i != j, lam * mu < 0, i, lam, mu))
        if (forced[j][0] is None) if forced is not None else zeros_used < zero_total:
            out.append((0, nonzero[j] if j < p else True, False, None, 1.0, 1.0))
        out.sort(key=lambda t: t[:3])
        return out

    stack = [(0, [], set(), 0, torch.zeros(r, 0, dtype=U0.dtype), torch.zeros(c, 0, dtype=V0.dtype))]
    while stack:
        j, slots, used, zeros_used, bu, bv = stack.pop()
        if j == p:
            return Pairing(slots), nodes, False
        children = []
        for *_, i, lam, mu in candidates(j, used, zeros_used, bu, bv):
            nodes += 1
            if work > limit:
                return None, nodes, False
            if i is None:
                children.append((j + 1, slots + [(None, 1.0, 1.0)], used, zeros_used + 1, bu, bv))
                continue
            nbu = extend(bu, lam * U0[:, i] - eye_r[:, j], tol)
            nbv = extend(bv, mu * V0[:, i] - eye_c[:, j], tol)
            children.append((j + 1, slots + [(i, lam, mu)], used | {i}, zeros_used, nbu, nbv))
        stack.extend(reversed(children))
    return None, nodes, True


def recover_diagonal(W: Tensor, k: int, tol: float) -> Tensor | None:
    """The diagonal D (length p) with rank(W - D) <= k, from W's off-diagonal entries (consequence 3).

    Rows ``A`` = first half of [p] (+ rows >= p), columns ``B`` = second half (+ columns >= p):
    ``W[A, B]`` avoids the diagonal and spans the column space of ``L[A, :]`` and the row space of
    ``L[:, B]`` for ``L = W - D`` (generic case; the caller verifies the rank). ``L[j, j]`` is then
    the entry of that column (row) that the other, off-diagonal entries determine.
    """
    r, c = W.shape
    p = min(r, c)
    half = p // 2
    rows = list(range(half)) + list(range(p, r))
    cols = list(range(half, p)) + list(range(p, c))
    left, sing, right_t = torch.linalg.svd(W[rows][:, cols], full_matrices=False)
    rank = int((sing > tol).sum())
    if rank > k or min(len(rows), len(cols)) <= rank:
        return None
    col_space, row_space = left[:, :rank], right_t[:rank].mT  # bases over `rows` and `cols`
    diag = torch.zeros(p, dtype=W.dtype)
    for j in range(p):
        if j < half:  # column j of L restricted to `rows`: known except at row j
            basis, known, pos = col_space, W[rows, j], rows.index(j)
        else:  # row j of L restricted to `cols`: known except at column j
            basis, known, pos = row_space, W[j, cols], cols.index(j)
        keep = [a for a in range(basis.shape[0]) if a != pos]
        coef = torch.linalg.lstsq(basis[keep], known[keep].unsqueeze(1)).solution
        diag[j] = W[j, j] - (basis[pos] @ coef).item()
    return diag


def pairing_from_diagonal(diag: Tensor, s: Tensor, nonzero: list[bool], tol: float
                          ) -> list[tuple[int | None, float]] | None:
    """Slot j -> (singular index i with s_i = |D_jj|, sign of D_jj); None when they do not match.

    For a member, ``|diag(D)|`` and the singular values are the same multiset, so they are
    matched in sorted order (robust to gaps smaller than ``tol``) and each pair checked.
    """
    slots_nonzero = [j for j, d in enumerate(diag.tolist()) if abs(d) > tol]
    singular = [i for i in range(len(s)) if nonzero[i]]  # already in descending order
    if len(slots_nonzero) != len(singular):
        return None
    slots_nonzero.sort(key=lambda j: -abs(float(diag[j])))
    forced: list[tuple[int | None, float]] = [(None, 1.0)] * len(diag)
    for j, i in zip(slots_nonzero, singular, strict=True):
        if abs(abs(float(diag[j])) - float(s[i])) > tol:
            return None
        forced[j] = (i, 1.0 if diag[j] > 0 else -1.0)
    return forced


def signs_by_diagonal(Q: Tensor, m: int, tol: float) -> Tensor | None:
    """Signs Lambda with rank(Q - Lambda) <= m for slot-ordered singular vectors Q (dim x p):
    ``rank(Q Lambda - E) = rank(Q - E Lambda)``, so Lambda is the diagonal of a low-rank
    completion (as in consequence 3). None when it does not come out as +-1."""
    if 2 * m + 2 > Q.shape[1]:
        return None
    diag = recover_diagonal(Q, m, tol)
    if diag is None or bool(((diag.abs() - 1).abs() > 1e3 * tol).any()):
        return None
    return torch.where(diag > 0, 1.0, -1.0).to(Q.dtype)


def forced_signs(U0: Tensor, V0: Tensor, forced: list[tuple[int | None, float]], m1: int,
                  m2: int, tol: float) -> Pairing | None:
    """Signs of U's and V's columns for a known pairing, by diagonal recovery on either side."""
    if any(i is None for i, _ in forced):
        return None
    order = [i for i, _ in forced]
    product = torch.tensor([sign for _, sign in forced], dtype=U0.dtype)
    lam = signs_by_diagonal(U0[:, order], m1, tol)
    mu = signs_by_diagonal(V0[:, order], m2, tol)
    if lam is None and mu is None:
        return None
    lam = mu * product if lam is None else lam
    mu = lam * product if mu is None else mu
    if not torch.equal(lam * mu, product):
        return None
    return Pairing([(i, float(a), float(b)) for i, a, b in zip(order, lam, mu, strict=True)])



def side_mode(count: int, dim: int, nonzero: list[bool]) -> str:
    """How a factor's budget constrains the pairing: ``free`` (count >= prescribed columns, any
    pairing works), ``det`` (square factor, count = dim - 1: any pairing, after one sign flip
    making ``det = (-1)^(dim - 1)``, which forces a fixed vector) or ``binding``."""
    if count >= sum(nonzero):
        return "free"
    if count == dim - 1 == len(nonzero) - 1 and all(nonzero):
        return "det"
    return "binding"


def fix_determinants(pairing: Pairing, U0: Tensor, V0: Tensor, modes: tuple[str, str]) -> Pairing:
    """Flip the last slot's sign on each ``det`` side whose determinant has the wrong sign."""
    slots = list(pairing.slots)
    order = [i for i, _, _ in slots]
    i_last, lam, mu = slots[-1]
    for side, (mode, basis) in enumerate(zip(modes, (U0, V0), strict=True)):
        if mode != "det":
            continue
        signs = torch.tensor([slot[1 + side] for slot in slots], dtype=basis.dtype)
        det = torch.linalg.det(basis[:, order] * signs)
        if det * (-1.0) ** (basis.shape[0] - 1) < 0:
            lam, mu = (-lam, mu) if side == 0 else (lam, -mu)
    slots[-1] = (i_last, lam, mu)
    return Pairing(slots)



def sign_search(Orth: Tensor, budget: int, tol: float, limit: int) -> tuple[Tensor | None, int, bool]:
    """Signs Lambda with rank(O Lambda - I) <= budget (consequence 4); DFS with rank pruning."""
    n = Orth.shape[0]
    eye = torch.eye(n, dtype=Orth.dtype)
    nodes = work = 0
    stack = [(0, [], torch.zeros(n, 0, dtype=Orth.dtype))]
    while stack:
        j, lams, basis = stack.pop()
        if j == n:
            return torch.tensor(lams, dtype=Orth.dtype), nodes, False
        children = []
        for lam in (1.0, -1.0):
            nodes += 1
            work += EXPANSION_FLOOR + 2 * n * (1 + basis.shape[1])
            if work > limit:
                return None, nodes, False
            new = extend(basis, lam * Orth[:, j] - eye[:, j], tol)
            if new.shape[1] <= budget:
                children.append((j + 1, lams + [lam], new))
        stack.extend(reversed(children))
    return None, nodes, True
