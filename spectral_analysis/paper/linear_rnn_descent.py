"""Corollary 1 of the earlier version, measured: "with the update rule (8), linear svdRNNs have no
spurious local minimum".

From the same starts, gradient descent on W itself and on the SVD parameterization of
:mod:`spectral_analysis.analysis.linear_rnn.svd_descent` (sigma kept in ``[e, high]`` by Eq. 8). Each run then
continues with L-BFGS from where descent stopped, to see where it ends whatever its speed: R* (within
``tol``) or a spurious point, which for the SVD runs is reported with its singular values (a bound of
Eq. 8's range reached or not) and its determinant sign (invariant along the SVD descent).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from spectral_analysis.analysis.linear_rnn import LinearRNNProblem, optimal_risk, population_risk
from spectral_analysis.analysis.linear_rnn.critical_points import (
    plain_objective,
)
from spectral_analysis.analysis.linear_rnn.svd_descent import (
    descend_and_finish,
    determinant_signs,
    svd_objective,
    svd_parameters,
    svd_sigma_map,
    svd_transition,
)
from spectral_analysis.checks import CheckRecord


def median(values: list[int | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(torch.tensor(kept, dtype=torch.float64).median()) if kept else None


def _speed(run: dict[str, Any], iterations: int) -> str:
    reached = [i for i in run["iterations_to_reach"] if i is not None]
    middle = median(reached)
    return (f"{len(reached)}/{len(run['iterations_to_reach'])} within {iterations} iterations"
            + ("" if middle is None else f" (median {middle:.0f})"))


def _list(values: list[float], digits: str) -> str:
    return ", ".join(format(v, digits) for v in values)


def corollary1_check(problem: LinearRNNProblem, starts: Tensor, e: float, high: float, iterations: int,
                     source: str) -> tuple[CheckRecord, dict[str, Any], Tensor]:
    """Plain and SVD-parameterized descent from the same starts (needs a realizable problem): the check
    record, the runs (JSON-ready) and plain descent's final W (candidates for the critical points)."""
    r_star = optimal_risk(problem)
    tol = 1e-6 * (float(population_risk(torch.zeros_like(starts[0]), problem)) - r_star)
    sigma_map = svd_sigma_map(e, high)
    plain, plain_W = descend_and_finish(problem, plain_objective(problem), [starts], lambda p: p[0], tol,
                                        iterations)
    svd, _ = descend_and_finish(problem, svd_objective(problem, sigma_map), svd_parameters(starts, sigma_map),
                                lambda p: svd_transition(p, sigma_map), tol, iterations)
    teacher_sign = float(torch.sign(torch.linalg.det(problem.W_star)))
    start_signs = determinant_signs(starts).tolist()
    match = [sign == teacher_sign for sign in start_signs]
    K, width = len(match), high - e
    spurious = [k for k, reached in enumerate(svd["reached"]) if not reached and svd["lbfgs_converged"][k]]
    unfinished = [k for k, reached in enumerate(svd["reached"])
                  if not reached and not svd["lbfgs_converged"][k]]
    at_bound = [k for k in spurious if min(svd["singular_values"][k]) <= e + 1e-3 * width
                or max(svd["singular_values"][k]) >= high - 1e-3 * width]
    plain_spurious = [k for k, reached in enumerate(plain["reached"]) if not reached]
    svd_match = sum(svd["reached"][k] for k in range(K) if match[k])
    evidence = (f"{K} starts with singular values in [{e}, {high}]; gradient descent (Armijo steps), then "
                f"L-BFGS from where it stopped; reached = R - R* <= {tol:.2g}. Plain W: "
                f"{_speed(plain, iterations)}, "
                f"{sum(plain['reached'])}/{K} after L-BFGS")
    if plain_spurious:
        evidence += (" (the others end at R - R* = "
                     f"{_list([plain['final_gap'][k] for k in plain_spurious], '.3g')}"
                     f" with sigma_min(W) = "
                     f"{_list([min(plain['singular_values'][k]) for k in plain_spurious], '.3f')})")
    evidence += (f". SVD parameterization (Eq. 8, sigma in [{e}, {high}]): {_speed(svd, iterations)}, "
                 f"{sum(svd['reached'])}/{K} after L-BFGS: {svd_match}/{sum(match)} of the starts with "
                 f"sign det W0 = sign det W*, {sum(svd['reached']) - svd_match}/{K - sum(match)} of the "
                 "others (sign det W = "
                 "det U det V cannot change along this descent)")
    if spurious:
        gaps = [svd["final_gap"][k] for k in spurious]
        evidence += (f"; {len(spurious)} runs end at spurious points, R - R* in "
                     f"[{min(gaps):.3g}, {max(gaps):.3g}], "
                     f"{len(at_bound)} of them with a singular value at a bound of Eq. 8's range")
    if unfinished:
        evidence += f"; {len(unfinished)} runs did not converge within L-BFGS's iteration budget"
    verdict = "fails" if spurious else ("unverified" if unfinished else "holds")
    numbers = {"starts": K, "tolerance": tol, "teacher_det_sign": teacher_sign, "start_det_sign": start_signs,
               "plain_reached": sum(plain["reached"]), "svd_reached": sum(svd["reached"]),
               "svd_reached_same_det_sign": svd_match, "same_det_sign_starts": sum(match),
               "svd_spurious": len(spurious), "svd_spurious_at_bound": len(at_bound),
               "svd_unfinished": len(unfinished),
               "median_descent_iterations": {"plain": median(plain["iterations_to_reach"]),
                                             "svd": median(svd["iterations_to_reach"])},
               "seconds_per_iteration": {"plain": plain["seconds_per_iteration"],
                                         "svd": svd["seconds_per_iteration"]}}
    record = CheckRecord(source, "with the update rule (8), linear svdRNNs have no spurious local minimum "
                         "(so gradient descent reaches R*)", verdict, evidence, numbers,
                         quote="With the update rule in (8), linear svdRNNs have no spurious local minimum.")
    return record, {"plain": plain, "svd": svd, "tolerance": tol}, plain_W
