"""The compute ledger, ``results/LEDGER.md``, generated from the kept summaries: per experiment and
scale, trials done / planned, how many of the done ones trained to a plateau (no improvement of the
validation metric over their last 20% of steps), failed, how many done ones the catalog now asks to
train on (a ``max_steps`` given after they ended without a plateau), how many unfinished ones are parked
(:mod:`~spectral_analysis.experiments.parking`; a failed trial's parked state, kept for ``--retry-failed``,
is counted as failed, not parked), training seconds per trial (median and
total), the device and machine they ran on, and the date of the last one; at paper scale also the CPU
hours its trials not yet kept would take by ``estimate_cpu.json`` (at the minimum steps and at the
``max_steps`` cap). Every experiment's paper scale has a row, begun or not. Rewritten at the end of
every sweep."""

from __future__ import annotations

import statistics
from pathlib import Path

from spectral_analysis.atomic import atomic_write_text
from spectral_analysis.experiments.estimate import read_estimate
from spectral_analysis.experiments.grid import Experiment, Trial, configuration_key
from spectral_analysis.experiments.parking import parked_trials
from spectral_analysis.experiments.results import read_rows
from spectral_analysis.experiments.row_status import kept_row_stands, plateaued
from spectral_analysis.vocabulary import SCALES

LEDGER_NAME = "LEDGER.md"


def cpu_hours_left(results: str | Path, experiment: str, left: list[Trial]) -> tuple[float, float] | None:
    """Estimated CPU hours of the ``left`` paper-scale trials, at their minimum steps and at their cap, from
    ``estimate_cpu.json`` (a parked trial counts whole); None without an estimate or with a trial it lacks."""
    configurations = (read_estimate(results, experiment) or {}).get("configurations", {})
    timings = [configurations.get(configuration_key(t.key)) for t in left]
    if not configurations or None in timings:
        return None
    return (sum(c["estimated_seconds"] for c in timings) / 3600,
            sum(c.get("estimated_seconds_at_cap", c["estimated_seconds"]) for c in timings) / 3600)


def ledger_rows(results: str | Path, catalog: dict[str, Experiment]) -> list[dict]:
    rows = []
    for name, experiment in catalog.items():
        for scale in SCALES:
            kept, parked = read_rows(results, name, scale), parked_trials(results, name, scale)
            if not kept and not parked and scale != "paper":
                continue
            done = [r for r in kept if r["status"] == "done"]
            trials = {t.key: t for t in experiment.trials(scale)}
            kept_keys = {r["trial"] for r in kept}
            left = [t for key, t in trials.items() if key not in kept_keys]
            stale = [r for r in done if r["trial"] in trials and not kept_row_stands(r, trials[r["trial"]])]
            seconds = [r["seconds"] for r in done if r.get("seconds") is not None]
            rows.append(
                {
                    "experiment": name,
                    "scale": scale,
                    "done": len(done),
                    "plateaued": sum(bool(plateaued(r)) for r in done),
                    "planned": len(trials),
                    "failed": sum(r["status"] == "failed" for r in kept),
                    "to_train_on": len(stale),
                    "parked": len(set(parked) - kept_keys),
                    "median_seconds": statistics.median(seconds) if seconds else None,
                    "total_seconds": sum(seconds),
                    "devices": sorted({r["device"] for r in done}),
                    "machines": sorted({r["machine"] for r in done}),
                    "last": max((r["finished_at"] for r in kept), default=""),
                    "cpu_hours_left": (cpu_hours_left(results, name, left)
                                       if scale == "paper" and left else None),
                }
            )
    return rows


def write_ledger(results: str | Path, catalog: dict[str, Experiment]) -> Path:
    """Write ``results/LEDGER.md`` from the kept rows of every experiment of ``catalog``."""
    rows = ledger_rows(results, catalog)
    lines = [
        "# Compute ledger",
        "",
        "Generated from the kept summaries by `spectral-analysis run` and `park` (do not edit by hand). "
        "Seconds are "
        "the trainer's training seconds per trial (evaluation excluded). Plateaued: done trials whose "
        "validation metric last improved (by more than the trial's `plateau_min_delta`, where its catalog "
        "sets one) before their last 20% of steps (the paper-scale criterion). "
        "To train on: done trials that no longer stand for the catalog's entry (another configuration, "
        "or a longer run than they made); the next `spectral-analysis run` trains them again, or on from "
        "their run directory where it holds their run. Parked: unfinished trials whose "
        "resumable state is kept in `<experiment>/<scale>/parked/` (`spectral-analysis park`), where the "
        "next run resumes them. CPU h left: the paper-scale trials not kept yet (parked ones counted "
        "whole) by the experiment's `estimate_cpu.json`, at the minimum steps - at the "
        "`max_steps` cap; one CPU core per trial.",
        "",
        "| experiment | scale | done / planned | plateaued | failed | to train on | parked "
        "| s per trial (median) | s in all | CPU h left | device | machine | last trial |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        median = "-" if r["median_seconds"] is None else f"{r['median_seconds']:.1f}"
        hours = r["cpu_hours_left"]
        left = ("-" if hours is None
                else f"{hours[0]:.1f}" + (f" - {hours[1]:.1f}" if hours[1] > hours[0] else ""))
        lines.append(
            f"| {r['experiment']} | {r['scale']} | {r['done']} / {r['planned']} "
            f"| {r['plateaued']} / {r['done']} | {r['failed']} | {r['to_train_on']} | {r['parked']} "
            f"| {median} "
            f"| {r['total_seconds']:.0f} | {left} | {', '.join(r['devices'])} | {'; '.join(r['machines'])} "
            f"| {r['last']} |"
        )
    path = Path(results) / LEDGER_NAME
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path
