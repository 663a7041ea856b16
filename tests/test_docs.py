"""The documentation: every Python example runs, the site builds strictly, the tutorials execute and
their notebooks hold their code, and the README stays a front page."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
NAV_ORDER = ["getting-started.md", "howto/analyze-your-model.md", "concepts/svd-map.md",
             "howto/constrain-any-weight.md", "concepts/models.md", "concepts/recipes.md",
             "concepts/tasks.md", "howto/train.md",
             "howto/experiments.md", "concepts/bounds.md", "concepts/jacobians.md", "concepts/linear-rnn.md",
             "howto/analyze.md", "howto/verify-a-formula.md", "figures.md", "reference/cli.md",
             "paper-checks.md", "reference/reliability.md"]


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def test_every_page_is_in_the_nav_and_the_readme_is_a_front_page():
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if p.parts[len(DOCS.parts)] not in
             ("figures", "paper_checks")}
    assert pages == {*NAV_ORDER, "index.md", "api.md", "benchmarks.md"}
    nav = (ROOT / "mkdocs.yml").read_text()
    assert all(page in nav for page in pages)
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 120
    assert all(f"docs/{page}" in readme for page in ("getting-started.md", "howto/analyze-your-model.md",
                                                     "concepts/bounds.md", "paper-checks.md"))


def test_every_python_example_runs(tmp_path):
    """The README's and every docs page's Python blocks, in reading order, in one namespace."""
    blocks = [(f"README block {i}", b) for i, b in enumerate(_python_blocks(ROOT / "README.md"), 1)]
    for page in NAV_ORDER:
        blocks += [(f"docs/{page} block {i}", b) for i, b in enumerate(_python_blocks(DOCS / page), 1)]
    assert len(blocks) >= 6
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        namespace: dict = {}
        for name, block in blocks:
            started = time.perf_counter()
            exec(compile(block, name, "exec"), namespace)  # noqa: S102
            assert time.perf_counter() - started < 30, f"{name} is slow"
    finally:
        os.chdir(cwd)


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
                    reason="the docs extra (mkdocs) is not installed")
@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    """``mkdocs build --strict``: a broken link, a missing API reference or a bad page fails."""
    mkdocs = Path(sys.executable).parent / "mkdocs"
    result = subprocess.run([str(mkdocs), "build", "--strict", "-d", str(tmp_path / "site")], cwd=ROOT,
                            capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    site = tmp_path / "site"
    benchmarks = (site / "benchmarks.html").read_text()
    assert "householder_cpu.json" in benchmarks and "generated:" not in benchmarks
    assert "svdrnn-fig2-r" in (site / "howto" / "experiments.html").read_text()
    # browsable from file://: every link to a page names its file (a folder opens as a listing there), and
    # the search index is a script a file:// page may load (Material's offline plugin)
    index = (site / "index.html").read_text()
    links = re.findall(r'href="([^"#:]+)"', index)
    assert "getting-started.html" in links and not [link for link in links if link.endswith("/")]
    assert (site / "search" / "search_index.js").is_file()


TUTORIALS = sorted((DOCS / "tutorials").glob("*.py"))


@pytest.mark.parametrize("script", TUTORIALS, ids=[t.stem for t in TUTORIALS])
@pytest.mark.slow
def test_the_tutorials_execute_and_their_notebooks_hold_their_code(script, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # a tutorial's runs (tempfile.mkdtemp) are the test's own
    jupytext = pytest.importorskip("jupytext")
    pytest.importorskip("nbclient")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from make_notebooks import executed_notebook
    finally:
        sys.path.pop(0)
    notebook = executed_notebook(script, timeout=300)
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    committed = jupytext.read(script.with_suffix(".ipynb"))

    def code(nb) -> list[str]:  # noqa: ANN001
        return [c.source for c in nb.cells if c.cell_type == "code"]

    assert code(committed) == code(notebook), f"regenerate: python scripts/make_notebooks.py {script.stem}"
    assert any(c.get("outputs") for c in committed.cells if c.cell_type == "code"), "no outputs committed"


API_MODULES = ["spectral_analysis", "spectral_analysis.tables", "spectral_analysis.nn.parametrize",
               "spectral_analysis.nn.registry", "spectral_analysis.analysis.certify",
               "spectral_analysis.analysis.unrolled_bound", "spectral_analysis.analysis.spectra",
               "spectral_analysis.analysis.bound_report", "spectral_analysis.analysis.jacobians",
               "spectral_analysis.analysis.posterior", "spectral_analysis.analysis.derandomize",
               "spectral_analysis.analysis.evaluation_store"]


@pytest.mark.parametrize("name", API_MODULES)
def test_the_api_examples_run(name):
    """The examples in the docstrings of the API reference's entry points (docs/api.md) are doctests."""
    import doctest
    import importlib

    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0, result
    page = (DOCS / "api.md").read_text()
    assert f"::: {name}" in page or name == "spectral_analysis"


