"""Every bound on the same checkpoints: the paper's G(w), Corollary 1, the explicit A.6 bound and the
PAC-Bayes certificate, beside the measured errors (``spectral-analysis bounds-table``).

One row per zoo checkpoint of a classification task (one class per sequence): test and training
error of the trained network, the training margin loss at gamma, log10 G(w) (Theorem 5) and
Corollary 1's where the structure bounds ||W|| (gamma: the 0.1 quantile of the training margins, or 1
when more than a tenth are misclassified), the explicit bound of Appendix A.6 on the test error, and
the certificate of :mod:`spectral_analysis.analysis.certify` (with ``certificates=True``).
"""

from __future__ import annotations

from typing import Any

from spectral_analysis.analysis.bound_report import bound_report, split_margins
from spectral_analysis.analysis.certify import certify
from spectral_analysis.analysis.checkpoint_data import checkpoint_task
from spectral_analysis.analysis.margins import margin_loss
from spectral_analysis.io import Subject, load, zoo_entries

COLUMNS = ("checkpoint", "model", "task", "parameters", "test_error", "train_error", "gamma",
           "train_margin_loss", "log10_G", "log10_G_corollary1", "explicit_bound", "certified_error", "note")


def _bound_or_none(subject: Subject) -> tuple[dict[str, Any] | None, str | None]:
    """The bound report with training margins; gamma = 1 when the quantile is not positive; ``None`` and
    the reason when Theorem 5 does not cover the model (an LSTM, a GRU, a stacked net)."""
    try:
        return bound_report(subject, data="train"), None
    except ValueError as error:
        if "quantile" not in str(error):
            return None, str(error)
    return bound_report(subject, data="train", margin=1.0), None


def bounds_row(name: str, certificate: bool = False, mc_samples: int = 400,
               epochs: int = 20) -> dict[str, Any]:
    """The bounds of one checkpoint (a path or a ``zoo:`` name)."""
    subject = load(name)
    task = checkpoint_task(subject.metadata)
    if task.kind != "classification-last":
        raise ValueError(f"{name}: the bounds compare 0-1 errors; task {task.name!r} is {task.kind}")
    model = subject.model
    report, refused = _bound_or_none(subject)
    train = split_margins(model, task.train.inputs, task.train.targets)
    row = {"checkpoint": name, "model": subject.metadata["model"]["name"], "task": task.name,
           "parameters": sum(p.numel() for p in model.parameters()),
           "test_error": margin_loss(split_margins(model, task.test.inputs, task.test.targets), 0.0),
           "train_error": margin_loss(train, 0.0), "gamma": None, "train_margin_loss": None,
           "log10_G": None, "log10_G_corollary1": None, "explicit_bound": None, "certified_error": None,
           "note": refused}
    if report is not None:
        row.update({"gamma": report["gamma"], "train_margin_loss": report["train_margin_loss"],
                    "log10_G": report["log10_G"],
                    "log10_G_corollary1": (report["corollary1"] or {}).get("log10_G"),
                    "explicit_bound": report["bound"]})
    if certificate:
        record, _ = certify(subject, task.train.inputs, task.train.targets, mc_samples=mc_samples,
                            epochs=epochs)
        row["certified_error"] = record["certified_error"]
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
