"""The corpus's second pass, after a hostile user's review: FIFOs where files belong, broken catalogs,
damaged results trees, checkpoints whose metadata was edited and re-signed, and every numeric option of
``certify`` and ``run`` out of range. Each case is data: its command line, exit code and expected words
(``make_corpus.cases`` adds them to the first pass; ``tests/test_corpus.py`` runs them all)."""

from __future__ import annotations

import os
from pathlib import Path

from make_corpus import Case, _resave, _set

TINY_CATALOG = """
name = "tiny"
source = "test"
description = "a tiny grid"
[base]
task = "addition"
task_options = { length = 5, train_size = 32, valid_size = 16, test_size = 16 }
model = "rnn"
[[variants]]
label = "rnn"
[scales.paper]
stated = "unused"
steps = 4
[scales.smoke]
steps = 4
"""


def _fifos(root: Path, valid: Path, out: Path) -> list[Case]:
    fifo = root / "fifo"
    fifo.mkdir()
    for name in ("model.safetensors", "inputs.npy", "matrix.npy", "config.json"):
        os.mkfifo(fifo / name)
    catalog = fifo / "catalog"
    catalog.mkdir()
    os.mkfifo(catalog / "tiny.toml")
    run = fifo / "run"  # a run directory whose config.json is a FIFO
    run.mkdir()
    os.mkfifo(run / "config.json")
    (run / "last.safetensors").write_bytes(valid.read_bytes())
    not_regular = "is not a regular file"
    return [
        Case("fifo-checkpoint", ("inspect", str(fifo / "model.safetensors")), 1, not_regular),
        Case("fifo-model", ("bound", str(fifo / "model.safetensors")), 1, not_regular),
        Case("fifo-inputs", ("bound", str(valid), "--inputs", str(fifo / "inputs.npy")), 1,
             not_regular),
        Case("fifo-matrix", ("decompose", str(fifo / "matrix.npy")), 1, not_regular),
        Case("fifo-train-config", ("train", "--config", str(fifo / "config.json"), "--out", str(out / "fc")),
             1, not_regular),
        Case("fifo-catalog", ("experiments", "--catalog", str(catalog)), 1, not_regular),
        Case("fifo-resume-config", ("train", "--resume", "--out", str(run), "--model", "rnn", "--task",
                                    "addition"), 1, not_regular),
    ]


CATALOG_FAULTS = {
    "not-toml": ("name = [", "cannot read experiment file"),
    "empty": ("", "name"),
    "binary": ("\x00\x01\x02", "cannot read experiment file"),
    "path-name": (TINY_CATALOG.replace('name = "tiny"', 'name = "../../escaped"'), "plain name"),
    "slash-name": (TINY_CATALOG.replace('name = "tiny"', 'name = "a/b"'), "plain name"),
    "seeds-huge": (TINY_CATALOG.replace('stated = "unused"', 'stated = "unused"\nseeds = 1000000000'),
                   "seeds must be an integer in [1, 1000]"),
    "seeds-zero": (TINY_CATALOG.replace('stated = "unused"', 'stated = "unused"\nseeds = 0'),
                   "seeds must be an integer in [1, 1000]"),
    "seeds-float": (TINY_CATALOG.replace('stated = "unused"', 'stated = "unused"\nseeds = 2.5'),
                    "seeds must be an integer in [1, 1000]"),
    "grid-huge": (TINY_CATALOG.replace("[scales.paper]", "[axes]\n" + "\n".join(
        f'"task_options.x{i}" = {list(range(40))}' for i in range(4)) + "\n[scales.paper]"),
        "more than 100000"),
    "unknown-field": (TINY_CATALOG.replace('model = "rnn"', 'model = "rnn"\nlearning_rate = 0.1'),
                      "unknown training field(s) ['learning_rate']"),
    "unknown-model": (TINY_CATALOG.replace('model = "rnn"', 'model = "transformer"'), "transformer"),
    "unknown-task": (TINY_CATALOG.replace('task = "addition"', 'task = "imagenet"'), "imagenet"),
    "lr-text": (TINY_CATALOG.replace('model = "rnn"', 'model = "rnn"\nlr = "fast"'), "lr"),
    "no-label": (TINY_CATALOG.replace('label = "rnn"', 'model_label = "rnn"'), "label"),
    "axes-not-list": (TINY_CATALOG.replace("[scales.paper]", '[axes]\nhidden = 8\n[scales.paper]'), "hidden"),
    "no-scales": (TINY_CATALOG.split("[scales.paper]")[0], "scale"),
    "no-steps": (TINY_CATALOG.replace("steps = 4", ""), "steps"),
    "base-not-table": (TINY_CATALOG.replace("[base]\n", "base = 3\n[base2]\n"), "[base]"),
    "variants-not-list": (TINY_CATALOG.replace("[[variants]]", "[variants]"), "variants"),
    "lr-negative": (TINY_CATALOG.replace('model = "rnn"', 'model = "rnn"\nlr = -0.1'),
                    "learning rate must be > 0"),
    "hidden-zero": (TINY_CATALOG.replace('model = "rnn"', 'model = "rnn"\nhidden = 0'), "hidden"),
    "batch-text": (TINY_CATALOG.replace('model = "rnn"', 'model = "rnn"\nbatch_size = "big"'), "batch_size"),
    "freeze-not-list": (TINY_CATALOG.replace('model = "rnn"', 'model = "rnn"\nfreeze = 3'), "freeze"),
    "optimizer-unknown": (TINY_CATALOG.replace('model = "rnn"', 'model = "rnn"\noptimizer = "lbfgs2"'),
                          "unknown optimizer"),
    "model-option-unknown": (TINY_CATALOG.replace('model = "rnn"', 'model = "rnn"\nmodel_options = {m1 = 4}'),
                             "does not take option(s) ['m1']"),
    "task-option-unknown": (TINY_CATALOG.replace("test_size = 16 }", "test_size = 16, colour = 3 }"),
                            "does not take option(s) ['colour']"),
    "task-options-not-table": (TINY_CATALOG.replace("task_options = { length = 5, train_size = 32, "
                                                    "valid_size = 16, test_size = 16 }", "task_options = 5"),
                               "task_options"),
}


