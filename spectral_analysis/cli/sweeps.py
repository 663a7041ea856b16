"""``spectral-analysis run``, ``stop`` and ``park``: the Ray Tune runner that trains a catalog grid and keeps
its results, and the clean stop and parking of an unfinished sweep."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from spectral_analysis.cli.common import (
    CommandError,
    add_output_arguments,
    count,
    emit,
    output_format,
    real,
    results_dir,
)
from spectral_analysis.cli.experiments import catalog_arguments
from spectral_analysis.cli.tune_options import search_domains, tune_callbacks
from spectral_analysis.vocabulary import MAX_SEEDS, SCALES, SWEEP_BACKENDS

if TYPE_CHECKING:
    from spectral_analysis.experiments import Experiment


def selection(pairs: list[str] | None, flag: str = "--only") -> dict[str, str] | None:
    """``--only`` (or ``flag``) as ``{key: "a,b"}``: a key given twice (``variant=a variant=b``) matches
    either value."""
    if not pairs:
        return None
    only: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise CommandError(f"{flag} takes KEY=VALUE (e.g. variant=spectral, length=300), got {pair!r}")
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
    report = (lambda _line: None) if output_format(args) != "text" else (lambda line: print(line, flush=True))
    if args.backend == "ray":
        from spectral_analysis.experiments.ray_grid import joining_environment

        joining_environment(args.address)  # before the Tune options below import Ray
    scheduler = None
    if args.scheduler == "asha":
        from spectral_analysis.experiments.ray_grid import asha

        scheduler = asha(args.grace_period, args.reduction_factor)
    search_space = search_domains(args.search) if args.search else None
    callbacks = tune_callbacks(args.tune_callback) if args.tune_callback else []
    outcomes = run_sweeps(
        [(catalog[name], scale) for name, scale in sweeps],
        args.scale,
        seeds=args.seeds,
        only=selection(args.only),
        workers=args.workers,
        threads_per_trial=args.threads_per_trial,
        gpus_per_trial=args.gpus_per_trial,
        address=args.address,
        backend=args.backend,
        out=args.out,
        results=results_dir(args),
        time_budget=args.time_budget,
        retry_failed=args.retry_failed,
        tensorboard=args.tensorboard,
        scheduler=scheduler,
        search_space=search_space,
        num_samples=args.samples,
        tune_callbacks=callbacks,
        max_failures=args.max_failures,
        despite_calibration=args.despite_calibration,
        retrain_unkept_models=args.retrain_unkept_models,
        report=report,
    )
    sweeps = [
        {
            "experiment": outcome.experiment,
            "scale": outcome.scale,
            "ran": outcome.ran,
            "skipped": outcome.skipped,
            "held": outcome.held,
            "unfinished": outcome.unfinished,
            "failed": {r["trial"]: r["error"] for r in outcome.rows if r["status"] == "failed"},
            "stopped": {r["trial"]: r["error"] for r in outcome.rows if r["status"] == "stopped"},
            "promoted": outcome.promoted,
            "kept": len(outcome.rows),
            "seconds": round(outcome.seconds, 1),
            "results": str(results_dir(args) / outcome.experiment / outcome.scale),
        }
        for outcome in outcomes
    ]

    def text(p: dict[str, Any]) -> str:
        lines = []
        for s in p["sweeps"]:
            lines += [
                f"{s['experiment']} ({s['scale']}): ran {len(s['ran'])}, skipped {len(s['skipped'])} "
                f"already kept, {len(s['unfinished'])} unfinished, {len(s['failed'])} failed"
                + (f", {len(s['stopped'])} stopped early by the scheduler" if s["stopped"] else ""),
                f"  results: {s['results']} (summary.csv, summary.json; {s['kept']} trials kept)",
            ]
            lines += [f"  failed {trial}: {error}" for trial, error in s["failed"].items()]
            if s["promoted"]:
                lines.append(f"  the zoo now keeps the model of {', '.join(s['promoted'])} "
                             "(a lower seed failed)")
            lines += [f"  held back: {why} ({', '.join(k for k, w in s['held'].items() if w == why)})"
                      for why in dict.fromkeys(s["held"].values())]
            if s["unfinished"]:
                lines.append(
                    "  unfinished (stopped by the time budget, `stop` or an interrupt): "
                    + ", ".join(s["unfinished"]) + "; rerun the same command to resume them (after an "
                    "interrupt, `spectral-analysis park` keeps their state in the results directory)"
                )
        if p["sweeps"]:  # one grid for all: its wall time
            lines.append(f"in {p['sweeps'][0]['seconds']:.1f} s")
        return "\n".join(lines)

    emit(args, {"sweeps": sweeps}, text, lambda p: p["sweeps"])
    return 1 if any(s["failed"] for s in sweeps) else 0  # a failed trial fails the command (and is kept)


def cmd_park(args: argparse.Namespace) -> int:
    from spectral_analysis.experiments import load_catalog, park_sweeps

    catalog = load_catalog(args.catalog)
    sweeps = named_sweeps(catalog, args.names, args.scale)
    lines = park_sweeps([(catalog[name], scale) for name, scale in sweeps], args.scale, seeds=args.seeds,
                        only=selection(args.only), out=args.out, results=results_dir(args))
    payload = {"parked": lines, "results": str(results_dir(args))}
    emit(args, payload, lambda p: "\n".join(p["parked"]) or f"no unfinished run directory under {args.out}",
         lambda p: [{"line": line} for line in p["parked"]])
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from spectral_analysis.experiments import request_stop

    path = request_stop(args.out)
    emit(args, {"request": str(path)},
         lambda p: f"asked the sweeps training into {args.out} to stop ({p['request']}): each running trial "
         "checkpoints at its next step and parks itself, and no trial starts after it; rerun the same "
         "`run` to resume them")
    return 0


def grid_arguments(parser: argparse.ArgumentParser) -> None:
    """--scale, --seeds and --only: which trials of the named experiments (``run`` and ``park``)."""
    parser.add_argument("--scale", choices=SCALES, default="smoke",
                        help="smoke (CI's sizes), paper (the papers' sizes, until plateau) or budget (the "
                        "paper's sizes for a stated CPU budget, where the paper scale needs a GPU); all: "
                        "every experiment that has the scale")
    parser.add_argument("--seeds", type=count(1, MAX_SEEDS), default=None,
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
        "--workers", type=count(1, 1024), default=1, help="trials at a time (on a local Ray or as processes)"
    )
    run.add_argument("--threads-per-trial", type=count(1, 1024), default=1,
                     help="torch threads (and Ray CPUs) of each trial; the global --threads sets the "
                          "command's own, not its trials'")
    run.add_argument("--gpus-per-trial", type=real, default=0.0, help="GPU share of each trial (e.g. 0.25)")
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
        type=real,
        default=None,
        metavar="SECONDS",
        help="checkpoint and stop every trial after this many seconds; rerun to resume",
    )
    run.add_argument("--retry-failed", action="store_true", help="run the trials kept as failed again")
    run.add_argument("--retrain-unkept-models", action="store_true",
                     help="train again the done trials whose network the scale keeps for every seed "
                          "(keep_models) but results/ lacks, kept before the scale kept them; the rerun "
                          "replaces their row")
    run.add_argument("--tensorboard", action="store_true", help="every trial also writes TensorBoard event "
                     "files into its run directory (tensorboard --logdir OUT/NAME)")
    run.add_argument("--scheduler", choices=("asha",), default=None,
                     help="asha: Tune's ASHA ends the weak trials early, ranked at each rung by valid_score "
                     "(the primary validation metric, higher is better); kept as stopped, rerun with "
                     "--retry-failed to resume them")
    run.add_argument("--grace-period", type=count(1, 10 ** 6), default=1, metavar="EVALUATIONS",
                     help="ASHA's first rung, in validation evaluations (default 1)")
    run.add_argument("--reduction-factor", type=count(2, 100), default=3,
                     help="ASHA keeps the top 1/N of each rung (default 3)")
    run.add_argument("--search", nargs="+", metavar="PATH=DOMAIN:ARGS", default=None,
                     help="a Tune search over configuration fields at every grid point: "
                     "lr=loguniform:1e-4:1e-2, hidden=choice:64,128, model_options.r=uniform:0.01:0.1, "
                     "hidden=randint:32:129; each draw is a trial named by its values")
    run.add_argument("--samples", type=count(1, 10 ** 4), default=1,
                     help="draws of --search at every grid point")
    run.add_argument("--tune-callback", nargs="+", metavar="LOGGER[:KEY=VALUE,...]", default=None,
                     help="Tune logger callbacks beside Tune's own CSV, JSON and TensorBoard files (which go "
                     "to OUT/.tune/<sweep>-<started>/): wandb, mlflow, comet or aim (the package installed), "
                     "or package.module:Class; options as KEY=VALUE pairs: mlflow:experiment_name=rnn,"
                     "tracking_uri=file:./mlruns")
    run.add_argument("--max-failures", type=count(0, 100), default=0,
                     help="restart a trial whose worker was lost (killed, its node gone) up to N times, "
                     "from the Tune checkpoint of its last evaluation (default 0)")
    run.add_argument("--despite-calibration", action="store_true",
                     help="run the baselines whose kept calibration trails their plain-PyTorch reference "
                     "with the grid's recipe (held back by default: spectral-analysis calibrate)")
    catalog_arguments(run)
    run.set_defaults(func=cmd_run)

    stop = sub.add_parser(
        "stop",
        help="stop the sweeps training into OUT cleanly now, as their time budget would: each running "
        "trial checkpoints and parks, no trial starts after it",
    )
    stop.add_argument("--out", default="runs", help="the sweeps' run directories (run's --out)")
    add_output_arguments(stop)
    stop.set_defaults(func=cmd_stop)

    park = sub.add_parser(
        "park",
        help="keep the resumable state of a stopped sweep's unfinished trials beside the results "
        "(results/<experiment>/<scale>/parked/), where the next run on any checkout resumes them",
    )
    park.add_argument("names", nargs="+", metavar="NAME",
                      help="experiment name(s) of the sweep (NAME@SCALE as run takes them), or all")
    grid_arguments(park)
    park.add_argument("--out", default="runs", help="the sweep's run directories (run's --out)")
    catalog_arguments(park)
    park.set_defaults(func=cmd_park)
