"""Analysis layer: the PAC-Bayes bound and margins, Lemma 3, Jacobian products, Lyapunov exponents,
training trajectories; analyzers read checkpoints and logs, never train."""

from spectral_analysis.analysis.bound_report import bound_report, weights_arrays
from spectral_analysis.analysis.bounds import (
    ComplexityTerm,
    PacBayesBound,
    WeightNorms,
    complexity_term,
    pac_bayes_bound,
    weight_norms,
)
from spectral_analysis.analysis.jacobians import (
    JacobianProducts,
    hidden_gradient_norms,
    jacobian_products,
    jacobians_by_autograd,
    lyapunov_exponents,
    state_norms,
    state_trajectory,
    transition_norm_bound,
)
from spectral_analysis.analysis.margins import classification_margins, margin_loss, margin_quantile
from spectral_analysis.analysis.network import Eq17Network, eq17_network
from spectral_analysis.analysis.perturbation import PerturbationCheck, perturbation_check
from spectral_analysis.analysis.report import analyze_subject, report_markdown
from spectral_analysis.analysis.trajectories import Trajectory, read_trajectory, trajectory_table

__all__ = [
    "ComplexityTerm", "Eq17Network", "JacobianProducts", "PacBayesBound", "PerturbationCheck", "Trajectory",
    "WeightNorms", "analyze_subject", "bound_report", "classification_margins", "complexity_term",
    "eq17_network", "hidden_gradient_norms", "jacobian_products", "jacobians_by_autograd",
    "lyapunov_exponents", "margin_loss", "margin_quantile", "pac_bayes_bound", "perturbation_check",
    "read_trajectory", "trajectory_table", "report_markdown", "state_norms",
    "state_trajectory", "transition_norm_bound", "weight_norms", "weights_arrays",
]
