"""The experiments runner's cost: the same smoke grid run directly (each trial in this process, one after
another), and on Ray Tune with 1 and 2 workers, side by side in one run (repeats interleaved, medians).

- overhead per trial = (Ray wall time with 1 worker - Ray start - direct wall time) / trials;
- speed-up = Ray wall time with 2 workers / with 1 worker (the trials are independent), beside the
  machine's own floor: the same trials split over two plain processes (no Ray) / one process.

Two grids: the catalog's fig3-mnist at smoke scale (20 trials of under a second: the fixed costs show) and
``benchmarks/sweep_catalog/bench-grid.toml`` (8 trials of a few seconds: the parallel speed-up shows).

    python benchmarks/bench_sweep.py [--repeats 2] --out benchmarks/sweep_cpu.json
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import ray
import torch
from report import write_report

from spectral_analysis.experiments import find_experiment, run_sweep, run_trial
from spectral_analysis.experiments.trial import TrialSpec

BENCH_CATALOG = Path(__file__).resolve().parent / "sweep_catalog"


def direct(name: str, catalog: Path | None, root: Path, part: int = 0, parts: int = 1) -> float:
    """The smoke trials (every ``parts``-th from ``part``) through run_trial in this process, one thread,
    as a Ray worker runs them."""
    torch.set_num_threads(1)
    clock = time.perf_counter()
    for trial in find_experiment(name, catalog).trials("smoke")[part::parts]:
        run_trial(
            TrialSpec(asdict(trial), str(root / "runs" / trial.key), str(root / "results"), "cpu", "bench")
        )
    return time.perf_counter() - clock


def on_ray(name: str, catalog: Path | None, root: Path, workers: int) -> tuple[float, float]:
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
            find_experiment(name, catalog),
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


def measure(name: str, catalog: Path | None, repeats: int) -> dict:
    trials = len(find_experiment(name, catalog).trials("smoke"))
    times: dict[str, list[float]] = {
        "direct": [],
        "two_processes": [],
        "ray1": [],
        "ray2": [],
        "ray_start": [],
    }
    for _ in range(repeats):
        for kind in ("direct", "two_processes", "ray1", "ray2"):
            with tempfile.TemporaryDirectory() as tmp:
                if kind == "direct":
                    times["direct"].append(direct(name, catalog, Path(tmp)))
                elif kind == "two_processes":  # the machine's own parallel floor, no Ray
                    clock = time.perf_counter()
                    with multiprocessing.get_context("spawn").Pool(2) as pool:
                        pool.starmap(direct, [(name, catalog, Path(tmp) / str(k), k, 2) for k in range(2)])
                    times["two_processes"].append(time.perf_counter() - clock)
                else:
                    wall, started = on_ray(name, catalog, Path(tmp), int(kind[-1]))
                    times[kind].append(wall)
                    times["ray_start"].append(started)
            print(name, kind, f"{times[kind][-1]:.1f} s", flush=True)
    median = {k: statistics.median(v) for k, v in times.items()}
    overhead = (median["ray1"] - median["ray_start"] - median["direct"]) / trials
    return {
        "experiment": name,
        "trials": trials,
        "repeats": repeats,
        **{f"{k}_seconds": round(v, 2) for k, v in median.items()},
        "overhead_per_trial_seconds": round(overhead, 3),
        "two_workers_over_one": round(median["ray2"] / median["ray1"], 3),
        "all_seconds": times,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cases = [measure("fig3-mnist", None, args.repeats), measure("bench-grid", BENCH_CATALOG, args.repeats)]
    for case in cases:
        print({k: v for k, v in case.items() if k != "all_seconds"})
    write_report(
        args.out, "cpu", "experiments runner: direct vs Ray Tune with 1 and 2 workers (wall seconds)", cases
    )


if __name__ == "__main__":
    main()
