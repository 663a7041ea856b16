"""``spectral-analysis calibrate``: a grid's baselines beside their plain-PyTorch references, before the
grid's compute is spent (:mod:`~spectral_analysis.experiments.calibration`)."""

from __future__ import annotations

import argparse
import math

from spectral_analysis.cli.common import CommandError, count, emit, positive_real, results_dir
from spectral_analysis.cli.experiments import catalog_arguments
from spectral_analysis.vocabulary import CALIBRATION_MARGIN, SCALES

COLUMNS = ("variant", "model", "steps", "toolkit_loss", "reference_loss", "constant_predictor_loss", "metric",
           "toolkit_valid", "reference_valid", "verdict")


def diverged_sides(row: dict) -> list[str]:
    """The sides of a calibration row whose training loss is infinite (``toolkit``, ``reference``)."""
    return [side for side in ("toolkit", "reference") if not math.isfinite(row[f"{side}_loss"])]


def verdict_text(row: dict) -> str:
    """A calibration's verdict in words beside its kept word: by how much a trailing baseline trails, and
    which side diverged (its training loss infinite).

    Example: ``verdict_text({"verdict": "inconclusive", "toolkit_loss": inf, "reference_loss": inf})`` is
    ``"inconclusive: both sides diverged"``."""
    diverged = diverged_sides(row)
    if row["verdict"] == "trails":
        return ("TRAILS: the toolkit diverged where the reference learned" if diverged else
                f"TRAILS: short of {row['shortfall']:.0%} of the reference's gain")
    if len(diverged) == 2:
        return f"{row['verdict']}: both sides diverged"
    words = {"ok": "ok", "inconclusive": "inconclusive: neither side learned"}[row["verdict"]]
    return f"{words} (the {diverged[0]} diverged)" if diverged else words


def cmd_calibrate(args: argparse.Namespace) -> int:
    from spectral_analysis.cli.sweeps import selection
    from spectral_analysis.experiments import load_catalog
    from spectral_analysis.experiments.calibration import CALIBRATION_DIR, calibrate
    from spectral_analysis.tables import render

    catalog = load_catalog(args.catalog)
    if args.name not in catalog:
        raise CommandError(f"unknown experiment {args.name!r}; the catalog has {sorted(catalog)}")
    experiment = catalog[args.name]
    if args.scale not in experiment.scales:
        raise CommandError(f"{args.name!r} has no {args.scale!r} scale; it has {sorted(experiment.scales)}")
    results = results_dir(args)
    try:
        rows = calibrate(experiment, args.scale, args.steps, args.margin, results, args.variant, args.seeds,
                         selection(args.at, "--at"))
    except ValueError as error:
        raise CommandError(str(error)) from error
    trailing = [row["variant"] for row in rows if row["verdict"] == "trails"]
    unsettled = [row["variant"] for row in rows if row["verdict"] == "inconclusive"]
    diverging = [row["variant"] for row in rows if len(diverged_sides(row)) == 2]
    for row in rows:
        row["verdict_text"] = verdict_text(row)
    kept = results / experiment.name / CALIBRATION_DIR / args.scale

    def table_rows(payload: dict) -> list[dict]:
        return [{**{k: r[k] for k in COLUMNS}, "verdict": r["verdict_text"]} for r in payload["rows"]]

    def text(payload: dict) -> str:
        lines = [render(table_rows(payload), "md", COLUMNS),
                 f"training loss: the mean over the last quarter of {args.steps} steps"
                 f"{f' and over seeds 0-{args.seeds - 1}' if args.seeds > 1 else ''}, on the same batches; "
                 f"kept in {kept}"]
        if trailing:
            lines.append(f"refused: {', '.join(trailing)} fall(s) short of the plain-PyTorch reference's "
                         f"gain over the constant predictor by more than {args.margin:.0%}; mend the recipe "
                         f"before spending compute on {experiment.name}")
        if diverging:
            lines.append(f"not calibrated: both sides of {', '.join(diverging)} diverged, so the recipe "
                         "diverges in plain PyTorch too; mend it (a smaller learning rate, gradient "
                         "clipping)")
        unlearned = [variant for variant in unsettled if variant not in diverging]
        if unlearned:
            lines.append(f"not calibrated: neither side of {', '.join(unlearned)} learned in {args.steps} "
                         "steps (no training loss below the task's constant-predictor loss); give more "
                         "--steps")
        return "\n".join(lines)

    emit(args, {"experiment": experiment.name, "scale": args.scale, "margin": args.margin,
                "refused": trailing, "inconclusive": unsettled, "rows": rows}, text,
         table_rows)
    return 1 if trailing or unsettled else 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("calibrate", help="train each baseline of a grid briefly beside a plain-PyTorch "
                            "reference of its recipe; refuse the grid where one trails")
    parser.add_argument("name", metavar="NAME",
                        help="the experiment (spectral-analysis experiments lists them)")
    parser.add_argument("--scale", choices=SCALES, default="paper",
                        help="the grid whose recipes to calibrate")
    parser.add_argument("--steps", type=count(1, 10 ** 6), default=200, help="training steps of each side")
    parser.add_argument("--variant", action="append", metavar="LABEL", help="calibrate only this baseline of "
                        "the grid (repeatable; default: every baseline with a reference)")
    parser.add_argument("--seeds", type=count(1, 20), default=1,
                        help="calibrate seeds 0..K-1 of each baseline's first grid point and compare the two "
                        "sides' means (a take-off task varies by more than the margin from seed to seed)")
    parser.add_argument("--at", nargs="+", metavar="KEY=VALUE",
                        help="calibrate at the first grid point with these axis values instead of the grid's "
                        "first (task=permuted-mnist pixels_per_step=1), kept beside it as VARIANT@POINT.json")
    parser.add_argument("--margin", type=positive_real(10.0), default=CALIBRATION_MARGIN,
                        help="the share of the reference's fall below the constant predictor's loss that the "
                        "toolkit's training loss may fall short of (or the at-chance tolerance of the "
                        "reference's loss, whichever is larger)")
    catalog_arguments(parser)
    parser.set_defaults(func=cmd_calibrate)
