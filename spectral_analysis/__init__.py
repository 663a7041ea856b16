"""spectral-analysis: theory and training dynamics of spectrally controlled neural networks."""

__version__ = "0.1.0"
