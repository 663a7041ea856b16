"""What every benchmark writes: the machine it ran on and its cases, as one JSON report."""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable

import torch

from spectral_analysis.allocator import keep_freed_memory
from spectral_analysis.machine import machine_name


def machine_info(device: str) -> dict:
    """The machine a benchmark ran on: its CPU (or GPU) by name, platform, threads, torch, the UTC date."""
    machine = {"machine": machine_name(device), "platform": platform.platform(),
               "processor": platform.processor(), "threads": torch.get_num_threads(),
               "torch": torch.__version__, "device": device, "date": time.strftime("%Y-%m-%d", time.gmtime())}
    if device.startswith("cuda"):
        machine["gpu"] = torch.cuda.get_device_name()
    return machine


def write_report(path: str | None, device: str, what: str, cases: list[dict]) -> None:
    """Write ``{"machine", "dtype", "what", "cases"}`` to ``path`` (nothing when ``path`` is None)."""
    if path:
        with open(path, "w") as f:
            json.dump({"machine": machine_info(device), "dtype": "float32", "what": what, "cases": cases},
                      f, indent=2)


def seconds(fn: Callable[[], object], repeats: int) -> float:
    """The median wall time of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def interleaved_medians(routes: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Each route's median wall time over ``repeats`` rounds that call every route in turn, after one
    warm-up call each: side by side, so a noisy machine slows all routes alike."""
    for fn in routes.values():
        fn()
    times: dict[str, list[float]] = {route: [] for route in routes}
    for _ in range(repeats):
        for route, fn in routes.items():
            start = time.perf_counter()
            fn()
            times[route].append(time.perf_counter() - start)
    return {route: sorted(v)[len(v) // 2] for route, v in times.items()}


def side_by_side(label: dict[str, object], routes: dict[str, Callable[[], object]], repeats: int,
                 ratios: dict[str, tuple[str, str]]) -> dict:
    """One case of a benchmark: ``label``'s fields, the routes' :func:`interleaved_medians` under
    ``"seconds"`` and each ratio ``name: (numerator, denominator)`` of two timed routes (a ratio whose
    route was not timed is left out); printed as one line."""
    med = interleaved_medians(routes, repeats)
    case = {**label, "seconds": med}
    case |= {name: med[top] / med[bottom] for name, (top, bottom) in ratios.items()
             if top in med and bottom in med}
    print(", ".join(f"{key} = {value}" for key, value in label.items()) + ": "
          + ", ".join(f"{route} {s:.3f} s" for route, s in med.items())
          + "".join(f"; {name} {case[name]:.2f}x" for name in ratios if name in case), flush=True)
    return case


def sequence_cases(cases: list[tuple[str, int, int, int]],
                   routes_for: Callable[[int, int, int], dict[str, Callable[[], torch.Tensor]]], repeats: int,
                   ratios: dict[str, tuple[str, str]], slowest: str, skip_above: int) -> list[dict]:
    """:func:`side_by_side` for each ``(task, N, T, B)`` of ``cases``: forward + backward (of the mean
    square) of each of ``routes_for(N, T, B)``'s forward routes, the ``slowest`` route left out where
    ``T > skip_above``."""
    timed_cases = []
    for task, n, T, B in cases:
        forward = routes_for(n, T, B)
        routes = {name: (lambda f=f: f().square().mean().backward()) for name, f in forward.items()}
        if skip_above < T:
            del routes[slowest]
        timed_cases.append(side_by_side({"task": task, "N": n, "T": T, "B": B}, routes, repeats, ratios))
    return timed_cases


def saved_bytes(fn: Callable[[], object]) -> int:
    """Bytes of the tensors autograd keeps for the backward pass while ``fn`` runs, each storage once:
    the activation memory of a training step, which wall-clock noise does not touch."""
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn()
    return sum(storages.values())


def benchmark_parser(doc: str, repeats: int) -> argparse.ArgumentParser:
    """The flags every benchmark takes, ``--repeats`` and ``--out``; described by ``doc``'s first line."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--out", default=None)
    return parser


def as_in_training() -> None:
    """One thread, freed memory kept (``allocator.keep_freed_memory``) and seed 0, as a sweep's trainer
    runs: otherwise page faults, not the routes, are timed."""
    torch.set_num_threads(1)
    keep_freed_memory()
    torch.manual_seed(0)
