"""Tables as DataFrames and as the CSV / Markdown of ``--format``."""

import csv
import io
import json

import pandas as pd
import pytest

from spectral_analysis import tables
from spectral_analysis.cli import main


def test_frame_flattens_nested_rows_and_render_writes_csv_and_markdown():
    rows = [{"name": "a", "trials": {"paper": 3, "smoke": 1}, "note": "||W|| grows"},
            {"name": "b", "trials": {"paper": 6, "smoke": 2}, "note": None}]
    table = tables.frame(rows)
    assert list(table.columns) == ["name", "note", "trials.paper", "trials.smoke"]
    assert table["trials.paper"].tolist() == [3, 6]
    parsed = list(csv.DictReader(io.StringIO(tables.render(rows, "csv"))))
    assert parsed[0]["trials.smoke"] == "1" and parsed[0]["note"] == "||W|| grows"
    markdown = tables.render(rows, "md", columns=["name", "note"]).splitlines()
    assert markdown[0].count("|") == 3 and r"\|\|W\|\| grows" in markdown[2]  # cell pipes escaped
    with pytest.raises(ValueError, match="unknown table format"):
        tables.render(rows, "xlsx")


def test_tabular_commands_take_format_csv_and_json_stays_an_alias(capsys):
    assert main(["experiments", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {"name", "source", "trials.paper", "paper_done"} <= set(rows[0])
    assert "svdrnn-fig2-r" in {r["name"] for r in rows}
    assert main(["experiments", "--json"]) == 0
    names = [e["name"] for e in json.loads(capsys.readouterr().out)["experiments"]]
    assert names == [r["name"] for r in rows]
    assert main(["params", "--model", "rnn", "--inputs", "2", "--hidden", "4", "--outputs", "3",
                 "--format", "md"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("|")[1].strip() == "model" and "rnn" in lines[2]


def test_the_zoo_and_summaries_as_dataframes():
    zoo = tables.zoo()
    assert isinstance(zoo, pd.DataFrame) and {"name", "experiment", "scale"} <= set(zoo.columns)
    summary = tables.summary("svdrnn-fig2-r")
    variants = {"rnn", "ornn", "spectral-r0.01", "spectral-r0.1", "spectral-r0.5", "spectral-r1"}
    assert len(summary) == 18 and set(summary["variant"]) == variants
