"""Faces layer: the paper checks, one module per group of claims, each returning common check records
(:mod:`spectral_analysis.checks`). ``spectral-analysis check-paper`` runs them all; each script in
``paper_checks/`` runs one. Modules are imported only when their check runs."""

from __future__ import annotations

import argparse
import importlib
import json

from spectral_analysis.checks import CheckRecord, checks_markdown, guarded, select_checks

PAPER_CHECKS: dict[str, str] = {
    "svd-map": "svd_map",
    "baselines": "baselines",
    "parameter-counts": "parameter_counts",
    "bounds": "bounds",
    "experiments": "experiments",
    "synthetic-tasks": "synthetic_tasks",
    "mnist": "mnist_ranking",
    "svdrnn-r": "svdrnn_r",
    "svdrnn-leak": "svdrnn_leak",
    "dizzy": "dizzy_copy",
    "kru-amplitude": "kru_amplitude",
    "kru-music": "kru_music",
    "ptb": "ptb",
    "kru-synthetic": "kru_synthetic",
    "kru-mnist": "kru_mnist",
    "kru-ptb": "kru_ptb",
    "kru-theory": "kru_theory",
    "depth": "depth",
    "ucr": "ucr",
    "linear-rnn": "linear_rnn",
    "symbolic": "symbolic",
}


def run_paper_checks(quick: bool = True, only: list[str] | None = None,
                     progress: bool = False) -> list[tuple[str, CheckRecord]]:
    """``(name, record)`` for every check group, or the named ones (``ValueError`` for unknown names);
    ``progress``: a bar on stderr, one step per group."""
    from tqdm import tqdm

    names = select_checks(PAPER_CHECKS, only, "paper check")
    rows = []
    for name in tqdm(names, desc="paper checks", disable=not progress, leave=False):
        module = importlib.import_module(f"spectral_analysis.paper.{PAPER_CHECKS[name]}")
        records = guarded(f"check group {name!r}", f"every check of {name!r} runs", None,
                          lambda module=module: module.run(quick))
        rows += [(name, record) for record in records]
    return rows


def script_main(name: str) -> int:
    """What ``python paper_checks/<script>.py [--quick] [--json]`` runs: one group, printed."""
    parser = argparse.ArgumentParser(description=f"paper check: {name}")
    parser.add_argument("--quick", action="store_true", help="reduced sizes (minutes on a CPU)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = run_paper_checks(args.quick, [name])
    if args.json:
        print(json.dumps({"checks": [{"name": n, **r.as_dict()} for n, r in rows]}, indent=1))
    else:
        print(checks_markdown([r for _, r in rows]))
    return 0


__all__ = ["PAPER_CHECKS", "run_paper_checks", "script_main"]