def test_the_experiments_cost_table_is_the_listing_of_the_catalog_and_kept_results(capsys):
    """howto/experiments.md's table quotes `experiments --json`: one row per catalog entry, its trials,
    smoke seconds and estimated hours (a hand-timed figure only where no estimate is kept, footnoted; `+`
    where the estimate leaves configurations out), and an `all` row that sums the rows."""
    from spectral_analysis.cli import main

    assert main(["experiments", "--json"]) == 0
    listing = {e["name"]: e for e in json.loads(capsys.readouterr().out)["experiments"]}
    rows = [[c.strip() for c in line.split("|")[1:-1]]
            for line in (DOCS / "howto" / "experiments.md").read_text().splitlines()
            if line.startswith("| `") or line.startswith("| all |")]
    table = {r[0].strip("`"): r for r in rows[:-1]}
    assert sorted(table) == sorted(listing)

    def hours(cell: str) -> float | None:
        return None if cell == "-" else float(cell.rstrip("†‡*+"))

    for name, (_, _, _, trials, smoke, cpu, gpu) in table.items():
        entry = listing[name]
        assert cpu.endswith("+") == bool(entry["not_estimated"].get("cpu")), (name, cpu)  # a partial estimate
        assert trials == f"{entry['trials']['paper']} / {entry['trials']['smoke']}", name
        assert smoke == ("-" if entry["smoke_seconds"] is None else f"{entry['smoke_seconds']:.1f}"), name
        for cell, seconds in ((cpu, entry["paper_cpu_seconds"]), (gpu, entry["paper_gpu_seconds"])):
            if seconds is None:
                assert cell == "-" or cell[-1] in "†‡", (name, cell)
            else:
                assert hours(cell) == pytest.approx(seconds / 3600, abs=0.051), (name, cell)
    total = rows[-1]
    assert total[3] == (f"{sum(e['trials']['paper'] for e in listing.values())} / "
                        f"{sum(e['trials']['smoke'] for e in listing.values())}")
    assert float(total[4]) == pytest.approx(sum(float(r[4]) for r in table.values() if r[4] != "-"), abs=0.5)
    assert float(total[5]) == pytest.approx(sum(hours(r[5]) or 0.0 for r in table.values()), abs=0.5)


def test_only_the_papers_fixture_reads_outside_the_checkout():
    """`.ci/run`'s pass without ../shared/ runs only the tests marked `papers` (those using the fixture
    `papers_text`); that is the whole difference only while nothing else names the folder beside the
    checkout or the setting that points at it."""
    outside = re.compile(r"""["']shared["']|\.\./shared|SPECTRAL_ANALYSIS_PAPERS\b(?!``)""")
    readers = [str(path.relative_to(ROOT))
               for folder in ("spectral_analysis", "tests", "scripts", "paper_checks", "benchmarks", "docs")
               for path in sorted((ROOT / folder).rglob("*.py"))
               if outside.search(path.read_text()) and path.name != "conftest.py"
               and path != Path(__file__).resolve()]
    assert readers == []
