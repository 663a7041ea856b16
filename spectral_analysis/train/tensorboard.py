"""TensorBoard event files beside ``metrics.jsonl`` (``spectral-analysis train --tensorboard``): every
numeric metric of a log row as a scalar under ``<phase>/<name>``, and the transition's singular
values as a histogram, so a run can be watched where researchers watch runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class TensorBoardMirror:
    """Writes the rows :class:`~spectral_analysis.train.evaluation.RunLog` writes; the event file is
    opened on the first row (a run that fails to start leaves no directory behind)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._writer = None

    def write(self, row: dict[str, Any]) -> None:
        if self._writer is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as error:  # the optional extra is missing
                raise ValueError("--tensorboard needs the tensorboard package (pip install "
                                 "'spectral-analysis[tensorboard]')") from error
            self._writer = SummaryWriter(str(self.directory))
        step, phase = int(row["step"]), row.get("phase", "train")
        for name, value in row.items():
            if name in ("step", "phase", "time"):
                continue
            if isinstance(value, int | float) and not isinstance(value, bool):
                self._writer.add_scalar(f"{phase}/{name}", value, step)
            elif name == "singular_values" and isinstance(value, list) and value:
                for layer, values in enumerate(value):
                    self._writer.add_histogram(f"{phase}/singular_values_{layer}", _as_array(values), step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def _as_array(values: Any):  # noqa: ANN202 (numpy array)
    import numpy as np

    return np.asarray(values, dtype=np.float64).ravel()
