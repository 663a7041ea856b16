"""``spectral-analysis landscape``: Claim 1, Theorem 5 and Corollary 1 of the earlier version, measured.

One realizable problem (:func:`realizable_problem`: random Y, Sigma; teacher singular values in
``[e, high]``, so R* = C) is studied four ways; each ends in a common check record
(:mod:`spectral_analysis.checks`) and the numbers behind it:

1. Claim 1 (risk): the closed form against Monte-Carlo estimates.
2. Claim 1 (gradient): the printed formula against the exact gradient (itself checked by autograd).
3. Theorem 5: the proof's inequality on random W with ``sigma_min(W) >= e``, the critical points
   found from starts inside and outside that set (:func:`search_critical_points`) and the
   identity-teacher counterexample (:mod:`spectral_analysis.analysis.linear_rnn.counterexample`).
4. Corollary 1: gradient descent in the plain and the SVD parameterization from the same starts.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
from tqdm import tqdm

from spectral_analysis.analysis.linear_rnn import (
    LinearRNNProblem,
    monte_carlo_risk,
    optimal_risk,
    population_risk,
    printed_gradient,
    random_problem,
    random_transitions,
    realizable_problem,
    risk_gradient,
    theorem5_constant,
)
from spectral_analysis.analysis.linear_rnn.counterexample import (
    Counterexample,
    identity_teacher_counterexample,
    inequality_path,
    inequality_ratios,
)
from spectral_analysis.analysis.linear_rnn.critical_points import (
    KINDS,
    CriticalPoint,
    catalogue,
    search_critical_points,
)
from spectral_analysis.checks import CLAIM1_GRADIENT_QUOTE, CLAIM1_RISK_QUOTE, CheckRecord, checks_markdown
from spectral_analysis.paper.linear_rnn_descent import corollary1_check
from spectral_analysis.vocabulary import LANDSCAPE_DEFAULTS

SOURCE = "earlier version (000), Section 6"


@dataclass
class LandscapeConfig:
    """Sizes and budgets of a landscape run; ``e`` is Theorem 5's lower bound on sigma_min(W)."""

    hidden: int = LANDSCAPE_DEFAULTS["hidden"]
    length: int = LANDSCAPE_DEFAULTS["length"]
    outputs: int | None = LANDSCAPE_DEFAULTS["outputs"]
    starts: int = LANDSCAPE_DEFAULTS["starts"]
    seed: int = LANDSCAPE_DEFAULTS["seed"]
    e: float = LANDSCAPE_DEFAULTS["e"]
    high: float = LANDSCAPE_DEFAULTS["high"]
    noise: float = LANDSCAPE_DEFAULTS["noise"]
    samples: int = LANDSCAPE_DEFAULTS["samples"]
    iterations: int = LANDSCAPE_DEFAULTS["iterations"]
    monte_carlo: int = LANDSCAPE_DEFAULTS["monte_carlo"]

    # budgets: the critical-point search and the Monte Carlo risk grow fast past these
    LIMITS = {"hidden": 16, "length": 16, "starts": 1000, "samples": 10**6, "iterations": 10**6,
              "monte_carlo": 10**7}

    def __post_init__(self) -> None:
        for name, limit in self.LIMITS.items():
            if not 1 <= getattr(self, name) <= limit:
                raise ValueError(f"{name} must lie in [1, {limit}] (a budget: the search grows fast past "
                                 f"it), got {getattr(self, name)}")
        if self.outputs is not None and self.outputs < 1:
            raise ValueError(f"outputs must be >= 1, got {self.outputs}")
        if not (math.isfinite(self.high) and 0 < self.e < self.high):
            raise ValueError(f"need 0 < e < high for the singular-value range [e, high]; got e = {self.e}, "
                             f"high = {self.high}")
        if self.noise < 0:
            raise ValueError(f"noise C must be >= 0, got {self.noise}")


