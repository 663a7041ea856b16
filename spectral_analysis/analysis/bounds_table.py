"""Every bound on the same checkpoints: the paper's G(w), Corollary 1, the explicit A.6 bound, the
unrolled-network margin bound of Bartlett et al. and the PAC-Bayes certificates, beside the measured
errors (``spectral-analysis bounds-table``).

``sigma_bound`` is the largest singular value of W the structure allows (Spectral-RNN: sigma* + r; oRNN:
1; none for a free W).

One row per zoo checkpoint of a classification task (one class per sequence): test and training
error of the trained network, the training margin loss at gamma, log10 G(w) (Theorem 5) and
Corollary 1's where the structure bounds ||W|| (gamma: the 0.1 quantile of the training margins, or 1
when more than a tenth are misclassified), the explicit bound of Appendix A.6 on the test error,
log10 of :mod:`~spectral_analysis.analysis.unrolled_bound` (at its own best gamma), and the
certificates of :mod:`spectral_analysis.analysis.certify` for each prior asked for: of Q centred on the
checkpoint, with Q's test error (scored after the certificate, which never reads the test split) and its
KL, and of the checkpoint itself derandomized through margins
(:mod:`~spectral_analysis.analysis.derandomize`); with the held-out bound of the validation split alone.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import torch

from spectral_analysis.analysis.bound_report import bound_report, split_margins
from spectral_analysis.analysis.certify import certify, error_rate
from spectral_analysis.analysis.checkpoint_data import checkpoint_task, held_out_split
from spectral_analysis.analysis.margins import margin_loss
from spectral_analysis.analysis.unrolled_bound import model_unrolled_bound
from spectral_analysis.io import Subject, load, zoo_entries
from spectral_analysis.vocabulary import PRIORS

CERTIFICATE_COLUMNS = tuple(f"{what}_{prior}" for prior in PRIORS
                            for what in ("certified_error", "q_test_error", "kl", "derandomized"))
COLUMNS = ("checkpoint", "model", "sigma_bound", "task", "parameters", "test_error", "train_error", "gamma",
           "train_margin_loss", "log10_G", "log10_G_corollary1", "explicit_bound", "explicit_regime",
           "log10_unrolled_bound", *CERTIFICATE_COLUMNS, "held_out_bound", "note")
TEXT_COLUMNS = ("checkpoint", "model", "task", "explicit_regime", "note")
Q_TEST_SAMPLES = 10  # sampled networks for Q's test error (reported, never used by a bound)


def _bound_or_none(subject: Subject) -> tuple[dict[str, Any] | None, str | None]:
    """The bound report with training margins; gamma = 1 when the quantile is not positive; ``None`` and
    the reason when Theorem 5 does not cover the model (an LSTM, a GRU, a stacked net)."""
    try:
        return bound_report(subject, data="train"), None
    except ValueError as error:
        if "quantile" not in str(error):
            return None, str(error)
    return bound_report(subject, data="train", margin=1.0), None


def certificate_folder(root: str | Path, name: str, prior: str) -> Path:
    """Where the certificate of checkpoint ``name`` with ``prior`` keeps its stages under ``root``:
    ``root/EXPERIMENT/SCALE/TRIAL/PRIOR`` for a ``zoo:`` name, ``root/PATH/PRIOR`` (the checkpoint's path
    less its suffix, as a relative path) for a file.

    ```python
    >>> certificate_folder("results/certificates", "zoo:table2-mnist/paper/spectral_s0", "learned").as_posix()
    'results/certificates/table2-mnist/paper/spectral_s0/learned'

    ```
    """
    where = name.removeprefix("zoo:") if name.startswith("zoo:") else Path(name).with_suffix("").as_posix()
    parts = [part for part in Path(where).parts if part not in ("/", "..", ".")]
    return Path(root, *parts, prior)


def bounds_row(name: str, certificates: tuple[str, ...] = (), mc_samples: int = 20000, epochs: int = 20,
               objective: str = "quadratic", seed: int = 0, state: str | Path | None = None,
               device: str = "cpu") -> dict[str, Any]:
    """The bounds of one checkpoint (a path or a ``zoo:`` name); ``certificates``: the priors to certify
    with (``init``, ``learned``); ``state``: a folder under which each certificate keeps its stages
    (:func:`certificate_folder`), so that a rerun resumes them; ``device``: where the certificates train
    and sample their networks (the deterministic bounds are computed on the CPU). The sampled noise is
    drawn on the CPU, so a certificate resumed on another device continues the same draws."""
    unknown = set(certificates) - set(PRIORS)
    if unknown:
        raise ValueError(f"unknown prior(s) {sorted(unknown)}; expected some of {PRIORS}")
    subject = load(name)
    certified = subject if not certificates or device == "cpu" else load(name, device=device)  # fails early
    task = checkpoint_task(subject.metadata)
    if task.kind != "classification-last":
        raise ValueError(f"{name}: the bounds compare 0-1 errors; task {task.name!r} is {task.kind}")
    model = subject.model
    report, refused = _bound_or_none(subject)
    train = split_margins(model, task.train.inputs, task.train.targets)
    config = subject.metadata["model"]
    row = dict.fromkeys(COLUMNS)
    row.update({"checkpoint": name, "model": config["name"], "task": task.name,
                "parameters": sum(p.numel() for p in model.parameters()),
                "test_error": margin_loss(split_margins(model, task.test.inputs, task.test.targets), 0.0),
                "train_error": margin_loss(train, 0.0), "note": refused})
    if report is not None:
        row.update({"gamma": report["gamma"], "train_margin_loss": report["train_margin_loss"],
                    "log10_G": report["log10_G"], "sigma_bound": report["W_norm_bound"],
                    "log10_G_corollary1": (report["corollary1"] or {}).get("log10_G"),
                    "explicit_bound": report["bound"],
                    "explicit_regime": (report["explicit"] or {}).get("regime"),
                    "log10_unrolled_bound": model_unrolled_bound(
                        model, task.train.inputs, task.train.targets, task.symbolic).log10_bound})
    x_test, y_test = task.test.inputs, task.test.targets
    held_out, selections = held_out_split(subject.metadata, task)  # as certify's command takes it
    for prior in certificates:
        record, posterior = certify(certified, task.train.inputs, task.train.targets, mc_samples=mc_samples,
                                    epochs=epochs, objective=objective, prior=prior, held_out=held_out,
                                    selections=selections, seed=seed,
                                    state=None if state is None else certificate_folder(state, name, prior))
        generator = torch.Generator().manual_seed(seed)
        q_test = sum(error_rate(certified.model, posterior.sample(generator), x_test, y_test)
                     for _ in range(Q_TEST_SAMPLES)) / Q_TEST_SAMPLES
        deterministic = record["deterministic"] or {}
        row.update({f"certified_error_{prior}": record["certified_error"], f"q_test_error_{prior}": q_test,
                    f"kl_{prior}": record["kl"],
                    f"derandomized_{prior}": deterministic.get("derandomized_bound"),
                    "held_out_bound": deterministic.get("held_out_bound")})
    return row


def classification_entries(experiments: list[str] | None = None, scale: str = "paper") -> list[str]:
    """Zoo names of the kept checkpoints whose task has one class per sequence."""
    names = []
    for entry in zoo_entries():
        if entry["scale"] != scale or (experiments and entry["experiment"] not in experiments):
            continue
        if entry["row"].get("metric") == "accuracy":
            names.append(entry["name"])
    return names


def read_bounds_table(path: str | Path) -> list[dict[str, Any]]:
    """The rows a ``bounds-table --out`` CSV keeps, as :func:`bounds_row` gave them: numbers as numbers, an
    empty cell and a column the file predates as ``None``.

    ```python
    >>> rows = read_bounds_table("figures/bounds_table_pixel.csv")
    >>> rows[0]["model"], rows[0]["test_error"] < rows[0]["certified_error_learned"] < 1
    ('spectral', True)

    ```
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no bounds table at {path}: spectral-analysis bounds-table --out {path} writes it")
    with path.open(newline="") as file:
        reader = csv.DictReader(file)
        unknown = set(reader.fieldnames or ()) - set(COLUMNS)
        if unknown or "checkpoint" not in (reader.fieldnames or ()):
            raise ValueError(f"{path} is not a bounds-table CSV: columns {sorted(unknown)} are none of "
                             f"bounds-table's, or it has no 'checkpoint' column")
        kept = list(reader)

    def value(column: str, cell: str | None) -> Any:
        if cell in (None, ""):
            return None
        if column in TEXT_COLUMNS:
            return cell
        try:
            return int(cell) if column == "parameters" else float(cell)
        except ValueError:
            raise ValueError(f"{path}: column {column!r} holds {cell!r}, not a number") from None

    return [{column: value(column, row.get(column)) for column in COLUMNS} for row in kept]
