"""MkDocs hook: pages hold markers that the build replaces with tables generated from the
repository's files, so the site never shows a typed number (benchmarks, catalog, paper checks)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _benchmarks() -> str:
    from spectral_analysis.plotting.benchmarks import benchmarks_markdown

    return benchmarks_markdown(ROOT / "benchmarks")


def _catalog() -> str:
    from spectral_analysis.experiments import load_catalog
    from spectral_analysis.tables import render

    rows = [{"experiment": e.name, "source": e.source, "paper trials": len(e.trials("paper")),
             "what": e.description} for e in load_catalog().values()]
    return render(rows, "md")


def _paper_checks() -> str:
    text = (ROOT / "paper_checks" / "report_quick.md").read_text()
    return text.split("\n", 1)[1]  # the report without its own title


GENERATED = {"benchmarks": _benchmarks, "catalog": _catalog, "paper-checks": _paper_checks}


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (MkDocs' hook signature)
    for name, make in GENERATED.items():
        marker = f"<!-- generated:{name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