def claim1_risk(problem: LinearRNNProblem, config: LandscapeConfig, gen: torch.Generator) -> CheckRecord:
    n = problem.hidden
    Ws = torch.cat([random_transitions(n, 2, config.e, config.high, gen),
                    random_transitions(n, 2, 0.0, 1.0, gen)])
    z_scores, rows = [], []
    for W in Ws:
        closed = float(population_risk(W, problem))
        mean, stderr = monte_carlo_risk(W, problem, config.monte_carlo, gen)
        z_scores.append((closed - mean) / stderr)
        rows.append({"closed_form": closed, "monte_carlo": mean, "stderr": stderr})
    worst = max(abs(z) for z in z_scores)
    return CheckRecord(
        SOURCE + ", Claim 1 (risk)", "R[W] = ||(Y script-W - A) Sigma^(1/2)||_F^2 + C",
        "holds" if worst < 5 else "fails",
        f"closed form vs Monte Carlo ({config.monte_carlo} Gaussian samples) at {len(Ws)} W: "
        f"largest |difference| / stderr = {worst:.2f}",
        {"max_abs_z": worst, "points": rows}, quote=CLAIM1_RISK_QUOTE)


def claim1_gradient(problem: LinearRNNProblem, gen: torch.Generator) -> CheckRecord:
    n, t = problem.hidden, problem.t
    square = problem if problem.Y.shape[0] == n else random_problem(n, t, n, problem.C, gen)
    W = random_transitions(n, 1, 0.5, 1.5, gen)[0].requires_grad_()
    (auto,) = torch.autograd.grad(population_risk(W, square), W)
    W = W.detach()
    exact = risk_gradient(W, square)
    autograd_error = float((exact - auto).norm() / auto.norm())
    cases = {"diagonal W": torch.diag(torch.linspace(0.5, 1.2, n, dtype=torch.float64)), "random W": W}
    differences = {}
    for name, V in cases.items():
        g, p = risk_gradient(V, square), printed_gradient(V, square)
        differences[name] = {"printed": float((p - g).norm() / g.norm()),
                             "printed_with_2Y^T": float((2 * square.Y.T @ p - g).norm() / g.norm())}
    worst = max(d["printed"] for d in differences.values())
    verdict = "holds" if worst < 1e-8 else "differs"
    where = "" if square is problem else f" (on a square companion problem n_y = n = {n}: the printed " \
                                         "formula has shape (n_y, n))"
    text = "; ".join(f"{k}: {v['printed']:.0%} (with 2 Y^T restored {v['printed_with_2Y^T']:.0%})"
                     for k, v in differences.items())
    return CheckRecord(
        SOURCE + ", Claim 1 (gradient)", "grad_W R = (Y script-W - A) Sigma (I | 2W | ... | t W^(t-1))^T",
        verdict,
        f"relative Frobenius difference from the exact gradient{where}: {text}. The exact gradient "
        f"2 sum_i sum_(j<i) (W^j)^T Y^T G_i (W^(i-1-j))^T matches autograd to {autograd_error:.1e}; the "
        "printed one drops 2 Y^T and the order of the products",
        {"autograd_relative_error": autograd_error, "relative_difference": differences},
        quote=CLAIM1_GRADIENT_QUOTE)


def _point_dict(point: CriticalPoint) -> dict[str, Any]:
    data = {k: v for k, v in asdict(point).items() if k != "W"}
    return {**data, "W": point.W.tolist()}


def _counterexample_dict(found: Counterexample | None, e: float) -> dict[str, Any] | None:
    if found is None:
        return None
    return {"a": found.a, "z": [found.z.real, found.z.imag], "n": found.problem.hidden,
            "t": found.problem.t, "point": _point_dict(found.point),
            "inequality_ratio": float(inequality_ratios(found.point.W, found.problem, e)),
            "perturbed_point": None if found.perturbed_point is None
            else _point_dict(found.perturbed_point),
            "tolerance": found.tolerance, "path": inequality_path(found.point.W, found.problem, e)}


