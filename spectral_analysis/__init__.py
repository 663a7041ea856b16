"""spectral-analysis: theory and training dynamics of spectrally controlled neural networks.

``spectral_analysis.load(path_or_module)`` is the one entry point for analysis: a toolkit
checkpoint, a ``zoo:`` name, a PyTorch ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` state_dict file or module.
"""

__version__ = "0.1.0"


def load(source, arch=None, head_prefix=None, device="cpu"):  # noqa: ANN001, ANN201
    """:func:`spectral_analysis.io.subjects.load`, imported on call so that the package import stays light.

    ```python
    >>> import torch, spectral_analysis
    >>> subject = spectral_analysis.load(torch.nn.GRU(3, 8))
    >>> subject.architecture, subject.model.hidden_size
    ('gru', 8)

    ```
    """
    from spectral_analysis.io.subjects import load as load_subject

    return load_subject(source, arch=arch, head_prefix=head_prefix, device=device)