def _catalogs(root: Path) -> list[Case]:
    cases = []
    for name, (text, words) in CATALOG_FAULTS.items():
        directory = root / "catalogs" / name
        directory.mkdir(parents=True)
        (directory / "tiny.toml").write_text(text)
        cases.append(Case(f"catalog-{name}", ("experiments", "--catalog", str(directory)), 1, words))
    twice = root / "catalogs" / "twice"
    twice.mkdir()
    (twice / "a.toml").write_text(TINY_CATALOG)
    (twice / "b.toml").write_text(TINY_CATALOG)
    cases.append(Case("catalog-declared-twice", ("experiments", "--catalog", str(twice)), 1,
                      "declared twice"))
    return cases


def _results_trees(root: Path, valid: Path) -> list[Case]:
    trees = root / "trees"
    faults = {
        "row-not-json": "{ not json",
        "row-a-list": "[1, 2]",
        "row-binary": "\udcff",
    }
    cases = []
    for name, text in faults.items():
        trial = trees / name / "exp" / "paper" / "t_s0"
        trial.mkdir(parents=True)
        (trial / "model.safetensors").write_bytes(valid.read_bytes())
        (trial / "result.json").write_bytes(text.encode("utf-8", "surrogateescape"))
        cases.append(Case(f"results-{name}", ("zoo", "--results", str(trees / name)), 1, "result.json"))
    fifo = trees / "fifo-row" / "exp" / "paper" / "t_s0"
    fifo.mkdir(parents=True)
    (fifo / "model.safetensors").write_bytes(valid.read_bytes())
    os.mkfifo(fifo / "result.json")
    cases.append(Case("results-fifo-row", ("zoo", "--results", str(trees / "fifo-row")), 1,
                      "is not a regular file"))
    cases += [
        Case("results-a-file", ("zoo", "--results", str(valid)), 1, "folder"),
        Case("results-zoo-dotdot", ("inspect", "zoo:../../planted"), 2, "is not a plain name"),
        Case("results-zoo-missing", ("inspect", "zoo:no-such-experiment/t_s0"), 2, "no-such-experiment"),
    ]
    return cases


