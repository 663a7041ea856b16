"""The zoo check: every kept checkpoint loads by its ``zoo:`` name and goes through the analyzers.

Per entry: the checkpoint loads (:func:`spectral_analysis.io.load`, checksums and metadata checked),
its weight matrices' spectra are computed (``spectra``), and a recurrent model is analyzed as
``spectral-analysis analyze`` does on a few test sequences of its own task: Theorem 5's G(w) (or the
reason it is left out), Lemma 3's perturbation check, Jacobian products and their bound, gradient
norms over time and Lyapunov exponents. A feed-forward model (Fig. 5's MLPs) stops at its spectra,
which is what the analyzers take of it. An entry that fails keeps its error line and the rest go on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spectral_analysis.analysis.report import analyze_subject
from spectral_analysis.analysis.spectra import spectral_table
from spectral_analysis.io import load, resolve_checkpoint, zoo_entries
from spectral_analysis.nn import RecurrentModel


def check_entry(path: str | Path, samples: int = 2, trials: int = 2) -> dict[str, Any]:
    """Load the checkpoint at ``path`` and run the analyzers on it; the row says what ran and what came
    out."""
    subject = load(path, feedforward=True)
    table = spectral_table(subject.model)
    row: dict[str, Any] = {"matrices": len(table), "sigma_max": float(table["sigma_max"].max())}
    if not isinstance(subject.model, RecurrentModel):
        row["analyzed"] = "spectra (feed-forward)"
        return row
    report = analyze_subject(subject, samples=samples, trials=trials)
    bound = report["bound"]
    row.update(
        analyzed="analyze",
        T=report["T"],
        log10_G=bound.get("log10_G"),
        bound_note=bound.get("skipped") or bound.get("note"),
        jacobian_bound_holds=report["jacobian_bound_holds"],
        top_lyapunov=(report["lyapunov_exponents"] or [None])[0],
    )
    if "skipped" not in bound and row["log10_G"] is None:  # the report writes a non-finite value as null
        raise ValueError("Theorem 5's log10 G(w) came out non-finite")
    return row


def check_zoo(results: str | Path | None = None, experiment: str | None = None, samples: int = 2,
              trials: int = 2, report: Callable[[dict[str, Any]], None] | None = None
              ) -> list[dict[str, Any]]:
    """:func:`check_entry` on every zoo entry (of ``experiment`` if given): one row each, with ``ok``,
    the seconds it took and, for a failure, the error line instead of the analysis."""
    rows = []
    for entry in zoo_entries(results):
        if experiment and entry["experiment"] != experiment:
            continue
        started = time.perf_counter()
        row: dict[str, Any] = {"name": entry["name"], "model": entry["row"].get("model")}
        try:
            row.update(check_entry(resolve_checkpoint(entry["name"], results), samples, trials), ok=True)
        except Exception as error:  # noqa: BLE001 (a broken entry is reported; the check goes on)
            line = str(error).splitlines()[0] if str(error) else ""
            row.update(ok=False, error=f"{type(error).__name__}: {line}")
        row["seconds"] = round(time.perf_counter() - started, 2)
        rows.append(row)
        if report is not None:
            report(row)
    return rows
