"""spectral-analysis: theory and training dynamics of spectrally controlled neural networks.

``spectral_analysis.load(path_or_module)`` is the one entry point for analysis: a toolkit
checkpoint, a ``zoo:`` name, a PyTorch ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` state_dict file or module.
The names a script reaches for first are here too, each imported on first use so that ``import
spectral_analysis`` stays light (PEP 562):

```python
>>> import spectral_analysis as sa
>>> model = sa.build_model("spectral", 1, 16, 1, m1=4, m2=4, r=0.01)   # a Spectral-RNN
>>> table = sa.spectra(model)                                        # a DataFrame, one row per matrix
>>> bool(table["sigma_max"].iloc[0] <= 1.01 + 1e-6)                  # W's singular values in [0.99, 1.01]
True

```
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

__version__ = "0.1.0"

# name -> (module, attribute in it; None: the module itself)
_LAZY = {
    "svd_parametrize": ("spectral_analysis.nn", "svd_parametrize"),
    "build_model": ("spectral_analysis.nn", "build_model"),
    "spectra": ("spectral_analysis.analysis.spectra", "spectral_table"),
    "jacobians": ("spectral_analysis.analysis.jacobians", "jacobian_table"),
    "lyapunov": ("spectral_analysis.analysis.jacobians", "lyapunov_table"),
    "bound": ("spectral_analysis.analysis.bound_report", "bound_report"),
    "certify": ("spectral_analysis.analysis.certify", "certify"),
    "tables": ("spectral_analysis.tables", None),
}
__all__ = ["__version__", "load", *_LAZY]
# the library logs under "spectral_analysis" and leaves the handlers to the application
logging.getLogger(__name__).addHandler(logging.NullHandler())


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


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'spectral_analysis' has no attribute {name!r}; the top level has "
                             f"{sorted(__all__)}")
    module, attribute = _LAZY[name]
    value = importlib.import_module(module)
    value = value if attribute is None else getattr(value, attribute)
    globals()[name] = value  # the next access skips this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
