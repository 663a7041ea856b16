"""``spectral-analysis zoo`` and ``figures``: what the kept results give, the models to analyze by name
and the papers' figures and tables (neither trains)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from spectral_analysis.cli.common import (
    CommandError,
    count,
    emit,
    results_arguments,
    results_dir,
    show_progress,
)


def cmd_zoo_check(args: argparse.Namespace) -> int:
    from spectral_analysis.analysis.zoo_check import check_zoo

    def tick(row: dict[str, Any]) -> None:
        if show_progress(args):
            outcome = "ok" if row["ok"] else row["error"]
            print(f"{row['name']}: {outcome} ({row['seconds']} s)", file=sys.stderr)

    rows = check_zoo(results_dir(args), args.experiment, samples=args.samples, report=tick)

    def text(p: dict[str, Any]) -> str:
        lines = [f"{'name':<52} {'model':<15} {'checked':<24} {'log10 G':>8} {'s':>6}"]
        for r in p["entries"]:
            checked = r.get("analyzed", "") if r["ok"] else "FAILED: " + r["error"]
            log_g = "-" if r.get("log10_G") is None else f"{r['log10_G']:.2f}"
            lines.append(
                f"{r['name']:<52} {r['model'] or '?':<15} {checked:<24} {log_g:>8} {r['seconds']:>6.2f}"
            )
        failed = sum(not r["ok"] for r in p["entries"])
        lines.append(f"{len(p['entries']) - failed} of {len(p['entries'])} entries load and analyze"
                     + (f"; {failed} failed" if failed else ""))
        return "\n".join(lines)

    emit(args, {"results": str(results_dir(args)), "entries": rows}, text, lambda p: p["entries"])
    return 1 if any(not r["ok"] for r in rows) else 0


def cmd_zoo(args: argparse.Namespace) -> int:
    from spectral_analysis.io import zoo_entries

    if args.check:
        return cmd_zoo_check(args)
    entries = [
        e for e in zoo_entries(results_dir(args)) if not args.experiment or e["experiment"] == args.experiment
    ]
    rows = []
    for e in entries:
        row = e["row"]
        metric = row.get("metric")
        rows.append(
            {
                "name": e["name"],
                "model": row.get("model"),
                "hidden": row.get("hidden"),
                "task": row.get("task"),
                "scale": e["scale"],
                "metric": metric,
                "test": (row.get("test_metrics") or {}).get(metric),
                "steps": row.get("steps"),
                "path": e["path"],
            }
        )

    def text(p: dict[str, Any]) -> str:
        if not p["entries"]:
            return f"the zoo in {p['results']} is empty: spectral-analysis run NAME keeps models there"
        lines = [f"{'name':<52} {'model':<15} {'n':>4} {'task':<15} {'steps':>6}  test"]
        for r in p["entries"]:
            test = "-" if r["test"] is None else f"{r['metric']} {r['test']:.4g}"
            lines.append(
                f"{r['name']:<52} {r['model'] or '?':<15} {r['hidden'] or 0:>4} {r['task'] or '?':<15} "
                f"{r['steps'] or 0:>6}  {test}"
            )
        lines.append("analyze any of them by name, e.g. spectral-analysis bound " + p["entries"][0]["name"])
        return "\n".join(lines)

    emit(args, {"results": str(results_dir(args)), "entries": rows}, text, lambda p: p["entries"])
    return 0


def cmd_figures(args: argparse.Namespace) -> int:
    from spectral_analysis.plotting.results_figures import READERS, draw_figures

    if args.experiment and args.experiment not in READERS:
        raise CommandError(
            f"no figure is drawn from {args.experiment!r}; figures come from {sorted(READERS)}"
        )
    drawn = draw_figures(results_dir(args), Path(args.out), [args.experiment] if args.experiment else None,
                         progress=show_progress(args))
    if not args.experiment:
        from spectral_analysis.plotting.reproduction import write_reproduction

        path = write_reproduction(results_dir(args), Path(args.out), [Path(r) for r in args.readme or []])
        drawn.append({"path": str(path), "experiment": "all", "scale": "paper and smoke",
                      "note": "the papers' numbers beside ours"})
    payload = {"figures": drawn}

    def text(p: dict[str, Any]) -> str:
        return (
            "\n".join(
                f"{d['path']}: {d['experiment']} ({d['scale']} scale{', ' + d['note'] if d['note'] else ''})"
                for d in p["figures"]
            )
            or "no figure drawn: no kept results (spectral-analysis run NAME)"
        )

    emit(args, payload, text, lambda p: p["figures"])
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    zoo = sub.add_parser(
        "zoo", help="list the kept models (zoo:<experiment>/<trial> names for the analyzers)"
    )
    zoo.add_argument("--experiment", default=None)
    zoo.add_argument("--check", action="store_true", help="load every entry and run the analyzers on it "
                     "(spectra; analyze with G(w) for recurrent models); exit 1 if any fails")
    zoo.add_argument("--samples", type=count(1, 10 ** 4), default=2,
                     help="with --check: test sequences per analysis")
    results_arguments(zoo)
    zoo.set_defaults(func=cmd_zoo)

    figures = sub.add_parser("figures", help="draw the papers' figures from kept results (never trains)")
    figures.add_argument("--experiment", default=None, help="only the figure of this experiment")
    figures.add_argument("--out", default="figures", help="output directory (default figures/)")
    figures.add_argument("--readme", action="append", default=None, metavar="FILE",
                         help="also regenerate every generated block of this page (<!-- NAME:begin/end -->: "
                         "the reproduction table and its README summary, each figure's checks, grid tables, "
                         "the demo's numbers, benchmark reports; spectral_analysis.plotting.docs_blocks); "
                         "repeatable")
    results_arguments(figures)
    figures.set_defaults(func=cmd_figures)