def theorem5_inequality(problem: LinearRNNProblem, config: LandscapeConfig, gen: torch.Generator,
                        counterexample: dict[str, Any] | None) -> tuple[CheckRecord, dict[str, Any]]:
    n, e = problem.hidden, config.e
    inside = random_transitions(n, config.samples, e, config.high, gen)
    outside = random_transitions(n, config.samples, 0.0, e, gen)
    r_star = optimal_risk(problem)
    samples = {}
    for name, W in (("inside", inside), ("outside", outside)):
        samples[name] = {"gap": (population_risk(W, problem) - r_star).tolist(),
                         "grad_sq": risk_gradient(W, problem).square().sum(dim=(-2, -1)).tolist()}
    ratios = inequality_ratios(inside, problem, e)
    constant = theorem5_constant(problem, e)
    violations = int((ratios < 1).sum())
    numbers = {"constant": constant, "samples": config.samples, "min_ratio": float(ratios.min()),
               "median_ratio": float(ratios.median()), "violations": violations,
               "counterexample_ratio": None if counterexample is None
               else counterexample["inequality_ratio"]}
    evidence = (f"on {config.samples} random W with singular values in [{e}, {config.high}]: "
                f"||grad R||^2 / (constant (R - R*)) has minimum {numbers['min_ratio']:.3g} and median "
                f"{numbers['median_ratio']:.3g} ({violations} below 1; constant = {constant:.3g})")
    fails = violations > 0
    if counterexample is not None:
        fails = fails or counterexample["inequality_ratio"] < 1
        point = counterexample["point"]
        evidence += (f"; at the counterexample critical point (sigma_min = {point['sigma_min']:.3f}, "
                     f"R - R* = {point['gap']:.3g}) the ratio is {counterexample['inequality_ratio']:.1e}. "
                     "The proof's third line drops the cross terms of ||sum_i i E_i (W^T)^(i-1)||^2, which "
                     "cancel there")
    record = CheckRecord(
        SOURCE + ", Theorem 5 (proof's inequality)",
        "sigma_min(W) >= e implies ||grad R||_F^2 >= sigma_min(Sigma)^2 min_i {i^2 e^(2(i-1))} (R - R*)",
        "fails" if fails else "holds", evidence, numbers,
        quote=r"&\geq \sigma_{\min}^{2}(\Sigma)\min_{1\leq i\leq t}\{i^{2}e^{2(i-1)}\}(R(W) - R^{*})")
    return record, samples


def theorem5_statement(problem: LinearRNNProblem, config: LandscapeConfig, points: list[dict[str, Any]],
                       missed: dict[str, int], counterexample: dict[str, Any] | None) -> CheckRecord:
    e, tol = config.e, 1e-6 * max(1.0, optimal_risk(problem))
    spurious_in = [p for p in points if p["gap"] > tol and p["sigma_min"] >= e]
    spurious_out = [p for p in points if p["gap"] > tol and p["sigma_min"] < e]
    kinds = {k: sum(p["kind"] == k for p in spurious_out) for k in KINDS}
    searched = missed["inside"] + missed["outside"]
    evidence = (f"on the n = {problem.hidden}, t = {problem.t} problem, minimizing ||grad R||^2 from "
                f"{config.starts} starts with singular values in [{e}, {config.high}] and {config.starts} in "
                f"[0, {e}] ({searched} ended at a non-zero minimum of ||grad R||^2) and descending from the "
                f"first {config.starts} ({missed['plain descent']} endpoints not critical) found "
                f"{len(points)} distinct critical points, {len(spurious_in)} spurious with sigma_min >= e, "
                f"{len(spurious_out)} spurious "
                f"with sigma_min < e ({', '.join(f'{v} {k}' for k, v in kinds.items() if v) or 'none'})")
    if counterexample is not None:
        point, moved = counterexample["point"], counterexample["perturbed_point"]
        evidence += (f". Counterexample (n = {counterexample['n']}, t = {counterexample['t']}, Y = I, "
                     f"Sigma = I, teacher W* = {counterexample['a']:.4g} I): a critical point "
                     f"({point['kind']}) with sigma_min(W) = {point['sigma_min']:.4f} >= e = {e}, "
                     f"||grad R|| = {point['grad_norm']:.1e}, "
                     f"R - R* = {point['gap']:.4g}, Hessian eigenvalues in [{point['hessian_min']:.3g}, "
                     f"{point['hessian_max']:.3g}]")
        if moved is not None:
            evidence += (f"; after perturbing Y and Sigma by 5% it persists as a {moved['kind']} with "
                         f"sigma_min = {moved['sigma_min']:.4f}, R - R* = {moved['gap']:.4g}")
    if counterexample is not None or spurious_in:
        verdict = "fails"
    elif problem.t == 1:
        verdict = "holds"  # R is a convex quadratic in W: every critical point is a global minimum
        evidence += "; at t = 1 R is a convex quadratic in W, so the claim holds for every e"
    else:
        verdict = "unverified"
    return CheckRecord(SOURCE + ", Theorem 5", "if sigma_min(W) >= e > 0, every critical point of R is a "
                       "global minimum", verdict, evidence,
                       {"critical_points": len(points), "spurious_inside": len(spurious_in),
                        "spurious_outside": len(spurious_out), "spurious_outside_kinds": kinds,
                        "missed_starts": missed},
                       quote=r"With linear recurrent neural networks, if transition matrix W satisfies "
                             r"$\sigma_{\min}(W) \ge e > 0$ , all critical points in the population risk are "
                             "global minimum.")


