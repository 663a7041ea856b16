"""The experiments runner's cost: the same smoke grid run directly (each trial in this process, one after
another), and on Ray Tune with 1 and 2 workers, side by side in one run (repeats interleaved, medians).

- overhead per trial = (Ray wall time with 1 worker - Ray start - direct wall time) / trials;
- speed-up = Ray wall time with 2 workers / with 1 worker (the trials are independent).

    python benchmarks/bench_sweep.py [--experiment fig3-mnist] [--repeats 2] --out benchmarks/sweep_cpu.json
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import ray
import torch
from report import write_report

from spectral_analysis.experiments import find_experiment, run_sweep, run_trial
from spectral_analysis.experiments.runner import TrialSpec


def direct(name: str, root: Path) -> float:
    """Every smoke trial through run_trial in this process, one thread, as a Ray worker runs it."""
    clock = time.perf_counter()
    for trial in find_experiment(name).trials("smoke"):
        run_trial(
            TrialSpec(asdict(trial), str(root / "runs" / trial.key), str(root / "results"), "cpu", "bench")
        )
    return time.perf_counter() - clock


def on_ray(name: str, root: Path, workers: int) -> tuple[float, float]:
    """Wall time of the sweep with a local Ray of ``workers`` CPUs, and of starting that Ray."""
    clock = time.perf_counter()
    ray.init(
        num_cpus=workers,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        logging_level="WARNING",
    )
    started = time.perf_counter() - clock
    try:
        outcome = run_sweep(
            find_experiment(name),
            "smoke",
            workers=workers,
            out=root / "runs",
            results=root / "results",
            report=lambda _line: None,
        )
    finally:
        ray.shutdown()
    assert not outcome.failed and len(outcome.ran) == len(outcome.rows)
    return time.perf_counter() - clock, started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="fig3-mnist")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    trials = len(find_experiment(args.experiment).trials("smoke"))
    times: dict[str, list[float]] = {"direct": [], "ray1": [], "ray2": [], "ray_start": []}
    for _ in range(args.repeats):
        for kind in ("direct", "ray1", "ray2"):
            with tempfile.TemporaryDirectory() as tmp:
                if kind == "direct":
                    times["direct"].append(direct(args.experiment, Path(tmp)))
                else:
                    wall, started = on_ray(args.experiment, Path(tmp), int(kind[-1]))
                    times[kind].append(wall)
                    times["ray_start"].append(started)
            print(kind, f"{times[kind][-1]:.1f} s", flush=True)
    median = {k: statistics.median(v) for k, v in times.items()}
    case = {
        "experiment": args.experiment,
        "trials": trials,
        "repeats": args.repeats,
        **{f"{k}_seconds": round(v, 2) for k, v in median.items()},
        "overhead_per_trial_seconds": round(
            (median["ray1"] - median["ray_start"] - median["direct"]) / trials, 3
        ),
        "two_workers_over_one": round(median["ray2"] / median["ray1"], 3),
        "all_seconds": times,
    }
    print(case)
    write_report(
        args.out, "cpu", "experiments runner: direct vs Ray Tune with 1 and 2 workers (wall seconds)", [case]
    )


if __name__ == "__main__":
    main()
