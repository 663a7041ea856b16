"""Execute the tutorials (``docs/tutorials/*.py``, jupytext percent format) and write each as a
notebook with its outputs (``docs/tutorials/*.ipynb``), which the docs site renders.

Run: ``python scripts/make_notebooks.py [NAME ...]`` (``make notebooks``); the test suite executes
the same scripts and checks that the notebooks hold their code.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import jupytext
from nbclient import NotebookClient

TUTORIALS = Path(__file__).resolve().parents[1] / "docs" / "tutorials"


def executed_notebook(script: Path, timeout: int = 600):  # noqa: ANN201 (an nbformat NotebookNode)
    """The tutorial as a notebook, executed in a scratch directory."""
    notebook = jupytext.read(script)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    with tempfile.TemporaryDirectory() as scratch:
        NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": scratch}}).execute()
    return notebook


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="tutorial names (default: all)")
    args = parser.parse_args()
    scripts = [TUTORIALS / f"{n}.py" for n in args.names] or sorted(TUTORIALS.glob("*.py"))
    for script in scripts:
        notebook = executed_notebook(script)
        jupytext.write(notebook, script.with_suffix(".ipynb"))
        print(f"wrote {script.with_suffix('.ipynb')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
