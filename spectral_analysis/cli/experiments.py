"""``spectral-analysis experiments``, ``run``, ``zoo`` and ``figures``: the catalog, the Ray Tune runner,
the kept models and the figures drawn from kept results."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectral_analysis.cli.common import CommandError, add_output_arguments, emit, show_progress
from spectral_analysis.vocabulary import SCALES, SWEEP_BACKENDS

if TYPE_CHECKING:
    from spectral_analysis.experiments import Experiment


def _results(args: argparse.Namespace) -> Path:
    from spectral_analysis.io import default_results_dir

    return Path(args.results) if args.results else default_results_dir()


def cmd_experiments(args: argparse.Namespace) -> int:
    from spectral_analysis.experiments import load_catalog, read_rows
    from spectral_analysis.experiments.estimate import estimate_experiment, read_estimate

    catalog = load_catalog(args.catalog)
    results = _results(args)
    if args.ledger:
        from spectral_analysis.experiments.ledger import write_ledger

        print(f"wrote {write_ledger(results, catalog)}", flush=True)
        return 0
    if args.estimate is not None:
        for name in args.estimate or list(catalog):
            if name not in catalog:
                raise CommandError(f"unknown experiment {name!r}; the catalog has {sorted(catalog)}")
            estimate = estimate_experiment(catalog[name], results, device=args.device)
            if not args.json:
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
            diverged = r["diverged_in_probe"]
            hours = "-" if r["paper_cpu_seconds"] is None else f"{r['paper_cpu_seconds'] / 3600:.1f}"
            hours += "*" if diverged.get("cpu") else ""
            gpu_hours = "-" if r["paper_gpu_seconds"] is None else f"{r['paper_gpu_seconds'] / 3600:.2f}"
            gpu_hours += "*" if diverged.get("cuda") else ""
            lines.append(
                f"{r['name']:<22} {r['trials']['paper']:>6} {r['trials']['smoke']:>6} {r['paper_done']:>5} "
                f"{smoke_s:>8} {hours:>11} {gpu_hours:>6}  {r['source']}"
            )
        lines.append(
            "trials per scale; done: paper-scale trials kept; smoke s: measured wall seconds of the kept "
            "smoke trials; paper CPU h / GPU h: measured estimates, one trial at a time "
            "(experiments --estimate [--device cuda]); *: some configurations diverged in their probe and "
            "count only their seconds to divergence (--json names them)"
        )
        return "\n".join(lines)

    emit(args, {"results": str(results), "experiments": rows}, text, lambda p: p["experiments"])
    return 0


def _total_seconds(estimate: dict[str, Any] | None) -> float | None:
    """An estimate's paper-scale seconds in all (None without one)."""
    total = None if estimate is None else estimate.get("total_seconds")
    return None if total is None else round(total, 1)


def _only(pairs: list[str] | None) -> dict[str, str] | None:
    """``--only`` as ``{key: "a,b"}``: a key given twice (``variant=a variant=b``) matches either value."""
    if not pairs:
        return None
    only: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise CommandError(f"--only takes KEY=VALUE (e.g. variant=spectral, length=300), got {pair!r}")
        only[key] = f"{only[key]},{value}" if key in only else value
    return only


def named_sweeps(catalog: dict[str, Experiment], names: list[str], scale: str) -> list[tuple[str, str]]:
    """``(experiment, scale)`` for each name a ``run`` or ``park`` is given: ``NAME`` at ``scale``,
    ``NAME@SCALE`` at its own; ``all`` alone is every experiment that has ``scale``. (The runner refuses
    an experiment named twice.)"""
    if names == ["all"]:
        return [(n, scale) for n in catalog if scale in catalog[n].scales]
    pairs = []
    for name in names:
        experiment, _, own = name.rpartition("@") if "@" in name else (name, "", scale)
        if own not in SCALES:
            raise CommandError(f"{name!r}: unknown scale {own!r}; NAME@SCALE takes one of {list(SCALES)}")
        pairs.append((experiment, own))
    unknown = [n for n, _ in pairs if n not in catalog]
    if unknown:
        raise CommandError(f"unknown experiment(s) {unknown}; the catalog has {sorted(catalog)} (or all)")
    for wanted in dict.fromkeys(s for _, s in pairs):
        lacking = [n for n, s in pairs if s == wanted and wanted not in catalog[n].scales]
        if lacking:
            having = [n for n in catalog if wanted in catalog[n].scales]
            raise CommandError(f"experiment(s) {lacking} have no {wanted!r} scale; those that do: {having}")
    return pairs


