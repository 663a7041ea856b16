"""Subjects layer: what analyzers analyze (toolkit checkpoints, ``zoo:`` names, PyTorch models)."""

from spectral_analysis.io.importers import SubjectError, import_state_dict
from spectral_analysis.io.subjects import Subject, load, load_weights
from spectral_analysis.io.zoo import (
    ZOO_PREFIX,
    default_results_dir,
    resolve_checkpoint,
    trial_results_dir,
    zoo_entries,
)
from spectral_analysis.vocabulary import ARCHITECTURES

__all__ = ["ARCHITECTURES", "ZOO_PREFIX", "Subject", "SubjectError", "default_results_dir",
           "import_state_dict", "load", "load_weights", "resolve_checkpoint", "trial_results_dir",
           "zoo_entries"]
