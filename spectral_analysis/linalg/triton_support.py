"""Where the toolkit's Triton kernels can run: one answer for the fused reflector product
(:mod:`~spectral_analysis.linalg.fused_householder`) and the fused recurrence
(:mod:`spectral_analysis.nn.fused_recurrence`). Triton is optional (``pip install
'spectral-analysis[kernels]'``); the kernels run on a CUDA device, or on the CPU through Triton's
interpreter when ``TRITON_INTERPRET=1`` was set before they were imported.
"""

from __future__ import annotations

import importlib.util
import os

import torch


def triton_unavailable(device: torch.device) -> str | None:
    """Why a Triton kernel cannot run on ``device``, or ``None`` when it can.

    ```python
    >>> import torch
    >>> triton_unavailable(torch.device("meta")) is None  # no kernel runs on the meta device
    False

    ```
    """
    if importlib.util.find_spec("triton") is None:
        return "the fused kernels need Triton: pip install 'spectral-analysis[kernels]'"
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return (f"the fused kernels run on a CUDA device (or on the CPU under TRITON_INTERPRET=1), "
                f"not on {device.type!r}")
    return None
