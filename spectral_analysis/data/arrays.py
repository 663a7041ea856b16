"""A user's own sequences for the analyzers: ``--inputs X --labels y`` from ``.npy``, ``.npz`` or ``.csv``.

Inputs are ``(N, T, n_i)`` floats (a ``.csv`` holds one sequence per row, ``T * n_i`` values, and
needs ``n_i``); labels are ``(N,)`` integer classes. Files load without running code
(``allow_pickle=False``). Every problem (wrong shape, NaN, a label outside the head's classes) is
a one-line ``ValueError`` naming the file.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from spectral_analysis.data.base import Split, TaskData

MAX_ARRAY_BYTES = 2 * 1024 ** 3  # an array file (or an .npz member, uncompressed) larger than this is refused


def read_npy(file: Path) -> np.ndarray:
    """An ``.npy`` array, no pickles, its size checked against :data:`MAX_ARRAY_BYTES` and the file's own
    length before anything is allocated (a header may claim any shape)."""
    mapped = np.load(file, mmap_mode="r", allow_pickle=False)  # reads the header; a short file is refused
    if mapped.nbytes > MAX_ARRAY_BYTES:
        raise ValueError(f"{file} holds a {mapped.dtype} array of shape {mapped.shape} ({mapped.nbytes} "
                         f"bytes), more than the {MAX_ARRAY_BYTES} read")
    return np.array(mapped)


def _read_array(path: str | Path, key: str) -> np.ndarray:
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{key} file {file} is not a regular file (a FIFO, a device or a folder)"
                         if file.exists() else f"{key} file not found: {file}")
    try:
        if file.suffix == ".npy":
            return read_npy(file)
        if file.suffix == ".npz":
            with np.load(file, allow_pickle=False) as archive:
                names = list(archive.files)
                if len(names) != 1 and key not in names:
                    raise ValueError(f"{file} holds arrays {names}; name one {key!r} or keep only one")
                name = key if key in names else names[0]
                size = archive.zip.getinfo(f"{name}.npy").file_size
                if size > MAX_ARRAY_BYTES:
                    raise ValueError(f"its array {name!r} inflates to {size} bytes, more than the "
                                     f"{MAX_ARRAY_BYTES} read")
                return archive[name]
        if file.suffix == ".csv":
            return np.loadtxt(file, delimiter=",", ndmin=2)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise ValueError(f"cannot read {key} from {file}: {str(error).splitlines()[0]}") from None
    raise ValueError(f"{key} file {file} must be .npy, .npz or .csv")


@dataclass
class UserData:
    """Sequences ``(N, T, n_i)`` and optional labels ``(N,)`` given by the user."""

    inputs: Tensor
    labels: Tensor | None
    source: str

    @property
    def length(self) -> int:
        return int(self.inputs.shape[1])

    def data_bound(self) -> float:
        """``B = max_t ||x_t||`` over the given sequences."""
        return float(self.inputs.norm(dim=-1).max())

    def check_model(self, input_size: int, output_size: int) -> None:
        """``ValueError`` when the sequences or labels do not fit a model's sizes."""
        if self.inputs.shape[-1] != input_size:
            raise ValueError(f"{self.source}: inputs have n_i = {self.inputs.shape[-1]} per step, the model "
                             f"reads {input_size}")
        if self.labels is not None and int(self.labels.max()) >= output_size:
            raise ValueError(f"{self.source}: label {int(self.labels.max())} is outside the head's "
                             f"{output_size} classes [0, {output_size})")

    def as_task(self, output_size: int) -> TaskData:
        """The labelled sequences as a ``classification-last`` task whose every split is them."""
        if self.labels is None:
            raise ValueError(f"{self.source}: margins need labels (--labels; UserData's labels in Python)")
        split = Split(self.inputs, self.labels)
        return TaskData("user data", "classification-last", int(self.inputs.shape[-1]), output_size,
                        self.length, split, split, split, {"source": self.source})


def load_user_data(inputs: str | Path, labels: str | Path | None = None,
                   input_size: int | None = None) -> UserData:
    """Read and validate the user's sequences (and labels); ``input_size`` reshapes ``.csv`` rows."""
    x = np.asarray(_read_array(inputs, "inputs"))
    if np.iscomplexobj(x):
        raise ValueError(f"{inputs}: inputs must be real numbers, got dtype {x.dtype}")
    if x.dtype == object or not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"{inputs}: inputs must be numbers, got dtype {x.dtype}")
    if x.ndim == 2 and Path(inputs).suffix == ".csv" and input_size:
        if x.shape[1] % input_size:
            raise ValueError(f"{inputs}: a row of {x.shape[1]} values is not T steps of n_i = {input_size}")
        x = x.reshape(x.shape[0], -1, input_size)
    if x.ndim != 3 or 0 in x.shape:
        raise ValueError(f"{inputs}: inputs must have shape (N, T, n_i), got {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{inputs}: inputs hold NaN or inf")
    y = None
    if labels is not None:
        y = np.asarray(_read_array(labels, "labels"))
        if y.ndim == 2 and 1 in y.shape:  # a column or a row of labels (a .csv reads as 2-D)
            y = y.reshape(-1)
        if np.iscomplexobj(y):
            raise ValueError(f"{labels}: labels must be integer classes, got dtype {y.dtype}")
        if y.ndim != 1 or y.shape[0] != x.shape[0]:
            raise ValueError(f"{labels}: labels must have shape ({x.shape[0]},) for {x.shape[0]} sequences, "
                             f"got {y.shape}")
        if not np.issubdtype(y.dtype, np.number) or not np.isfinite(y).all() or (y != np.round(y)).any():
            raise ValueError(f"{labels}: labels must be integer classes")
        if y.min() < 0:
            raise ValueError(f"{labels}: labels must be >= 0, got {int(y.min())}")
        y = torch.from_numpy(y.astype(np.int64))
    return UserData(torch.from_numpy(x.astype(np.float32)), y, str(inputs))
