"""The benchmarks' reports, drawn and tabulated: the Householder-product figure, and every
``benchmarks/*.json`` as Markdown (the docs' benchmarks page is generated from the files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from spectral_analysis.plotting.paper_figures import styled


@styled()
def plot_householder_benchmark(report: str | Path, ax: plt.Axes | None = None) -> plt.Axes:
    """Bars of forward + backward time relative to one n x n matmul, per (n, m) and method, on ``ax``
    (default: a new figure)."""
    data = json.loads(Path(report).read_text())
    cases = data["cases"]
    labels = [f"n={c['n']}\nm={c['m']}" for c in cases]
    blocked = [c["blocked_over_matmul"] for c in cases]
    sequential = [c["blocked_over_matmul"] * c["sequential_over_blocked"] for c in cases]
    torch_ref = [c["blocked_over_matmul"] * c["torch_over_blocked"] for c in cases]
    if ax is None:
        _, ax = plt.subplots(figsize=(12, 4.2))
    width = 0.27
    xs = range(len(cases))
    for offset, values, name in ((-width, blocked, "blocked compact WY (ours)"),
                                 (0.0, torch_ref, "torch.linalg.householder_product"),
                                 (width, sequential, "sequential rank-one updates")):
        ax.bar([x + offset for x in xs], values, width, label=name)
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label="one n x n matmul")
    ax.set_yscale("log")
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("fwd + bwd time / matmul fwd + bwd")
    machine = data["machine"]
    ax.set_title(f"Product of m Householder reflectors ({data['dtype']}, {machine['device']}, "
                 f"{machine['threads']} threads, torch {machine['torch']})", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "benchmarks"  # the checkout's benchmark reports


def _flat(case: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A case with its nested dicts spread into ``outer.inner`` keys, floats to 3 significant digits."""
    flat: dict[str, Any] = {}
    for key, value in case.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = f"{value:.3g}" if isinstance(value, float) else value
    return flat


def benchmark_markdown(path: str | Path) -> str:
    """One benchmark report (``benchmarks/NAME.json``) as Markdown: what it measures, on which machine,
    and its cases, every number read from the file (a single case as a quantity-value table).

    ```python
    >>> print(benchmark_markdown(BENCHMARKS_DIR / "jacobians_cpu.json").splitlines()[2])
    | quantity | value |

    ```
    """
    from spectral_analysis.tables import render

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no benchmark report at {path}: its benchmarks/bench_*.py --out writes it")
    data = json.loads(path.read_text())
    machine = data.get("machine", {})
    where = ", ".join(f"{k} {v}" for k, v in machine.items() if v not in (None, ""))
    cases = [_flat(case) for case in data.get("cases", [])]
    table = (render([{"quantity": k, "value": v} for k, v in cases[0].items()], "md") if len(cases) == 1
             else render(cases, "md"))
    return f"{data.get('what', '')} ({data.get('dtype', '')}); {where}.\n\n{table}"


def benchmarks_markdown(directory: str | Path) -> str:
    """One section per ``*.json`` report of ``directory`` (:func:`benchmark_markdown`)."""
    return "\n".join(f"### `{path.name}`\n\n{benchmark_markdown(path)}"
                     for path in sorted(Path(directory).glob("*.json")))
