"""The model zoo: the final checkpoints the experiments runner keeps in ``results/``.

Layout (one format, written by :mod:`spectral_analysis.experiments.results`)::

    results/<experiment>/<scale>/summary.csv, summary.json        one row per trial
    results/<experiment>/<scale>/<trial>/result.json              that trial's row
    results/<experiment>/<scale>/<trial>/curves.csv               downsampled training curves
    results/<experiment>/<scale>/<trial>/model.safetensors        the final checkpoint (model only)

A zoo name is ``zoo:<experiment>/<trial>`` (the first of the ``paper``, ``budget`` and ``smoke``
scales that holds the trial; an error where that scale keeps it without a model, as a diverged trial)
or ``zoo:<experiment>/<scale>/<trial>``; every analyzer takes one wherever it takes a path.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from spectral_analysis.atomic import read_text_file
from spectral_analysis.vocabulary import SCALES

ZOO_PREFIX = "zoo:"
CHECKPOINT_NAME = "model.safetensors"
RESULT_NAME = "result.json"


def default_results_dir() -> Path:
    """``$SPECTRAL_ANALYSIS_RESULTS``; else, run from a checkout of this repository, its ``results/``;
    else ``results/`` in the working directory (an installed package never writes into site-packages)."""
    env = os.environ.get("SPECTRAL_ANALYSIS_RESULTS")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "spectral_analysis" / "catalog").is_dir():
        return checkout / "results"
    return Path.cwd() / "results"


def read_kept_row(path: str | Path) -> dict[str, Any]:
    """A kept trial's ``result.json``: a JSON object, read as a regular file of bounded size; a damaged
    one is a ``ValueError`` naming the file."""
    text = read_text_file(path, "kept row", limit=2 ** 24)
    try:
        row = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"kept row {path} is not JSON ({error})") from None
    if not isinstance(row, dict):
        raise ValueError(f"kept row {path} holds a {type(row).__name__}, not a JSON object")
    return row


PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.=+-]*")  # an experiment, scale or trial key: no path in it


def inside_results(root: str | Path, path: str | Path, what: str) -> Path:
    """``path``, when it lies inside the results tree ``root`` with every symlink followed; else a
    ``ValueError`` naming where it leads (the tree is a boundary: nothing is read or written past it)."""
    real_root, real = Path(root).resolve(), Path(path).resolve()
    if real != real_root and real_root not in real.parents:
        raise ValueError(f"{what} {path} leads out of the results tree {root} (to {real}): refused")
    return Path(path)


def trial_results_dir(root: str | Path, experiment: str, scale: str, trial: str) -> Path:
    """Where a kept trial lives: ``root/<experiment>/<scale>/<trial>``, each a plain name (no ``/`` or
    ``..``) and the folder inside ``root`` with its symlinks followed.

    >>> trial_results_dir("results", "fig1-addition", "paper", "rnn_length30_s0").as_posix()
    'results/fig1-addition/paper/rnn_length30_s0'
    """
    for part, what in ((experiment, "experiment"), (scale, "scale"), (trial, "trial")):
        if not isinstance(part, str) or not PLAIN_NAME.fullmatch(part):
            raise ValueError(f"{what} name {part!r} is not a plain name (letters, digits and _ . = + -): "
                             "it could lead out of the results tree")
    return inside_results(root, Path(root) / experiment / scale / trial, f"trial folder of {experiment}")


def resolve_checkpoint(name: str | Path, results: str | Path | None = None) -> Path:
    """The file behind a checkpoint argument: a path as given, or a ``zoo:`` name looked up in
    ``results`` (default :func:`default_results_dir`); ``ValueError`` naming what is missing."""
    text = str(name)
    if not text.startswith(ZOO_PREFIX):
        return Path(text)
    root = Path(results) if results else default_results_dir()
    parts = text[len(ZOO_PREFIX) :].strip("/").split("/")
    if len(parts) == 3:
        candidates = [trial_results_dir(root, parts[0], parts[1], parts[2])]
    elif len(parts) == 2:
        candidates = [trial_results_dir(root, parts[0], scale, parts[1]) for scale in SCALES]
    else:
        raise ValueError(
            f"bad zoo name {text!r}: expected zoo:<experiment>/<trial> or zoo:<experiment>/<scale>/<trial>"
        )
    for directory in candidates:
        if (directory / CHECKPOINT_NAME).is_file():
            return inside_results(root, directory / CHECKPOINT_NAME, f"zoo entry {text!r}")
        if (directory / RESULT_NAME).is_file():  # the trial is kept at this scale, its model is not
            raise ValueError(_kept_without_model(text, directory, candidates))
    known = sorted(e["name"] for e in zoo_entries(root) if e["name"].startswith(f"{ZOO_PREFIX}{parts[0]}/"))
    hint = (
        f"; entries of {parts[0]!r}: {known[:6]}{' ...' if len(known) > 6 else ''}"
        if known
        else f"; no entries of experiment {parts[0]!r} in {root} (spectral-analysis zoo lists them)"
    )
    raise ValueError(f"zoo entry {text!r} not found{hint}")


def zoo_name(experiment: str, scale: str, trial: str) -> str:
    """The full zoo name of a kept trial: ``zoo:<experiment>/<scale>/<trial>``."""
    return f"{ZOO_PREFIX}{experiment}/{scale}/{trial}"


def _kept_without_model(name: str, directory: Path, candidates: list[Path]) -> str:
    """Why ``name`` names no model: its trial is kept at ``directory``'s scale without a checkpoint (a
    failed trial, or a seed the zoo does not keep), and which other scales keep one (never taken in its
    place: a smoke model is no stand-in for the paper's)."""
    row = read_kept_row(directory / RESULT_NAME)
    error = (row.get("error") or "no error kept").splitlines()[0]
    kept_note = row.get("checkpoint_note") or "no checkpoint kept"
    why = f"failed: {error}" if row.get("status") == "failed" else kept_note
    others = [zoo_name(d.parent.parent.name, d.parent.name, d.name)
              for d in candidates if (d / CHECKPOINT_NAME).is_file()]
    return (f"zoo entry {name!r}: the {directory.parent.name}-scale trial is kept without its model ({why}); "
            + (f"name another scale to take its model there: {', '.join(others)}" if others
               else "no other scale keeps this trial's model"))


def zoo_entries(results: str | Path | None = None) -> list[dict[str, Any]]:
    """One record per kept checkpoint: its zoo name, experiment, scale, trial and result row."""
    root = Path(results) if results else default_results_dir()
    entries = []
    for checkpoint in sorted(root.glob(f"*/*/*/{CHECKPOINT_NAME}")):
        try:  # a symlink out of the tree is no entry of it
            inside_results(root, checkpoint, "zoo entry")
        except ValueError:
            continue
        trial_dir = checkpoint.parent
        experiment, scale, trial = trial_dir.parent.parent.name, trial_dir.parent.name, trial_dir.name
        row_file = trial_dir / RESULT_NAME
        row = read_kept_row(row_file) if row_file.exists() else {}
        entries.append(
            {
                "name": zoo_name(experiment, scale, trial),
                "experiment": experiment,
                "scale": scale,
                "trial": trial,
                "path": str(checkpoint),
                "row": row,
            }
        )
    return entries
