"""What every subcommand shares: the error type, JSON/text output and reading matrices.

The command-line modules import only the standard library and :mod:`spectral_analysis.vocabulary` at
their top, so that ``--help``, ``--version`` and argument errors answer without loading torch; each
command imports what it runs when it runs."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


class CommandError(Exception):
    """A failure to report as one line on stderr."""


def real(text: str) -> float:
    """The argparse type of every real-valued option: a finite number, so that ``nan``, ``inf`` and
    ``1e999`` are refused at the edge in one line rather than deep inside a computation.

    >>> real("1e-3")
    0.001
    >>> real("nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a finite number, got 'nan'
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def count(low: int, high: int) -> Callable[[str], int]:
    """The argparse type of an integer option in ``[low, high]``: a count, a length or a seed is bounded
    at the edge, so that neither ``0`` (a division) nor ``10**400`` (an overflow, or hours of work)
    reaches the computation.

    >>> count(1, 10)("3")
    3
    >>> count(1, 10)("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer in [1, 10], got '0'
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer in [{low}, {high}], got {text[:40]!r}")
        return value

    return parse


def positive_real(high: float) -> Callable[[str], float]:
    """The argparse type of a real option in ``(0, high]`` (a learning rate, a margin)."""
    def parse(text: str) -> float:
        value = real(text)
        if not 0 < value <= high:
            raise argparse.ArgumentTypeError(f"must be a number in (0, {high:g}], got {text!r}")
        return value

    return parse


def auto_or(parse: Callable[[str], float]) -> Callable[[str], float | str]:
    """The argparse type of an option that is ``auto`` or a number ``parse`` accepts."""
    def parse_or_auto(text: str) -> float | str:
        return "auto" if text == "auto" else parse(text)

    return parse_or_auto


def probability(text: str) -> float:
    """The argparse type of a confidence or a fraction: a number in the open interval (0, 1)."""
    value = real(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}")
    return value


SEED = count(0, 2 ** 63 - 1)  # what torch.manual_seed takes


def load_matrix(path: str) -> torch.Tensor:
    """A 2-D float64 matrix from ``.npy`` (no pickles) or whitespace/comma separated text."""
    import numpy as np
    import torch

    file = Path(path)
    if not file.is_file():
        raise CommandError(f"matrix file {path} is not a regular file (a FIFO, a device or a folder)"
                           if file.exists() else f"matrix file not found: {path}")
    from spectral_analysis.data.arrays import read_npy

    try:
        if file.suffix == ".npy":
            array = read_npy(file)
        else:
            text = file.read_text()
            array = np.loadtxt(file, delimiter="," if "," in text else None, ndmin=2)
    except (ValueError, OSError, UnicodeDecodeError) as error:
        raise CommandError(f"cannot read a matrix from {path}: {str(error).splitlines()[0]}") from None
    if np.iscomplexobj(array):
        raise CommandError(f"{path} holds a complex matrix ({array.dtype}); the decomposition is of real "
                           "matrices (a complex one's imaginary part would be dropped): pass its real form")
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.number):
        raise CommandError(f"{path} holds an array of shape {array.shape} and dtype {array.dtype}; "
                           "expected a 2-D numeric matrix")
    return torch.from_numpy(np.asarray(array, dtype=np.float64))


OUTPUT_FORMATS = ("text", "json", "csv", "md")


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--format text|json|csv|md`` on every command: a table's rows, or a record as one
    row, as CSV or Markdown."""
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout (= --format json)")
    parser.add_argument("--format", choices=OUTPUT_FORMATS, default="text",
                        help="text (default), json, csv or md (a Markdown table: the command's table, or "
                        "its record as one row)")


def show_progress(args: argparse.Namespace) -> bool:
    """Progress bars go to stderr: off with ``--quiet`` and when stderr is not a terminal."""
    import sys

    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def output_format(args: argparse.Namespace) -> str:
    return "json" if args.json else args.format


def emit(args: argparse.Namespace, payload: dict, text: Callable[[dict], str],
         rows: Callable[[dict], list[dict]] | None = None) -> None:
    """Print ``payload`` as JSON, as text, or as CSV or a Markdown table: its ``rows``, or without them the
    record itself as one row (nested fields as ``parent.child`` columns)."""
    fmt = output_format(args)
    if fmt == "json":
        print(json.dumps(payload, indent=2))
    elif fmt in ("csv", "md"):
        from spectral_analysis.tables import render

        print(render(rows(payload) if rows else [payload], fmt), end="")
    else:
        print(text(payload))


def checkpoint_arg(text: str) -> str:
    """An argparse type: a checkpoint path, or a ``zoo:<experiment>/<trial>`` name checked against the zoo
    and kept as a name (records name the zoo entry, and ``bounds-table --state`` files by it)."""
    if not text.startswith("zoo:"):
        return text
    from spectral_analysis.io import resolve_checkpoint

    try:
        resolve_checkpoint(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def results_dir(args: argparse.Namespace) -> Path:
    """``--results``, else the repository's ``results/`` (or ``$SPECTRAL_ANALYSIS_RESULTS``)."""
    from spectral_analysis.io import default_results_dir

    results = Path(args.results) if args.results else default_results_dir()
    if results.exists() and not results.is_dir():
        raise CommandError(f"--results {results} is not a directory: the results tree is a folder of "
                           "<experiment>/<scale>/<trial> folders")
    return results


def results_arguments(parser: argparse.ArgumentParser) -> None:
    """``--results`` and the tabular output format (every command on kept results prints a table)."""
    parser.add_argument(
        "--results",
        default=None,
        help="results directory (default: the repository's results/ or $SPECTRAL_ANALYSIS_RESULTS)",
    )
    add_output_arguments(parser)
