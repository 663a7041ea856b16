"""``spectral-analysis experiments``: the catalog, its cost, its ledger and its trials' fitness (the
commands that run a grid are in :mod:`~spectral_analysis.cli.sweeps`, those that read its results in
:mod:`~spectral_analysis.cli.kept`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from spectral_analysis.cli.common import (
    CommandError,
    emit,
    output_format,
    results_arguments,
    results_dir,
)
from spectral_analysis.vocabulary import SCALES

if TYPE_CHECKING:
    from pathlib import Path

    from spectral_analysis.experiments import Experiment


def _record_fitness(args: argparse.Namespace, catalog: dict[str, Experiment], results: Path) -> int:
    from spectral_analysis.experiments.results import record_fitness

    names = args.fitness or list(catalog)
    unknown = [name for name in names if name not in catalog]
    if unknown:
        raise CommandError(f"unknown experiment(s) {unknown}; the catalog has {sorted(catalog)}")
    for name in names:
        for scale in SCALES:
            rows = record_fitness(results, name, scale)
            if rows:
                unfit = [r["trial"] for r in rows if not r["fitness"]["fit"]]
                print(f"{name} {scale}: {len(rows) - len(unfit)} of {len(rows)} kept trials fit"
                      + (f"; unfit: {', '.join(unfit)}" if unfit else ""), flush=True)
    return 0


def cmd_experiments(args: argparse.Namespace) -> int:
    from spectral_analysis.experiments import load_catalog, read_rows
    from spectral_analysis.experiments.estimate import estimate_experiment, not_estimated, read_estimate
    from spectral_analysis.experiments.grid import configuration_key

    catalog = load_catalog(args.catalog)
    results = results_dir(args)
    if args.ledger:
        from spectral_analysis.experiments.ledger import write_ledger

        print(f"wrote {write_ledger(results, catalog)}", flush=True)
        return 0
    if args.fitness is not None:
        return _record_fitness(args, catalog, results)
    if args.estimate is not None:
        for name in args.estimate or list(catalog):
            if name not in catalog:
                raise CommandError(f"unknown experiment {name!r}; the catalog has {sorted(catalog)}")
            estimate = estimate_experiment(catalog[name], results, device=args.device)
            if output_format(args) == "text":
                cap = estimate.get("total_seconds_at_cap")
                at_cap = "" if cap is None else f", at most {cap / 3600:.1f} h to the max_steps cap"
                print(
                    f"{name}: {estimate['total_seconds'] / 3600:.1f} {args.device} hours at paper scale "
                    f"({estimate['trials']} trials{at_cap})",
                    flush=True,
                )
    rows = []
    for name, experiment in catalog.items():
        smoke = read_rows(results, name, "smoke")
        paper = read_rows(results, name, "paper")
        estimate, gpu = read_estimate(results, name), read_estimate(results, name, "cuda")
        configurations = {configuration_key(t.key): t.config for t in experiment.trials("paper", seeds=1)}
        rows.append(
            {
                "name": name,
                "source": experiment.source,
                "description": experiment.description,
                "file": str(experiment.path),
                "trials": {s: len(experiment.trials(s)) for s in SCALES if s in experiment.scales},
                "paper_done": sum(r["status"] == "done" for r in paper),
                "smoke_seconds": round(sum(r.get("wall_seconds", 0.0) for r in smoke), 1) if smoke else None,
                "paper_cpu_seconds": _total_seconds(estimate),
                "paper_gpu_seconds": _total_seconds(gpu),
                "diverged_in_probe": {device: [k for k, c in e["configurations"].items() if "diverged" in c]
                                      for device, e in (("cpu", estimate), ("cuda", gpu)) if e is not None},
                "not_estimated": {device: not_estimated(e, configurations)
                                  for device, e in (("cpu", estimate), ("cuda", gpu)) if e is not None},
                "unstated": experiment.scales["paper"].get("unstated"),
            }
        )

    def text(p: dict[str, Any]) -> str:
        lines = [
            f"{'experiment':<22} {'paper':>6} {'smoke':>6} {'done':>5} {'smoke s':>8} {'paper CPU h':>11} "
            f"{'GPU h':>6}  source"
        ]
        for r in p["experiments"]:
            smoke_s = "-" if r["smoke_seconds"] is None else f"{r['smoke_seconds']:.1f}"
            hours = "-" if r["paper_cpu_seconds"] is None else f"{r['paper_cpu_seconds'] / 3600:.1f}"
            hours += _estimate_marks(r, "cpu")
            gpu_hours = "-" if r["paper_gpu_seconds"] is None else f"{r['paper_gpu_seconds'] / 3600:.2f}"
            gpu_hours += _estimate_marks(r, "cuda")
            lines.append(
                f"{r['name']:<22} {r['trials']['paper']:>6} {r['trials']['smoke']:>6} {r['paper_done']:>5} "
                f"{smoke_s:>8} {hours:>11} {gpu_hours:>6}  {r['source']}"
            )
        lines.append(
            "trials per scale; done: paper-scale trials kept; smoke s: measured wall seconds of the kept "
            "smoke trials; paper CPU h / GPU h: measured estimates, one trial at a time "
            "(experiments --estimate [--device cuda]); *: some configurations diverged in their probe and "
            "count only their seconds to divergence (--json names them); +: the estimate predates some of "
            "the grid's configurations and leaves them out or timed them as they were configured then "
            "(not_estimated names them; --estimate again)"
        )
        return "\n".join(lines)

    emit(args, {"results": str(results), "experiments": rows}, text, lambda p: p["experiments"])
    return 0


def _estimate_marks(row: dict[str, Any], device: str) -> str:
    """``*`` where some configuration diverged in its probe on ``device``, ``+`` where the kept estimate
    leaves some of the grid's configurations out or timed them under another configuration."""
    return (("*" if row["diverged_in_probe"].get(device) else "")
            + ("+" if row["not_estimated"].get(device) else ""))


def _total_seconds(estimate: dict[str, Any] | None) -> float | None:
    """An estimate's paper-scale seconds in all (None without one)."""
    total = None if estimate is None else estimate.get("total_seconds")
    return None if total is None else round(total, 1)


def catalog_arguments(parser: argparse.ArgumentParser) -> None:
    """--catalog, --results and the output format."""
    parser.add_argument(
        "--catalog",
        default=None,
        help="catalog directory (default: the repository's experiments/ or $SPECTRAL_ANALYSIS_EXPERIMENTS)",
    )
    results_arguments(parser)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    listing = sub.add_parser("experiments", help="list the experiments catalog (trials per scale, cost)")
    listing.add_argument(
        "--estimate",
        nargs="*",
        metavar="NAME",
        default=None,
        help="first time a few paper-scale steps of these experiments (all when none named)",
    )
    listing.add_argument("--device", default="cpu", help="where --estimate times the steps: cpu or cuda")
    listing.add_argument("--ledger", action="store_true",
                         help="only write results/LEDGER.md again from the kept summaries (as run does)")
    listing.add_argument("--fitness", nargs="*", metavar="NAME", default=None,
                         help="only measure whether each kept trial is fit evidence (not diverged, not at "
                         "chance, not collapsed) and record it in its row and the summaries (all when none "
                         "named)")
    catalog_arguments(listing)
    listing.set_defaults(func=cmd_experiments)
