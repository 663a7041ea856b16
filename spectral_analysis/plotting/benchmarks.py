"""The benchmarks' reports, drawn and tabulated: the Householder-product figure, and every
``benchmarks/*.json`` as Markdown (the docs' benchmarks page is generated from the files)."""

from __future__ import annotations

import json
from pathlib import Path

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


def benchmarks_markdown(directory: str | Path) -> str:
    """One section per ``*.json`` report of ``directory``: what it measures, on which machine, and its
    cases as a table (every number read from the file)."""
    from spectral_analysis.tables import render

    sections = []
    for path in sorted(Path(directory).glob("*.json")):
        data = json.loads(path.read_text())
        machine = data.get("machine", {})
        where = ", ".join(f"{k} {v}" for k, v in machine.items() if v not in (None, ""))
        what = f"{data.get('what', '')} ({data.get('dtype', '')}); {where}."
        sections += [f"### `{path.name}`", "", what, "", render(data.get("cases", []), "md"), ""]
    return "\n".join(sections)
