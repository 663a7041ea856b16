"""The runner's second backend: a grid of trials in plain local processes (``--backend processes``), for a
machine without Ray, such as a lent GPU machine whose image has torch but no Ray. The trials, what is kept
of them, the time budget, parking and resume are the runner's own (:func:`run_trial`), the same as on Ray;
what this backend lacks is a cluster and Ray's memory monitor.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

from spectral_analysis.allocator import ALLOCATOR_ENVIRONMENT
from spectral_analysis.experiments.ray_grid import spec_id
from spectral_analysis.experiments.row_status import outcome_text


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` set in this process's environment (which spawned workers inherit) while the block
    runs, and the environment as it was afterwards."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run_processes(
    specs: list[dict[str, Any]], trial: Callable[[dict[str, Any]], dict[str, Any]], workers: int,
    report: Callable[[str], None], finished: Callable[[str], None],
) -> dict[str, str]:
    """Run ``trial`` on each spec in ``workers`` spawned processes, in the specs' order as workers free up;
    returns each ended trial's status by ``experiment/key``. A trial is handed to a worker only when one
    is free, so Ctrl+C (which the running trials get too) starts nothing more. A worker that dies (killed
    for memory, say) ends the pool: the trials that ended keep their status, the others count unfinished
    and a rerun resumes them from their last checkpoint."""
    statuses: dict[str, str] = {}
    queued = iter(specs)
    context = multiprocessing.get_context("spawn")  # CUDA cannot run in a forked child
    # each worker's glibc reads the memory policy from the environment it starts with (as on Ray); the
    # pool starts workers as trials are handed out, so the policy stays set until it has shut down
    with _environment(ALLOCATOR_ENVIRONMENT), ProcessPoolExecutor(max_workers=workers,
                                                                  mp_context=context) as pool:
        running: dict[Future, dict[str, Any]] = {}

        def hand_out() -> None:
            spec = next(queued, None)
            if spec is not None:
                running[pool.submit(trial, spec)] = spec

        for _ in range(workers):
            hand_out()
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                spec = running.pop(future)
                try:
                    row = future.result()
                except BrokenProcessPool as error:
                    report(f"the sweep stopped: a worker process died ({error}); "
                           f"{len(specs) - len(statuses)} trial(s) unfinished, rerun to resume them")
                    return statuses
                except Exception as error:  # noqa: BLE001 (run_trial records a trial's own failures)
                    statuses[spec_id(spec)] = f"error: {type(error).__name__}: {error}"
                    text = statuses[spec_id(spec)]
                else:
                    statuses[spec_id(spec)] = row["status"]
                    text = outcome_text(row)
                report(f"[{len(statuses)}/{len(specs)}] {spec_id(spec)}: {text}")
                finished(spec["trial"]["experiment"])
                hand_out()
    return statuses
