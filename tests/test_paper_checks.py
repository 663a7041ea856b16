"""The paper checks compute their verdicts; the figure script regenerates from the benchmark report."""

import importlib.util
import json
from pathlib import Path

from spectral_analysis.plotting import plot_householder_benchmark

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_svd_map_theorems_check_verdicts():
    results = {item["claim"].split(":")[0]: item for item in
               _load(ROOT / "paper_checks" / "svd_map_theorems.py").run()}
    assert results["Theorems 1-2"]["verdict"] == "HOLDS"
    assert results["Theorem 3"]["verdict"] == "HOLDS"
    assert results["Theorem 4"]["verdict"] == "HOLDS"
    eq18 = results["Proof of Theorem 3, Eq. (18)"]
    assert eq18["verdict"] == "DIFFERS" and "misses A by" in eq18["evidence"]
    assert results["Theorem 4 as printed"]["verdict"] == "DIFFERS"


def test_benchmark_figure_regenerates(tmp_path):
    report = ROOT / "benchmarks" / "householder_cpu.json"
    data = json.loads(report.read_text())
    assert {c["n"] for c in data["cases"]} == {128, 512, 1024}
    out = plot_householder_benchmark(report, tmp_path / "speed.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
