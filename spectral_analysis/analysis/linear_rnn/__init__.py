"""The earlier version's Section 6 (svdRNN, "all critical points are global minima"), measured: the
linear-RNN population risk and its exact gradient (:mod:`.risk`, Claim 1), its critical points
(:mod:`.critical_points`), the identity-teacher counterexample to the earlier version's Theorem 5
(:mod:`.counterexample`; not the ICML paper's Theorem 5, which is in
:mod:`spectral_analysis.analysis.bounds`) and gradient descent in the SVD parameterization
(:mod:`.svd_descent`, Corollary 1). The verdicts on these claims are in
:mod:`spectral_analysis.paper.landscape`.
"""

from spectral_analysis.analysis.linear_rnn.risk import (
    LinearRNNProblem,
    haar_orthogonal,
    monte_carlo_risk,
    optimal_risk,
    population_risk,
    printed_gradient,
    random_problem,
    random_transitions,
    realizable_problem,
    risk_gradient,
    risk_hessian,
    stacked_powers,
    theorem5_constant,
)

__all__ = [
    "LinearRNNProblem", "random_problem", "haar_orthogonal", "random_transitions", "realizable_problem",
    "stacked_powers", "population_risk", "optimal_risk", "theorem5_constant", "monte_carlo_risk",
    "risk_gradient", "printed_gradient", "risk_hessian",
]
