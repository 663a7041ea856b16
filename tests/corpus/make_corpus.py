"""The bad-input corpus: malformed files and flags for every subcommand, each with its expected outcome.

:func:`cases` writes the files into ``root`` and returns one :class:`Case` per input: the command
line, the exit code and a fragment of the one-line message. ``tests/test_corpus.py`` runs them all.
Nothing here is committed as a binary: every file is generated from a small valid checkpoint.
"""

from __future__ import annotations

import json
import math
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from spectral_analysis.nn import build_model
from spectral_analysis.train.checkpoint import save_checkpoint, tensor_digest

MARKER = "corpus-code-ran"  # a hostile file that executed code would create this file


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    code: int  # the expected exit status (1: a one-line error; 2: argparse's usage error)
    fragment: str  # a piece of the one-line message


class _Payload:
    """Unpickling this runs code: it creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _valid_checkpoint(root: Path) -> Path:
    torch.manual_seed(0)
    model = build_model("rnn", 2, 6, 1, output_bias=True)
    path = root / "valid.safetensors"
    save_checkpoint(path, model, {"task": {"name": "addition", "options": {"length": 5, "train_size": 20,
                                                                         "valid_size": 5, "test_size": 8},
                                           "kind": "regression-last", "length": 5, "data_bound": 1.5,
                                           "train_size": 20},
                                  "step": 1, "elapsed": 0.1, "metrics": {}, "train": {}})
    return path


def _resave(valid: Path, out: Path, meta_change=None, tensor_change=None) -> Path:
    """``valid`` with its metadata and/or tensors changed and a correct digest (only validation can
    catch the change)."""
    with safe_open(str(valid), "pt") as f:
        meta = json.loads(f.metadata()["spectral_analysis"])
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    if meta_change:
        meta_change(meta)
    if tensor_change:
        tensor_change(tensors)
    text = json.dumps(meta)
    save_file(tensors, str(out), metadata={"spectral_analysis": text, "sha256": tensor_digest(tensors, text)})
    return out


def _set(path: list[str], value):
    def change(meta: dict) -> None:
        node = meta
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


def _delete(path: list[str]):
    def change(meta: dict) -> None:
        node = meta
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return change


def _weights(fn):
    def change(tensors: dict) -> None:
        key = "model/transitions.0.weight"
        tensors[key] = fn(tensors[key])
    return change


def cases(root: Path) -> list[Case]:
    root.mkdir(parents=True, exist_ok=True)
    valid = _valid_checkpoint(root)
    out = root / "out"
    result: list[Case] = []

    def each_reader(name: str, path: Path, code: int, fragment: str,
                    inspect_fragment: str | None = None) -> None:
        for command in ("inspect", "bound", "weights", "analyze"):
            expected = inspect_fragment if command == "inspect" and inspect_fragment else fragment
            outs = {"weights": ("--out", str(out / "w.npz")), "analyze": ("--out", str(out / name))}
            extra = outs.get(command, ())
            result.append(Case(f"{command}-{name}", (command, str(path), *extra), code, expected))

    # checkpoint metadata: wrong types, missing keys, values out of range (digest correct)
    metadata = {
        "task-string": (_set(["task"], "addition"), "field task: Input should be a valid dictionary"),
        "task-no-name": (_delete(["task", "name"]), "field task.name: Field required"),
        "data-bound-negative": (_set(["task", "data_bound"], -1.0), "data bound must be a finite number > 0"),
        "data-bound-inf": (_set(["task", "data_bound"], math.inf), "data bound must be a finite number > 0"),
        "data-bound-string": (_set(["task", "data_bound"], "big"), "field task.data_bound"),
        "length-zero": (_set(["task", "length"], 0), "field task.length"),
        "length-huge": (_set(["task", "length"], 10**9), "field task.length"),
        "length-string": (_set(["task", "length"], "100"), "field task.length"),
        "kind-unknown": (_set(["task", "kind"], "telepathy"), "unknown task kind"),
        "metrics-string": (_set(["metrics"], "good"), "field metrics"),
        "model-unknown": (_set(["model", "name"], "transformer"), "unknown model 'transformer'"),
        "hidden-zero": (_set(["model", "hidden_size"], 0), "field model.hidden_size"),
        "hidden-float": (_set(["model", "hidden_size"], 6.5), "field model.hidden_size"),
        "options-list": (_set(["model", "options"], []), "field model.options"),
        "step-negative": (_set(["step"], -3), "field step"),
        "elapsed-nan": (_set(["elapsed"], math.nan), "field elapsed"),
        "model-missing": (_delete(["model"]), "field model: Field required"),
        "version-99": (_set(["format_version"], 99), "format version 99 is not supported"),
        "format-foreign": (_set(["format"], "other-tool"), "metadata does not describe"),
    }
    for name, (change, fragment) in metadata.items():
        each_reader(f"meta-{name}", _resave(valid, root / f"meta-{name}.safetensors", meta_change=change), 1,
                    fragment)
    # weights: non-finite, integer, half
    weights = {
        "inf": (_weights(lambda w: w.fill_(math.inf)), "non-finite entries"),
        "nan": (_weights(lambda w: w.fill_(math.nan)), "non-finite entries"),
        "int32": (_weights(lambda w: w.to(torch.int32)), "is torch.int32"),
        "float16": (_weights(lambda w: w.half()), "is torch.float16"),
        "shape": (_weights(lambda w: torch.zeros(3, 3)), "size mismatch"),
    }
    for name, (change, fragment) in weights.items():
        changed = _resave(valid, root / f"weights-{name}.safetensors", tensor_change=change)
        each_reader(f"weights-{name}", changed, 1, fragment)
    # a tampered file: metadata edited without the digest
    with safe_open(str(valid), "pt") as f:
        header, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    edited = json.loads(header["spectral_analysis"])
    edited["task"]["data_bound"] = 100.0
    save_file(tensors, str(root / "tampered.safetensors"),
              metadata={"spectral_analysis": json.dumps(edited), "sha256": header["sha256"]})
    each_reader("tampered-metadata", root / "tampered.safetensors", 1, "checksum mismatch")
    # files that are no checkpoint at all
    (root / "empty.safetensors").write_bytes(b"")
    (root / "random.safetensors").write_bytes(bytes(range(256)) * 8)
    (root / "truncated.safetensors").write_bytes(valid.read_bytes()[:200])
    (root / "text.json").write_text('{"weights": [1, 2, 3]}')
    (root / "a-directory").mkdir(exist_ok=True)
    with open(root / "payload.pkl", "wb") as f:
        pickle.dump(_Payload(root / MARKER), f)
    torch.save({"weight_hh_l0": _Payload(root / MARKER)}, root / "payload.pt")
    foreign = root / "foreign.safetensors"
    save_file({"x": torch.zeros(2)}, str(foreign))
    unreadable, pickled = "not a readable safetensors file", "not loaded because unpickling can run code"
    files = {  # the analyzers' message, then inspect's (which reads toolkit checkpoints only)
        "empty": ("empty.safetensors", "neither a safetensors nor a torch.save file", unreadable),
        "random-bytes": ("random.safetensors", "neither a safetensors nor a torch.save file", unreadable),
        "truncated": ("truncated.safetensors", "neither a safetensors nor a torch.save file", unreadable),
        "json-text": ("text.json", "neither a safetensors nor a torch.save file", unreadable),
        "directory": ("a-directory", "is not a regular file", "is not a regular file"),
        "missing": ("no-such-file.pt", "not found", "not found"),
        "pickle-payload": ("payload.pkl", "needs more than weights", pickled),
        "torch-save-payload": ("payload.pt", "needs more than weights", pickled),
        "foreign-safetensors": ("foreign.safetensors", "no recurrent weights",
                                "not a spectral-analysis checkpoint"),
    }
    for name, (file, fragment, inspect_fragment) in files.items():
        each_reader(f"file-{name}", root / file, 1, fragment, inspect_fragment)
    result += [Case("inspect-zoo-unknown", ("inspect", "zoo:no-such-experiment/trial"), 2, "not found"),
               Case("bound-zoo-malformed", ("bound", "zoo:a/b/c/d"), 2, "bad zoo name")]
    # numeric flags of bound, analyze, decompose
    v = str(valid)
    flags = {
        "margin-zero": (("--margin", "0"), "margin gamma must be > 0"),
        "margin-negative": (("--margin", "-1"), "margin gamma must be > 0"),
        "margin-nan": (("--margin", "nan"), "margin gamma must be > 0"),
        "margin-inf": (("--margin", "inf"), "margin gamma must be > 0"),
        "delta-zero": (("--delta", "0"), "delta must lie in (0, 1)"),
        "delta-one": (("--delta", "1"), "delta must lie in (0, 1)"),
        "delta-nan": (("--delta", "nan"), "delta must lie in (0, 1)"),
        "data-bound-zero": (("--data-bound", "0"), "data bound B must be > 0"),
        "data-bound-nan": (("--data-bound", "nan"), "data bound B must be > 0"),
        "data-bound-inf": (("--data-bound", "inf"), "data bound B must be > 0"),
        "quantile-zero": (("--data", "train", "--margin-quantile", "0"), "quantile must lie in (0, 1)"),
        "quantile-nan": (("--data", "train", "--margin-quantile", "nan"), "quantile must lie in (0, 1)"),
        "data-regression": (("--data", "train"), "margins need one class label per sequence"),
    }
    for name, (extra, fragment) in flags.items():
        result.append(Case(f"bound-flag-{name}", ("bound", v, *extra), 1, fragment))
    for name, value in (("zero", "0"), ("negative", "-5")):  # ranged by the parser: argparse's exit 2
        result.append(Case(f"bound-flag-length-{name}", ("bound", v, "--length", value), 2,
                           "--length: must be an integer in [1, 1000000]"))
    analyze = {
        "samples-zero": (("--samples", "0"), 2, "--samples: must be an integer in [1, 10000]"),
        "samples-negative": (("--samples", "-2"), 2, "--samples: must be an integer in [1, 10000]"),
        "samples-huge": (("--samples", "10000000"), 2, "--samples: must be an integer in [1, 10000]"),
        "trials-zero": (("--trials", "0"), 2, "--trials: must be an integer in [1, 10000]"),
        "trials-negative": (("--trials", "-4"), 2, "--trials: must be an integer in [1, 10000]"),
        "burn-in-negative": (("--burn-in", "-1"), 2, "--burn-in: must be an integer in [0, 1000000]"),
        "burn-in-huge": (("--burn-in", "99"), 1, "burn_in must lie in"),
    }
    for name, (extra, code, fragment) in analyze.items():
        argv = ("analyze", v, "--out", str(out / name), *extra)
        result.append(Case(f"analyze-flag-{name}", argv, code, fragment))
    # user data for the analyzers
    np.save(root / "x-flat.npy", np.zeros((4, 5)))
    np.save(root / "x-nan.npy", np.full((4, 5, 2), np.nan))
    np.save(root / "x-ok.npy", np.zeros((4, 5, 2)))
    np.save(root / "x-wide.npy", np.zeros((4, 5, 3)))
    np.save(root / "x-complex.npy", np.zeros((4, 5, 2), dtype=complex))
    np.save(root / "x-object.npy", np.array([{"a": 1}] * 4, dtype=object), allow_pickle=True)
    np.save(root / "y-long.npy", np.arange(6))
    np.save(root / "y-float.npy", np.array([0.5, 1, 0, 1]))
    np.save(root / "y-negative.npy", np.array([0, -1, 0, 1]))
    data = {
        "inputs-2d": (("--inputs", "x-flat.npy"), r"inputs must have shape (N, T, n_i)"),
        "inputs-nan": (("--inputs", "x-nan.npy"), "inputs hold NaN or inf"),
        "inputs-wide": (("--inputs", "x-wide.npy"), "n_i = 3 per step, the model reads 2"),
        "inputs-complex": (("--inputs", "x-complex.npy"), "inputs must be real numbers"),
        "inputs-object": (("--inputs", "x-object.npy"), "cannot read inputs"),
        "inputs-missing": (("--inputs", "nope.npy"), "inputs file not found"),
        "inputs-suffix": (("--inputs", "text.json"), "must be .npy, .npz or .csv"),
        "labels-without-inputs": (("--labels", "y-long.npy"), "--labels needs --inputs"),
        "labels-count": (("--inputs", "x-ok.npy", "--labels", "y-long.npy"), "labels must have shape (4,)"),
        "labels-float": (("--inputs", "x-ok.npy", "--labels", "y-float.npy"),
                         "labels must be integer classes"),
        "labels-negative": (("--inputs", "x-ok.npy", "--labels", "y-negative.npy"), "labels must be >= 0"),
    }
    for name, (extra, fragment) in data.items():
        extra = tuple(str(root / a) if a.endswith((".npy", ".json")) else a for a in extra)
        for command in ("bound", "analyze"):
            more = ("--out", str(out / f"data-{name}")) if command == "analyze" else ()
            result.append(Case(f"{command}-data-{name}", (command, v, *more, *extra), 1, fragment))
    # decompose: matrices and flags
    np.save(root / "m-ok.npy", np.eye(4))
    np.save(root / "m-nan.npy", np.full((3, 3), np.nan))
    np.save(root / "m-huge.npy", np.full((3, 3), 1e300))
    np.save(root / "m-3d.npy", np.zeros((2, 2, 2)))
    (root / "m-text.txt").write_text("1 2\n3 x\n")
    matrix = {
        "nan": (("m-nan.npy",), "non-finite"),
        "huge": (("m-huge.npy",), "too large"),
        "3d": (("m-3d.npy",), "expected a 2-D numeric matrix"),
        "text-garbage": (("m-text.txt",), "cannot read a matrix"),
        "tol-nan": (("m-ok.npy", "--tol", "nan"), "--tol must be a finite number > 0"),
        "tol-inf": (("m-ok.npy", "--tol", "inf"), "--tol must be a finite number > 0"),
        "tol-negative": (("m-ok.npy", "--tol", "-1"), "--tol must be a finite number > 0"),
        "limit-nan": (("m-ok.npy", "--search-limit", "nan"), "--search-limit must be a finite number > 0"),
        "limit-negative": (("m-ok.npy", "--search-limit", "-5"),
                           "--search-limit must be a finite number > 0"),
        "m1-too-many": (("m-ok.npy", "--m1", "9"), "m1"),
        "m2-negative": (("m-ok.npy", "--m2", "-1"), "m2"),
        "missing": (("nope.npy",), "matrix file not found"),
        "out-suffix": (("m-ok.npy", "--out", str(out / "v.txt")), "--out must name a .npz file"),
    }
    for name, (args, fragment) in matrix.items():
        args = (str(root / args[0]), *args[1:])
        result.append(Case(f"decompose-{name}", ("decompose", *args), 1, fragment))
    # landscape and svd-demo budgets
    budgets = {
        "landscape-hidden-huge": (("landscape", "--hidden", "1000"), "hidden must lie in [1, 16]"),
        "landscape-hidden-zero": (("landscape", "--hidden", "0"), "hidden must lie in [1, 16]"),
        "landscape-starts-huge": (("landscape", "--starts", "100000"), "starts must lie in [1, 1000]"),
        "landscape-e-nan": (("landscape", "--e", "nan"), "need 0 < e < high"),
        "landscape-high-inf": (("landscape", "--high", "inf"), "need 0 < e < high"),
        "landscape-e-above-high": (("landscape", "--e", "3", "--high", "2"), "need 0 < e < high"),
        "svd-demo-size-huge": (("svd-demo", "--size", "100000"), "--size must lie in [2, 512]"),
        "svd-demo-size-one": (("svd-demo", "--size", "1"), "--size must lie in [2, 512]"),
    }
    for name, (argv, fragment) in budgets.items():
        result.append(Case(name, argv, 1, fragment))
    # train: flags and a damaged run directory
    base = ("train", "--task", "addition", "--model", "rnn", "--hidden", "4", "--steps", "2", "--no-progress")
    train = {
        "lr-nan": (("--lr", "nan"), "learning rate must be > 0"),
        "lr-zero": (("--lr", "0"), "learning rate must be > 0"),
        "steps-zero": (("--steps", "0"), "steps"),
        "hidden-zero": (("--hidden", "0"), "hidden"),
        "batch-zero": (("--batch-size", "0"), "batch_size"),
        "penalty-nan": (("--penalty", "nan"), "penalty"),
        "penalty-inf": (("--penalty", "inf"), "penalty"),
        "clip-negative": (("--clip", "-1"), "clip"),
        "record-zero": (("--record-every", "0"), "record_every"),
        "freeze-nothing": (("--freeze", "lstm.*"), "matches no parameter of the model"),
        "freeze-everything": (("--freeze", "*"), "nothing would train"),
    }
    for name, (extra, fragment) in train.items():
        argv = (*base, *extra, "--out", str(out / f"train-{name}"))
        result.append(Case(f"train-{name}", argv, 1, fragment))
    damaged = {
        "config-empty": ("{}", "holds no training configuration"),
        "config-list": ("[1, 2]", "holds no training configuration"),
        "config-garbage": ("not json", "is unreadable"),
    }
    for name, (text, fragment) in damaged.items():
        run = root / f"run-{name}"
        run.mkdir(exist_ok=True)
        (run / "config.json").write_text(text)
        _resave(valid, run / "last.safetensors")
        result.append(Case(f"train-resume-{name}", (*base, "--resume", "--out", str(run)), 1, fragment))
    result.append(Case("train-resume-nothing", (*base, "--resume", "--out", str(root / "no-run")), 1,
                       "nothing to resume"))
    from second_pass import second_cases  # the hostile user's kinds: FIFOs, catalogs, results trees, ...

    result += second_cases(root, valid, out)
    return [_parsed_at_the_edge(case) for case in result]


def _parsed_at_the_edge(case: Case) -> Case:
    """A real-valued flag given nan or inf is refused by the parser itself (exit 2), naming the flag,
    before the command's own range check would run."""
    for flag, value in zip(case.argv, case.argv[1:], strict=False):
        if flag.startswith("--") and value in ("nan", "inf", "-inf"):
            return Case(case.name, case.argv, 2, f"argument {flag}: must be a finite number, got '{value}'")
    return case

