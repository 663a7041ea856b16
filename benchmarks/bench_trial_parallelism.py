"""How a paper-scale sweep should use the machine's cores: training throughput (steps a second, all
processes together) of one trial configuration run as

- ``1x1``: one process, one thread (what the estimates time);
- ``2x1``: two processes of one thread each, side by side (``--workers 2``, what ``make paper`` does);
- ``1x2``: one process of two threads (one worker whose trial uses both cores).

Each process builds the trial's trainer at paper size (seed 0) and times ``--steps`` training steps after
two warm-up steps (no checkpoint written); the processes of one arrangement start together.
Arrangements are interleaved over ``--repeats`` and the medians kept.

    python benchmarks/bench_trial_parallelism.py fig5-depth/spectral-mlp_num_layers70 \\
        kru-adding/kru_length400 table3-ptb/spectral-2x512 --out benchmarks/trial_parallelism_cpu.json
"""

from __future__ import annotations

import multiprocessing
import queue
import statistics
import tempfile
import time
from pathlib import Path

import torch
from report import benchmark_parser, write_report

from spectral_analysis.allocator import keep_freed_memory
from spectral_analysis.experiments import find_experiment
from spectral_analysis.train import Trainer

ARRANGEMENTS = {"1x1": (1, 1), "2x1": (2, 1), "1x2": (1, 2)}  # processes x threads
WARM_UP = 2  # steps before the clock starts


def _trainer(configuration: str, out: Path, device: str, recurrence: str | None) -> Trainer:
    name, key = configuration.split("/", 1)
    trials = [t for t in find_experiment(name).trials("paper") if t.key == f"{key}_s0"]
    if not trials:
        raise SystemExit(f"{configuration}: no paper-scale trial {key}_s0 in {name}")
    config = trials[0].train_config(out, device=device)
    if recurrence is not None:  # the time-loop route, in place of the catalog's
        config.model_options = {**config.model_options, "recurrence": recurrence}
    return Trainer(config, resume=False)


def _steps_per_second(configuration: str, threads: int, steps: int, start: object, out: object,
                      device: str, recurrence: str | None) -> None:
    torch.set_num_threads(threads)
    keep_freed_memory()
    with tempfile.TemporaryDirectory() as scratch:
        trainer = _trainer(configuration, Path(scratch) / "run", device, recurrence)
        trainer.config.checkpoint_every = 10**9
        stamps: list[float] = []
        start.wait()
        trainer.run(callback=lambda _step: stamps.append(time.perf_counter()),
                    stop=lambda step: step >= WARM_UP + steps)
        out.put(steps / (stamps[-1] - stamps[WARM_UP - 1]))


def throughput(configuration: str, processes: int, threads: int, steps: int, device: str = "cpu",
               recurrence: str | None = None) -> float:
    """Steps a second of all ``processes`` together (on ``device``, by time-loop route ``recurrence``)."""
    context = multiprocessing.get_context("spawn")
    start, out = context.Barrier(processes), context.Queue()
    workers = [context.Process(target=_steps_per_second,
                               args=(configuration, threads, steps, start, out, device, recurrence))
               for _ in range(processes)]
    for worker in workers:
        worker.start()
    rates: list[float] = []
    while len(rates) < processes:
        try:
            rates.append(out.get(timeout=5))
        except queue.Empty:  # a process that died (its traceback is above) sends nothing
            dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            if dead:
                for worker in workers:
                    worker.terminate()
                raise SystemExit(f"{configuration}: a benchmark process ended with exit code {dead[0]} "
                                 "before its steps were timed (its traceback is above)") from None
    for worker in workers:
        worker.join()
    return sum(rates)


def main() -> None:
    parser = benchmark_parser(__doc__, repeats=2)
    parser.add_argument("configurations", nargs="+", metavar="EXPERIMENT/KEY")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    cases = []
    for configuration in args.configurations:
        rates: dict[str, list[float]] = {name: [] for name in ARRANGEMENTS}
        for _ in range(args.repeats):
            for name, (processes, threads) in ARRANGEMENTS.items():
                rates[name].append(throughput(configuration, processes, threads, args.steps))
        median = {name: statistics.median(values) for name, values in rates.items()}
        case = {"configuration": configuration, "steps": args.steps, "repeats": args.repeats,
                "steps_per_second": {k: round(v, 4) for k, v in median.items()},
                "two_workers_over_one": round(median["2x1"] / median["1x1"], 3),
                "two_threads_over_one": round(median["1x2"] / median["1x1"], 3),
                "all_steps_per_second": rates}
        print(case["configuration"], case["steps_per_second"], flush=True)
        cases.append(case)
    write_report(args.out, "cpu", "paper-scale trial throughput: 1 process x 1 thread, 2 x 1, 1 x 2 "
                 "(steps a second, all processes together)", cases)


if __name__ == "__main__":
    main()
