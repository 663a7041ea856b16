"""Tabular results as pandas DataFrames, and the CSV / Markdown the command line prints (faces layer).

Every tabular result of the toolkit is a list of flat or nested dicts (zoo entries, catalog rows,
check records, bounds rows, sweep summaries); :func:`frame` turns one into a DataFrame (nested keys
become ``parent.child`` columns) and :func:`render` into ``csv`` or ``md`` text. The named helpers
give the toolkit's own tables directly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

TABLE_FORMATS = ("csv", "md")


def frame(rows: Iterable[dict[str, Any]], columns: Iterable[str] | None = None) -> pd.DataFrame:
    """The rows as a DataFrame; nested dicts flattened to ``a.b`` columns, lists kept as cells.

    ```python
    >>> frame([{"model": "rnn", "test": {"mse": 0.1}}]).columns.tolist()
    ['model', 'test.mse']

    ```
    """
    table = pd.json_normalize(list(rows))
    if columns is not None:
        table = table.reindex(columns=list(columns))
    return table


def render(rows: Iterable[dict[str, Any]], fmt: str, columns: Iterable[str] | None = None) -> str:
    """``csv`` (RFC 4180, header first) or ``md`` (a GitHub Markdown table) text of the rows; a cell
    holding a list or a dict is written as JSON.

    ```python
    >>> print(render([{"model": "rnn", "mse": 0.5}], "csv"), end="")
    model,mse
    rnn,0.5

    ```
    """
    if fmt not in TABLE_FORMATS:
        raise ValueError(f"unknown table format {fmt!r}; expected one of {TABLE_FORMATS}")
    table = frame(rows, columns).map(lambda v: json.dumps(v) if isinstance(v, list | dict) else v)
    if fmt == "csv":
        return table.to_csv(index=False)
    escaped = table.map(lambda v: v.replace("|", "\\|") if isinstance(v, str) else v)  # a cell's |: no border
    return escaped.to_markdown(index=False) + "\n"


def zoo(results: str | Path | None = None) -> pd.DataFrame:
    """The kept checkpoints (``spectral-analysis zoo``), one row each."""
    from spectral_analysis.io import zoo_entries

    return frame(zoo_entries(results))


def summary(experiment: str, scale: str = "paper", results: str | Path | None = None) -> pd.DataFrame:
    """An experiment's kept trials at ``scale``: one row per trial (configuration, metrics, seconds)."""
    from spectral_analysis.experiments import read_rows
    from spectral_analysis.io import default_results_dir

    return frame(read_rows(results or default_results_dir(), experiment, scale))


def checks(records: Iterable[Any]) -> pd.DataFrame:
    """Check records (paper checks, symbolic checks), one row each."""
    return frame(r.as_dict() for r in records)


def bounds(checkpoints: Iterable[str], certificates: tuple[str, ...] = ()) -> pd.DataFrame:
    """``spectral-analysis bounds-table``: every bound of each checkpoint beside its errors."""
    from spectral_analysis.analysis.bounds_table import COLUMNS, bounds_row

    return frame((bounds_row(name, certificates) for name in checkpoints), COLUMNS)