RESIGNED = {
    "hidden-huge": (["model", "hidden_size"], 10 ** 7, "hidden_size"),
    "input-huge": (["model", "input_size"], 10 ** 6, "input_size"),
    "output-huge": (["model", "output_size"], 10 ** 6, "output_size"),
    "layers-huge": (["model", "options", "num_layers"], 300_000, "num_layers"),
    "hidden-off-by-one": (["model", "hidden_size"], 5, "size mismatch"),
    "unknown-model": (["model", "name"], "transformer", "transformer"),
    "unknown-option": (["model", "options", "depth"], 3, "depth"),
    "layers-text": (["model", "options", "num_layers"], "two", "num_layers"),
    "task-length-huge": (["task", "length"], 10 ** 9, "task.length"),
    "step-negative": (["step"], -4, "step"),
}


def _resigned(root: Path, valid: Path) -> list[Case]:
    """Metadata edited and the digest recomputed, as anyone can: the checks, not the digest, refuse it."""
    cases = []
    for name, (path, value, words) in RESIGNED.items():
        file = _resave(valid, root / f"resigned-{name}.safetensors", meta_change=_set(path, value))
        cases.append(Case(f"resigned-{name}", ("inspect", str(file)), 1, words))
    return cases


CERTIFY_FLAGS = {
    "mc-samples-zero": ("--mc-samples", "0"),
    "mc-samples-huge": ("--mc-samples", "1000000000000"),
    "chunk-size-zero": ("--chunk-size", "0"),
    "chunk-size-negative": ("--chunk-size", "-5"),
    "epochs-negative": ("--epochs", "-1"),
    "epochs-huge": ("--epochs", "10000000"),
    "prior-epochs-negative": ("--prior-epochs", "-1"),
    "lr-zero": ("--lr", "0"),
    "lr-negative": ("--lr", "-1"),
    "lr-huge": ("--lr", "1e30"),
    "lr-nan": ("--lr", "nan"),
    "seed-negative": ("--seed", "-1"),
    "seed-huge": ("--seed", "1" + "0" * 40),
    "delta-nan": ("--delta", "nan"),
    "delta-zero": ("--delta", "0"),
    "delta-prime-one": ("--delta-prime", "1"),
    "prior-fraction-zero": ("--prior-fraction", "0"),
    "prior-fraction-above-one": ("--prior-fraction", "1.5"),
    "init-std-zero": ("--init-std", "0"),
    "init-std-negative": ("--init-std", "-1"),
    "objective-unknown": ("--objective", "bayes"),
    "prior-unknown": ("--prior", "uniform"),
}


def _certify(valid: Path) -> list[Case]:
    return [Case(f"certify-{name}", ("certify", str(valid), flag, value), 2, flag)
            for name, (flag, value) in CERTIFY_FLAGS.items()]


RUN_FLAGS = {
    "seeds-zero": (("--seeds", "0"), 2, "--seeds"),
    "seeds-huge": (("--seeds", "1000000000"), 2, "--seeds"),
    "workers-zero": (("--workers", "0"), 2, "--workers"),
    "workers-huge": (("--workers", "100000"), 2, "--workers"),
    "grace-zero": (("--scheduler", "asha", "--grace-period", "0"), 2, "--grace-period"),
    "reduction-one": (("--scheduler", "asha", "--reduction-factor", "1"), 2, "--reduction-factor"),
    "samples-zero": (("--samples", "0"), 2, "--samples"),
    "samples-without-search": (("--samples", "3"), 1, "num_samples"),
    "scheduler-unknown": (("--scheduler", "pbt"), 2, "--scheduler"),
    "search-malformed": (("--search", "lr"), 1, "expected PATH=DOMAIN:ARGS"),
    "search-unknown-domain": (("--search", "lr=normal:0:1"), 1, "expected PATH=DOMAIN:ARGS"),
    "search-bad-bounds": (("--search", "lr=loguniform:a:b"), 1, "--search"),
    "search-unknown-field": (("--search", "depth=uniform:1:2"), 1, "depth"),
    "time-budget-zero": (("--time-budget", "0"), 1, "time budget"),
    "time-budget-nan": (("--time-budget", "nan"), 2, "--time-budget"),
    "gpus-negative": (("--gpus-per-trial", "-1"), 1, "gpus per trial"),
    "gpus-fraction-above-one": (("--gpus-per-trial", "2.5"), 1, "gpus per trial"),
    "scheduler-on-processes": (("--scheduler", "asha", "--backend", "processes"), 1, "ray backend"),
    "only-malformed": (("--only", "lengthis5"), 1, "KEY=VALUE"),
    "unknown-experiment": (("--only", "variant=rnn"), 1, "unknown experiment"),
}


