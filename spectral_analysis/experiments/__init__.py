"""Experiments layer: the papers' experiments as data (the catalog in ``experiments/``), the runner that
executes a grid on Ray Tune, and the kept results in ``results/`` that figures and checks read."""

from spectral_analysis.experiments.catalog import (
    SCALES,
    default_catalog_dir,
    find_experiment,
    load_catalog,
    load_experiment,
)
from spectral_analysis.experiments.grid import Experiment, Trial
from spectral_analysis.experiments.ray_grid import ray_session
from spectral_analysis.experiments.reading import KeptGrid, read_grid, read_grids
from spectral_analysis.experiments.results import read_curves, read_rows, read_singular_values, write_summary
from spectral_analysis.experiments.runner import SweepOutcome, park_sweeps, run_sweep, run_sweeps
from spectral_analysis.experiments.trial import request_stop, run_trial
from spectral_analysis.experiments.validation import Selection, held_back, selection

__all__ = [
    "SCALES",
    "Experiment",
    "KeptGrid",
    "Selection",
    "SweepOutcome",
    "Trial",
    "default_catalog_dir",
    "find_experiment",
    "load_catalog",
    "load_experiment",
    "ray_session",
    "read_grid",
    "read_grids",
    "read_curves",
    "read_rows",
    "read_singular_values",
    "selection",
    "held_back",
    "park_sweeps",
    "request_stop",
    "run_sweep",
    "run_sweeps",
    "run_trial",
    "write_summary",
]
