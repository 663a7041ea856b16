"""Faces layer: figures from reports (JSON) written by benchmarks and analyzers."""

from spectral_analysis.plotting.benchmarks import plot_householder_benchmark

__all__ = ["plot_householder_benchmark"]