def _run_options(root: Path, out: Path) -> list[Case]:
    catalog = root / "run-catalog"
    catalog.mkdir()
    (catalog / "tiny.toml").write_text(TINY_CATALOG)
    cases = []
    for name, (flags, code, words) in RUN_FLAGS.items():
        experiment = "nosuch" if name == "unknown-experiment" else "tiny"
        argv = ("run", experiment, "--catalog", str(catalog), "--scale", "smoke", "--out", str(out / name),
                "--results", str(out / f"{name}-results"), *flags)
        cases.append(Case(f"run-{name}", argv, code, words))
    file_out = root / "a-file"
    file_out.write_text("not a folder")
    argv = ("run", "tiny", "--catalog", str(catalog), "--scale", "smoke", "--out", str(out / "rf"),
            "--results", str(file_out))
    cases.append(Case("run-results-a-file", argv, 1, "folder"))
    return cases


def _arrays_and_limits(root: Path, valid: Path, out: Path) -> list[Case]:
    """Array files that claim more than they hold, options past their ranges on every other command, a
    CUDA device this torch lacks."""
    import numpy as np
    import torch

    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 50000), }"
    header += " " * (118 - len(header)) + "\n"
    (root / "claims.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
                                      + header.encode() + bytes(64))
    (root / "corrupt.npz").write_bytes(b"PK\x03\x04" + bytes(40))
    np.save(root / "complex.npy", np.eye(3) * (1 + 1j))
    cases = [
        Case("npy-claims-37gib", ("bound", str(valid), "--inputs", str(root / "claims.npy")), 1,
             "cannot read inputs"),
        Case("npz-corrupt", ("bound", str(valid), "--inputs", str(root / "corrupt.npz")), 1,
             "cannot read inputs"),
        Case("decompose-complex", ("decompose", str(root / "complex.npy")), 1, "complex matrix"),
        Case("threads-zero", ("--threads", "0", "inspect", str(valid)), 2, "--threads"),
        Case("threads-huge", ("--threads", "10000000000", "inspect", str(valid)), 2, "--threads"),
        Case("bound-samples-zero", ("bound", str(valid), "--samples", "0"), 2, "--samples"),
        Case("bound-seed-negative", ("bound", str(valid), "--seed", "-2"), 2, "--seed"),
        Case("bound-length-overflow", ("bound", str(valid), "--length", "1" + "0" * 400), 2, "--length"),
        Case("analyze-seed-huge", ("analyze", str(valid), "--out", str(out / "as"), "--seed", "9" * 30), 2,
             "--seed"),
        Case("zoo-samples-zero", ("zoo", "--check", "--samples", "0"), 2, "--samples"),
        Case("bounds-table-mc-samples-zero", ("bounds-table", str(valid), "--mc-samples", "0"), 2,
             "--mc-samples"),
        Case("bounds-table-epochs-negative", ("bounds-table", str(valid), "--epochs", "-3"), 2, "--epochs"),
        Case("experiments-estimate-unknown", ("experiments", "--estimate", "nosuch"), 1,
             "unknown experiment"),
        Case("park-unknown", ("park", "nosuch", "--out", str(out / "pk")), 1, "nosuch"),
    ]
    if not torch.cuda.is_available():
        cases += [Case(f"cuda-{command}", (command, str(valid), "--device", "cuda"), 1, "sees no CUDA device")
                  for command in ("bound", "certify")]
    return cases


def second_cases(root: Path, valid: Path, out: Path) -> list[Case]:
    """Every case of the second pass, its files written under ``root`` (run outputs under ``out``)."""
    return [*_fifos(root, valid, out), *_catalogs(root), *_results_trees(root, valid),
            *_resigned(root, valid), *_certify(valid), *_run_options(root, out),
            *_arrays_and_limits(root, valid, out)]


if __name__ == "__main__":  # print what each case gets, to write its expected words
    import contextlib
    import io
    import sys
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    from make_corpus import _valid_checkpoint

    from spectral_analysis.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for case in second_cases(root, _valid_checkpoint(root), root / "out"):
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    code = main(list(case.argv))
                except SystemExit as stop:
                    code = stop.code
            last = (err.getvalue().strip().splitlines() or [""])[-1]
            mark = "ok " if code == case.code and case.fragment in last else "BAD"
            print(f"{mark} {case.name}: {code} {last[:160]}")