def cmd_run(args: argparse.Namespace) -> int:
    from spectral_analysis.experiments import load_catalog, run_sweeps

    catalog = load_catalog(args.catalog)
    sweeps = named_sweeps(catalog, args.names, args.scale)
    report = (lambda _line: None) if args.json else (lambda line: print(line, flush=True))
    outcomes = run_sweeps(
        [(catalog[name], scale) for name, scale in sweeps],
        args.scale,
        seeds=args.seeds,
        only=_only(args.only),
        workers=args.workers,
        gpus_per_trial=args.gpus_per_trial,
        address=args.address,
        backend=args.backend,
        out=args.out,
        results=_results(args),
        time_budget=args.time_budget,
        retry_failed=args.retry_failed,
        tensorboard=args.tensorboard,
        report=report,
    )
    sweeps = [
        {
            "experiment": outcome.experiment,
            "scale": outcome.scale,
            "ran": outcome.ran,
            "skipped": outcome.skipped,
            "unfinished": outcome.unfinished,
            "failed": {r["trial"]: r["error"] for r in outcome.rows if r["status"] == "failed"},
            "kept": len(outcome.rows),
            "seconds": round(outcome.seconds, 1),
            "results": str(_results(args) / outcome.experiment / outcome.scale),
        }
        for outcome in outcomes
    ]

    def text(p: dict[str, Any]) -> str:
        lines = []
        for s in p["sweeps"]:
            lines += [
                f"{s['experiment']} ({s['scale']}): ran {len(s['ran'])}, skipped {len(s['skipped'])} "
                f"already kept, {len(s['unfinished'])} unfinished, {len(s['failed'])} failed",
                f"  results: {s['results']} (summary.csv, summary.json; {s['kept']} trials kept)",
            ]
            lines += [f"  failed {trial}: {error}" for trial, error in s["failed"].items()]
            if s["unfinished"]:
                lines.append(
                    "  unfinished (time budget): " + ", ".join(s["unfinished"]) + "; rerun the same "
                    "command to resume them"
                )
        if p["sweeps"]:  # one grid for all: its wall time
            lines.append(f"in {p['sweeps'][0]['seconds']:.1f} s")
        return "\n".join(lines)

    emit(args, {"sweeps": sweeps}, text, lambda p: p["sweeps"])
    return 0


def cmd_park(args: argparse.Namespace) -> int:
    from spectral_analysis.experiments import load_catalog, park_sweeps

    catalog = load_catalog(args.catalog)
    sweeps = named_sweeps(catalog, args.names, args.scale)
    lines = park_sweeps([(catalog[name], scale) for name, scale in sweeps], args.scale, seeds=args.seeds,
                        only=_only(args.only), out=args.out, results=_results(args))
    payload = {"parked": lines, "results": str(_results(args))}
    emit(args, payload, lambda p: "\n".join(p["parked"]) or f"no unfinished run directory under {args.out}",
         lambda p: [{"line": line} for line in p["parked"]])
    return 0


def cmd_zoo_check(args: argparse.Namespace) -> int:
    import sys

    from spectral_analysis.analysis.zoo_check import check_zoo

    def tick(row: dict[str, Any]) -> None:
        if show_progress(args):
            outcome = "ok" if row["ok"] else row["error"]
            print(f"{row['name']}: {outcome} ({row['seconds']} s)", file=sys.stderr)

    rows = check_zoo(_results(args), args.experiment, samples=args.samples, report=tick)

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

    emit(args, {"results": str(_results(args)), "entries": rows}, text, lambda p: p["entries"])
    return 1 if any(not r["ok"] for r in rows) else 0


