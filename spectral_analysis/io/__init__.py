"""Subjects layer: where analyzers get what they analyze (checkpoint paths and ``zoo:`` names)."""

from spectral_analysis.io.zoo import (
    ZOO_PREFIX,
    default_results_dir,
    resolve_checkpoint,
    trial_results_dir,
    zoo_entries,
)

__all__ = ["ZOO_PREFIX", "default_results_dir", "resolve_checkpoint", "trial_results_dir", "zoo_entries"]