def landscape_report(config: LandscapeConfig, progress: bool = False) -> dict[str, Any]:
    """Run the four checks on one realizable problem; a JSON-ready dict (``checks`` first); ``progress``:
    a bar on stderr over the run's stages.

    Runs with one torch thread: the matrices are tiny, and torch's threads contend with scipy's BLAS
    (measured 25x slower with 2 threads on 2 cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tqdm(total=STAGES, desc="landscape", disable=not progress, leave=False) as bar:
            return _landscape_report(config, bar)
    finally:
        torch.set_num_threads(threads)


STAGES = 5  # descent (Corollary 1), critical points (two searches and the descents), counterexample,
# Theorem 5's inequality, Claim 1


def _landscape_report(config: LandscapeConfig, bar: tqdm) -> dict[str, Any]:
    clock = time.perf_counter()
    gen = torch.Generator().manual_seed(config.seed)
    n, t = config.hidden, config.length
    problem = realizable_problem(n, t, config.outputs, config.e, config.high, config.noise, gen)
    r_star = optimal_risk(problem)
    inside = random_transitions(n, config.starts, config.e, config.high, gen)
    outside = random_transitions(n, config.starts, 0.0, config.e, gen)
    cor1, descent, descended = corollary1_check(problem, inside, config.e, config.high, config.iterations,
                                                SOURCE + ", Corollary 1")
    bar.update()
    found: list[CriticalPoint] = []
    missed: dict[str, int] = {}
    for name, starts in (("inside", inside), ("outside", outside)):
        found, missed[name] = search_critical_points(problem, starts, r_star, found, name)
    found, missed["plain descent"] = catalogue(problem, descended, r_star, found, "plain descent")
    points = [_point_dict(p) for p in found]
    bar.update()
    found = identity_teacher_counterexample(n, t, config.e, generator=gen)
    counterexample = _counterexample_dict(found, config.e)
    bar.update()
    inequality, samples = theorem5_inequality(problem, config, gen, counterexample)
    bar.update()
    checks = [claim1_risk(problem, config, gen), claim1_gradient(problem, gen), inequality,
              theorem5_statement(problem, config, points, missed, counterexample), cor1]
    bar.update()
    return {"checks": [c.as_dict() for c in checks], "config": asdict(config),
            "problem": {"n": n, "t": t, "n_y": problem.Y.shape[0], "R_star": r_star,
                        "sigma_min_Sigma": float(torch.linalg.eigvalsh(problem.Sigma).min()),
                        "theorem5_constant": theorem5_constant(problem, config.e),
                        "teacher_singular_values": torch.linalg.svdvals(problem.W_star).tolist()},
            "critical_points": points, "counterexample": counterexample, "samples": samples,
            "descent": descent, "seconds": time.perf_counter() - clock}


def landscape_markdown(report: dict[str, Any]) -> str:
    """The verdict table, then the critical points found."""
    p = report["problem"]
    lines = [f"# Linear-RNN landscape (n = {p['n']}, t = {p['t']}, n_y = {p['n_y']}, "
             f"e = {report['config']['e']})", "",
             checks_markdown([CheckRecord(**c) for c in report["checks"]]), "",
             "## Critical points found", "",
             "| found from | kind | R - R* | sigma_min(W) | \\|\\|grad R\\|\\| | Hessian eigenvalues "
             "| starts |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {', '.join(q['sources'])} | {q['kind']} | {q['gap']:.4g} | {q['sigma_min']:.4f} | "
              f"{q['grad_norm']:.1e} | [{q['hessian_min']:.3g}, {q['hessian_max']:.3g}] | {q['starts']} |"
              for q in report["critical_points"]]
    lines.append(f"\nRun time {report['seconds']:.1f} s.")
    return "\n".join(lines)