def cmd_zoo(args: argparse.Namespace) -> int:
    from spectral_analysis.io import zoo_entries

    if args.check:
        return cmd_zoo_check(args)
    entries = [
        e for e in zoo_entries(_results(args)) if not args.experiment or e["experiment"] == args.experiment
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

    emit(args, {"results": str(_results(args)), "entries": rows}, text, lambda p: p["entries"])
    return 0


def cmd_figures(args: argparse.Namespace) -> int:
    from spectral_analysis.plotting.results_figures import READERS, draw_figures

    if args.experiment and args.experiment not in READERS:
        raise CommandError(
            f"no figure is drawn from {args.experiment!r}; figures come from {sorted(READERS)}"
        )
    drawn = draw_figures(_results(args), Path(args.out), [args.experiment] if args.experiment else None,
                         progress=show_progress(args))
    if not args.experiment:
        from spectral_analysis.plotting.reproduction import write_reproduction

        path = write_reproduction(_results(args), Path(args.out), [Path(r) for r in args.readme or []])
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


def grid_arguments(parser: argparse.ArgumentParser) -> None:
    """--scale, --seeds and --only: which trials of the named experiments (``run`` and ``park``)."""
    parser.add_argument("--scale", choices=SCALES, default="smoke",
                        help="smoke (CI's sizes), paper (the papers' sizes, until plateau) or budget (the "
                        "paper's sizes for a stated CPU budget, where the paper scale needs a GPU); all: "
                        "every experiment that has the scale")
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds per configuration (default: the scale's)")
    parser.add_argument(
        "--only",
        nargs="+",
        action="extend",
        metavar="KEY=VALUE",
        help="only trials whose variant, seed or axis matches (variant=spectral, length=300, seed=0); "
             "several values of a key match any (variant=spectral,lstm); a second --only adds to the first",
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:

    def common(parser: argparse.ArgumentParser, catalog: bool = True) -> None:
        """--catalog, --results and the output format (every one of these commands prints a table)."""
        if catalog:
            parser.add_argument(
                "--catalog",
                default=None,
                help="catalog directory (default: the repository's "
                "experiments/ or $SPECTRAL_ANALYSIS_EXPERIMENTS)",
            )
        parser.add_argument(
            "--results",
            default=None,
            help="results directory (default: the repository's results/ or $SPECTRAL_ANALYSIS_RESULTS)",
        )
        add_output_arguments(parser, tabular=True)

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
    common(listing)
    listing.set_defaults(func=cmd_experiments)

    run = sub.add_parser("run", help="run an experiment's grid on Ray Tune and keep its results")
    run.add_argument(
        "names",
        nargs="+",
        metavar="NAME",
        help="experiment name(s), or all (spectral-analysis experiments lists them); several run in "
        "one Ray session as one grid; NAME@SCALE runs that one at SCALE instead of --scale "
        "(table2-mnist@budget kru-copy --scale paper)",
    )
    grid_arguments(run)
    run.add_argument(
        "--workers", type=int, default=1, help="trials at a time on a local Ray (CPUs it may use)"
    )
    run.add_argument("--gpus-per-trial", type=float, default=0.0, help="GPU share of each trial (e.g. 0.25)")
    run.add_argument(
        "--address",
        default=None,
        help="join this Ray cluster (default: $RAY_ADDRESS, else a local Ray started and stopped here)",
    )
    run.add_argument("--backend", choices=SWEEP_BACKENDS, default="ray",
                     help="processes: plain local processes instead of Ray, for a machine without Ray")
    run.add_argument("--out", default="runs", help="run directories go to OUT/<experiment>/<scale>/<trial>")
    run.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="checkpoint and stop every trial after this many seconds; rerun to resume",
    )
    run.add_argument("--retry-failed", action="store_true", help="run the trials kept as failed again")
    run.add_argument("--tensorboard", action="store_true", help="every trial also writes TensorBoard event "
                     "files into its run directory (tensorboard --logdir OUT/NAME)")
    common(run)
    run.set_defaults(func=cmd_run)

    park = sub.add_parser(
        "park",
        help="keep the resumable state of a stopped sweep's unfinished trials beside the results "
        "(results/<experiment>/<scale>/parked/), where the next run on any checkout resumes them",
    )
    park.add_argument("names", nargs="+", metavar="NAME",
                      help="experiment name(s) of the sweep (NAME@SCALE as run takes them), or all")
    grid_arguments(park)
    park.add_argument("--out", default="runs", help="the sweep's run directories (run's --out)")
    common(park)
    park.set_defaults(func=cmd_park)

    zoo = sub.add_parser(
        "zoo", help="list the kept models (zoo:<experiment>/<trial> names for the analyzers)"
    )
    zoo.add_argument("--experiment", default=None)
    zoo.add_argument("--check", action="store_true", help="load every entry and run the analyzers on it "
                     "(spectra; analyze with G(w) for recurrent models); exit 1 if any fails")
    zoo.add_argument("--samples", type=int, default=2, help="with --check: test sequences per analysis")
    common(zoo, catalog=False)
    zoo.set_defaults(func=cmd_zoo)

    figures = sub.add_parser("figures", help="draw the papers' figures from kept results (never trains)")
    figures.add_argument("--experiment", default=None, help="only the figure of this experiment")
    figures.add_argument("--out", default="figures", help="output directory (default figures/)")
    figures.add_argument("--readme", action="append", default=None, metavar="FILE",
                         help="also regenerate this file's <!-- reproduction:begin/end --> block (every row) "
                         "or <!-- reproduction-kept:begin/end --> block (paper and budget scale); repeatable")
    common(figures, catalog=False)
    figures.set_defaults(func=cmd_figures)
