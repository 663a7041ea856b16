"""The reproduction table: the papers' numbers beside ours, generated from results/ into the README."""

import json
import math
import re
from functools import partial
from pathlib import Path

import pytest

from spectral_analysis.plotting.reproduction import (
    SUMMARY_ROWS,
    experimental_records,
    reproduction_markdown,
    summary_markdown,
    write_reproduction,
)

ROOT = Path(__file__).resolve().parents[1]


ROW = re.compile(r"^\| (.+?) \| (.+?) \| (.+?) \| (.+?) \| (.+?) \| (.+?) \| (.+?) \|$", flags=re.M)


def _rows(text: str) -> list[tuple[str, str, str, str, str]]:
    """(source, the paper's value, the verdict of a figure row, scale and seeds, plateaued) of every table
    row."""
    return [(m[0], m[1], m[2] if m[2].startswith("**") else "", m[4], m[5]) for m in ROW.findall(text)
            if m[0] != "source" and not m[0].startswith("-")]


@pytest.fixture(scope="module")
def records():
    """The figures' checks, run once for the module (they rebuild Fig. 5's nets: about 15 s)."""
    return experimental_records()


@pytest.mark.slow
def test_the_docs_block_is_what_the_results_give(records):
    readme = (ROOT / "docs" / "figures.md").read_text()
    block = readme.split("<!-- reproduction:begin -->", 1)[1].split("<!-- reproduction:end -->", 1)[0]
    fresh = reproduction_markdown(ROOT / "results", records)
    assert _rows(block) == _rows(fresh), "regenerate: spectral-analysis figures --readme docs/figures.md"


def test_the_readme_summary_is_the_headline_rows_the_results_give(records):
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- reproduction-summary:begin -->", 1)[1]
    block = block.split("<!-- reproduction-summary:end -->")[0]
    assert block.strip() == summary_markdown(ROOT / "results", records), \
        "regenerate: spectral-analysis figures --readme README.md"
    rows = [line.split(" | ") for line in block.strip().splitlines()[2:]]
    assert [row[0].removeprefix("| ") for row in rows] == list(SUMMARY_ROWS) and len(rows) == 13
    # each is the full table's row (its first four cells), at the paper scale where the result has two
    every = reproduction_markdown(ROOT / "results", records, kept_only=True).splitlines()
    for row in rows:
        assert any(line.startswith(" | ".join(row[:3])) for line in every), row[0]
    lstm = next(i for i, row in enumerate(rows) if row[0] == "| Table 2, lstm (n_h = 128)")
    assert rows[lstm][4].startswith("paper")
    # the baseline the stated recipe leaves untrained stands beside the same network by the field's recipe
    assert "the field's recipe" in rows[lstm + 1][0] and rows[lstm + 1][4].startswith("paper")


def test_a_summary_row_the_results_no_longer_give_is_named(tmp_path, records, monkeypatch):
    from spectral_analysis.plotting import reproduction

    monkeypatch.setattr(reproduction, "SUMMARY_ROWS", ("Table 9, a row no grid has",))
    with pytest.raises(ValueError, match="'Table 9, a row no grid has' is not in the reproduction table"):
        reproduction.summary_markdown(ROOT / "results", records)


def test_every_figure_check_is_under_its_figure_on_the_figures_page(records):
    from spectral_analysis.plotting.docs_blocks import CHECKS_PREFIX, FIGURE_CHECKS, figure_checks_markdown

    page = (ROOT / "docs" / "figures.md").read_text()
    shown = []
    for figure in FIGURE_CHECKS:
        name = CHECKS_PREFIX + figure
        assert f"<!-- {name}:begin -->" in page, f"docs/figures.md has no {name} block"
        block = page.split(f"<!-- {name}:begin -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
        assert block.strip() == figure_checks_markdown(records, figure), \
            "regenerate: spectral-analysis figures --readme docs/figures.md"
        shown += [line for line in block.strip().splitlines()]
    # every experimental check is under exactly one figure, so no verdict is stated twice or left out
    assert len(shown) == len(records)


def test_the_demo_numbers_in_the_docs_are_the_kept_demo_run():
    from spectral_analysis.plotting.docs_blocks import demo_markdown, read_demo_record

    page = (ROOT / "docs" / "howto" / "analyze.md").read_text()
    block = page.split("<!-- demo:begin -->", 1)[1].split("<!-- demo:end -->", 1)[0]
    kept = read_demo_record(ROOT / "results")
    assert block.strip() == demo_markdown(kept), \
        "regenerate: spectral-analysis figures --readme docs/howto/analyze.md"
    assert kept["steps"] == 2000 and kept["length"] == 100  # the main job's defaults, as make demo runs it


def test_the_kept_table_drops_the_rows_drawn_at_smoke_scale(tmp_path):
    from spectral_analysis.checks import CheckRecord

    def record(scale: str) -> CheckRecord:
        return CheckRecord(f"Fig. 9 ({scale})", "a claim", "holds", "evidence", quote="a claim", scale=scale,
                           seeds=3, plateaued="3/3")

    every = _rows(reproduction_markdown(tmp_path, [record("smoke"), record("paper"), record("budget")]))
    kept = _rows(reproduction_markdown(tmp_path, [record("smoke"), record("paper"), record("budget")],
                                       kept_only=True))
    assert [row[0] for row in every] == ["Fig. 9 (smoke)", "Fig. 9 (paper)", "Fig. 9 (budget)"]
    assert kept == every[1:]


def test_a_smoke_row_stands_only_where_its_result_has_no_kept_row(tmp_path):
    from spectral_analysis.checks import CheckRecord

    def record(claim: str, scale: str) -> CheckRecord:
        return CheckRecord(claim, claim, "unverified", "evidence", quote=claim, scale=scale, seeds=1)

    rows = _rows(reproduction_markdown(tmp_path, [record("trained", "smoke"), record("trained", "paper"),
                                                  record("not yet", "smoke")]))
    assert [(row[0], row[3]) for row in rows] == [("trained", "paper, 1"),
                                                  ("not yet", "smoke (not the paper scale), 1")]


def test_write_reproduction_fills_the_file_and_the_marked_block(tmp_path, records):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- reproduction:begin -->\nSTALE-BLOCK\n<!-- reproduction:end -->\nafter\n")
    front = tmp_path / "front.md"
    front.write_text("<!-- reproduction-kept:begin -->\nOLD\n<!-- reproduction-kept:end -->\n")
    path = write_reproduction(ROOT / "results", tmp_path, [readme, front], records)
    assert "OLD" not in front.read_text() and "smoke" not in front.read_text()
    with pytest.raises(ValueError, match="has no generated block to regenerate"):
        write_reproduction(ROOT / "results", tmp_path, [tmp_path / "reproduction.md"], records)
    text = readme.read_text()
    assert "STALE-BLOCK" not in text and text.startswith("intro") and text.endswith("after\n")
    table4 = [row for row in _rows(path.read_text()) if row[0].startswith("Table 4, Coffee, spectral")]
    paper_value = "1.000 test accuracy (at the best validation)"
    from spectral_analysis.paper.ucr import spectral_readings

    assert table4 == [("Table 4, Coffee, spectral", paper_value, "", "paper, 3", "3/3")] + [
        (f"Table 4, Coffee, {variant} ({words})", paper_value, "", "paper, 3", "3/3")
        for variant, words in spectral_readings().items()]
    assert "Table 4, Coffee, spectral-m16 (m1 = m2 = 16, the counts that give the printed parameters)" \
        in {row[0] for row in table4}
    demo = tmp_path / "demo.md"
    demo.write_text("<!-- demo:begin -->\n<!-- demo:end -->\n")
    with pytest.raises(ValueError, match="no kept demo run at .*demo --record"):
        write_reproduction(tmp_path, tmp_path, [demo], records)


def test_table2_rows_kept_at_paper_scale_stand_beside_the_budget_grid(tmp_path):
    """Table 2 at paper scale needs a GPU, but a row run there on its own (Spectral-RNN's 97.7%) is drawn
    beside the complete budget grid, labelled with its scale and seeds; a partial budget grid is not."""
    import json

    from spectral_analysis.experiments import read_grids
    from spectral_analysis.plotting.reproduction import table_rows
    from spectral_analysis.plotting.results_tables import table2

    def keep(scale: str, variant: str, accuracy: float) -> None:
        key = f"{variant}_s0"
        directory = tmp_path / "table2-mnist" / scale / key
        directory.mkdir(parents=True)
        row = {"experiment": "table2-mnist", "scale": scale, "trial": key, "status": "done",
               "variant": variant, "axes": {}, "seed": 0, "hidden": 128, "metric": "accuracy",
               "seconds": 60.0, "test_metrics": {"accuracy": accuracy}, "best_valid": accuracy, "steps": 10,
               "best_step": 1, "config": {}}
        (directory / "result.json").write_text(json.dumps(row))

    keep("paper", "spectral", 0.981)
    assert [g.scale for g in read_grids(tmp_path, "table2-mnist")] == ["paper"]  # partial: read only so
    for variant in ("spectral", "ornn", "rnn", "urnn"):
        keep("budget", variant, 0.9)
    assert [g.scale for g in read_grids(tmp_path, "table2-mnist")] == ["paper"]  # budget grid incomplete
    keep("budget", "lstm", 0.9)
    assert [g.scale for g in read_grids(tmp_path, "table2-mnist")] == ["budget", "paper"]
    spectral = [row for row in table_rows(tmp_path) if row[0].startswith("Table 2, spectral")]
    assert [(row[2], row[4].split(" ")[0].rstrip(",")) for row in spectral] == [("90.0%", "budget"),
                                                                               ("98.1%", "paper")]
    assert [row[3] for row in spectral] == ["7.7 points below", "0.4 points above"]  # the paper's 97.7%
    assert [row[6] for row in spectral] == ["60", "60"]
    row = json.loads((tmp_path / "table2-mnist" / "paper" / "spectral_s0" / "result.json").read_text())
    row.update(device="cuda", machine="NVIDIA H200 (CUDA)")  # a row trained on a lent GPU says so
    (tmp_path / "table2-mnist" / "paper" / "spectral_s0" / "result.json").write_text(json.dumps(row))
    assert [r[6] for r in table_rows(tmp_path) if r[0].startswith("Table 2, spectral")] == [
        "60", "60 on NVIDIA H200"]
    row.update(seconds=100.0, seconds_by_machine={"NVIDIA H200 (CUDA)": 40.0, "AMD EPYC, 2 cores": 60.0})
    (tmp_path / "table2-mnist" / "paper" / "spectral_s0" / "result.json").write_text(json.dumps(row))
    assert [r[6] for r in table_rows(tmp_path) if r[0].startswith("Table 2, spectral")] == [
        "60", "seed 0 resumed across machines: 40 on NVIDIA H200 + 60 on AMD EPYC, 2 cores"]
    # seconds a checkpoint kept before its trainer recorded machines
    row.update(seconds_by_machine={"not recorded": 40.0, "AMD EPYC, 2 cores": 60.0})
    (tmp_path / "table2-mnist" / "paper" / "spectral_s0" / "result.json").write_text(json.dumps(row))
    assert [r[6] for r in table_rows(tmp_path) if r[0].startswith("Table 2, spectral")][1] == (
        "seed 0 resumed across machines: 40 on a machine not recorded + 60 on AMD EPYC, 2 cores")
    row.update(seconds_by_machine={"NVIDIA H200 (CUDA)": 40.0, "AMD EPYC, 2 cores": 60.0})
    (tmp_path / "table2-mnist" / "paper" / "spectral_s0" / "result.json").write_text(json.dumps(row))
    from spectral_analysis.plotting.docs_blocks import grid_markdown

    assert grid_markdown(tmp_path, "table2-mnist", "paper").splitlines()[2].endswith(
        "| seed 0 resumed across machines: 40 on NVIDIA H200 + 60 on AMD EPYC, 2 cores |")  # the docs' grids
    row["fitness"] = {"fit": False, "reasons": ["at chance: test accuracy 0.1 within 3 standard errors of "
                                                "the chance level 0.1135"]}  # a row that is not evidence
    (tmp_path / "table2-mnist" / "paper" / "spectral_s0" / "result.json").write_text(json.dumps(row))
    assert [r[4] for r in table_rows(tmp_path) if r[0].startswith("Table 2, spectral")][1].endswith(
        ", 1 (1/1 unfit: at chance)")
    written = table2(tmp_path, tmp_path)
    assert [Path(w["path"]).name for w in written] == ["table2_mnist.md", "table2_mnist_paper_rows.md"]
    budget, paper = (Path(w["path"]).read_text() for w in written)
    assert "98.1" in paper and "98.1" not in budget


def _keep_grid_point(results: Path, experiment: str, scale: str, variant: str, lr: float, batch: int,
                     valid: float, test: float, seeds: range = range(3), model_options: dict | None = None):
    """Three (or ``seeds``) kept pixel-MNIST trials of one grid point, as the runner writes them."""
    for seed in seeds:
        key = f"{variant}_s{seed}"
        directory = results / experiment / scale / key
        directory.mkdir(parents=True)
        row = {"experiment": experiment, "scale": scale, "trial": key, "status": "done",
               "variant": variant, "axes": {}, "seed": seed, "hidden": 128, "metric": "accuracy",
               "seconds": 60.0, "steps": 7800 + seed, "best_step": 7800,
               "best_valid": valid + seed / 1000, "test_metrics": {"accuracy": test},
               "config": {"lr": lr, "lr_decay": 0.9, "batch_size": batch,
                          "model_options": {"m1": 16, "m2": 16, **(model_options or {})}}}
        (directory / "result.json").write_text(json.dumps(row))


def test_the_table2_grid_names_the_best_point_by_validation_and_each_point_gets_a_row(tmp_path):
    """Table 2's Spectral-RNN row over points of the paper's grid search: table2-mnist's paper-scale row
    beside the table2-grid points, the best chosen by validation as the paper chose its rows (here the
    point with the lower test accuracy, so a reader choosing by test would fail)."""
    from spectral_analysis.plotting.reproduction import table_rows
    from spectral_analysis.plotting.results_tables import table2_grid

    keep = partial(_keep_grid_point, tmp_path)
    keep("table2-mnist", "paper", "spectral", 1e-3, 128, 0.86, 0.86)
    keep("table2-grid", "paper", "lr0.01-b128", 1e-2, 128, 0.80, 0.95)
    keep("table2-grid", "paper", "lr0.001-b64", 1e-3, 64, 0.93, 0.92, seeds=range(2))
    text = Path(table2_grid(tmp_path, tmp_path)[0]["path"]).read_text()
    assert "| lr 0.001, decay 0.9, batch 64 | 128 | table2-grid lr0.001-b64 | paper, 2 |" in text  # shown...
    assert "Best by validation at paper scale: lr 0.001, decay 0.9, batch 128," in text  # ...not yet chosen
    keep("table2-grid", "paper", "lr0.001-b64", 1e-3, 64, 0.93, 0.92, seeds=range(2, 3))
    text = Path(table2_grid(tmp_path, tmp_path)[0]["path"]).read_text()
    points = [line.split(" | ")[0].lstrip("| ") for line in text.splitlines() if line.startswith("| lr")]
    assert points == ["lr 0.001, decay 0.9, batch 128", "lr 0.01, decay 0.9, batch 128",
                      "lr 0.001, decay 0.9, batch 64"]
    assert "Best by validation at paper scale: lr 0.001, decay 0.9, batch 64, 92.0 [92.0, 92.0]% test" in text
    rows = {row[0]: row[2] for row in table_rows(tmp_path) if row[0].startswith("Table 2, spectral")}
    assert rows == {"Table 2, spectral (n_h = 128)": "86.0 [86.0, 86.0]%",
                    "Table 2, spectral (n_h = 128; lr 0.01, decay 0.9, batch 128)": "95.0 [95.0, 95.0]%",
                    "Table 2, spectral (n_h = 128; lr 0.001, decay 0.9, batch 64)": "92.0 [92.0, 92.0]%"}
    keep("table2-grid", "paper", "authors-code", 1e-3, 128, 0.94, 0.90,
         model_options={"unit_reflectors": True, "input_std": 0.125})
    text = Path(table2_grid(tmp_path, tmp_path)[0]["path"]).read_text()
    assert ("Best by validation at paper scale: lr 0.001, decay 0.9, batch 128, unit reflectors, "
            "input std 0.125, 90.0 [90.0, 90.0]% test") in text  # model options name the point
    written = table2_grid(tmp_path, tmp_path)
    assert [Path(w["path"]).name for w in written] == ["table2_grid.md"]  # no budget grid kept: no table
    keep("table2-grid", "budget", "authors-code", 1e-3, 128, 0.70, 0.71,
         model_options={"unit_reflectors": True, "input_std": 0.125})
    keep("table2-mnist", "budget", "spectral", 1e-3, 128, 0.60, 0.61)
    keep("table2-mnist", "budget", "urnn", 1e-3, 128, 0.88, 0.88)
    budget = Path(table2_grid(tmp_path, tmp_path)[1]["path"]).read_text()
    points = [line.split(" | ")[2:4] for line in budget.splitlines() if line.startswith("| lr")]
    assert points == [["table2-mnist spectral", "budget, 3"], ["table2-grid authors-code", "budget, 3"]]
    assert "| 61.0 [61.0, 61.0] |" in budget and "| 71.0 [71.0, 71.0] |" in budget


def test_the_lstm_grid_puts_table2s_lstm_row_beside_its_own_points_and_not_the_spectral_ones(tmp_path):
    """table2-lstm-grid reads like table2-grid, for Table 2's LSTM row: table2-mnist's paper-scale LSTM
    beside the lr 1e-4 point, the best by validation against the paper's 97.3%, and the Spectral-RNN's
    rows and grid kept out of it."""
    from spectral_analysis.plotting.reproduction import table_rows
    from spectral_analysis.plotting.results_tables import TABLES

    keep = partial(_keep_grid_point, tmp_path)
    keep("table2-mnist", "paper", "lstm", 1e-3, 128, 0.45, 0.33)
    keep("table2-mnist", "paper", "spectral", 1e-3, 128, 0.86, 0.86)
    keep("table2-grid", "paper", "lr0.01-b128", 1e-2, 128, 0.80, 0.95)
    assert TABLES["table2-lstm-grid"](tmp_path, tmp_path) == []  # no point of its own kept: no table
    keep("table2-lstm-grid", "paper", "lr0.0001-b128", 1e-4, 128, 0.40, 0.39)
    (written,) = TABLES["table2-lstm-grid"](tmp_path, tmp_path)
    text = Path(written["path"]).read_text()
    assert Path(written["path"]).name == "table2_lstm_grid.md" and "LSTM row" in text
    points = [line.split(" | ")[:3] for line in text.splitlines() if line.startswith("| lr")]
    assert points == [["| lr 0.001, decay 0.9, batch 128", "128", "table2-mnist lstm"],
                      ["| lr 0.0001, decay 0.9, batch 128", "128", "table2-lstm-grid lr0.0001-b128"]]
    assert "Best by validation at paper scale: lr 0.001, decay 0.9, batch 128, 33.0 [33.0, 33.0]% test " \
           "(the paper's Table 2: 97.3%)" in text
    rows = {row[0]: row[1:3] for row in table_rows(tmp_path) if row[0].startswith("Table 2, lstm")}
    assert rows == {"Table 2, lstm (n_h = 128)": ["97.3% test", "33.0 [33.0, 33.0]%"],
                    "Table 2, lstm (n_h = 128; lr 0.0001, decay 0.9, batch 128)":
                        ["97.3% test (the best of its grid)", "39.0 [39.0, 39.0]%"]}


def test_table2s_lstm_row_is_read_again_under_the_field_recipe(tmp_path):
    """table2-lstm-field trains Table 2's LSTM (n = 128) by the field's recipe: its trials give a second
    Table 2 LSTM row against the paper's 97.3%, named as not the paper's recipe, beside the stated row;
    an LSTM of another grid (KRU's) gives no Table 2 row."""
    from spectral_analysis.experiments import find_experiment
    from spectral_analysis.plotting.reproduction import table_rows

    keep = partial(_keep_grid_point, tmp_path)
    keep("table2-mnist", "paper", "lstm", 1e-3, 128, 0.45, 0.33)
    for experiment, key in (("table2-lstm-field", "lstm-field"), ("kru-mnist", "lstm_taskmnist")):
        configs = {trial.key: trial.config for trial in find_experiment(experiment).trials("paper")}
        for seed in range(3):
            directory = tmp_path / experiment / "paper" / f"{key}_s{seed}"
            directory.mkdir(parents=True)
            row = {"experiment": experiment, "scale": "paper", "trial": f"{key}_s{seed}", "status": "done",
                   "variant": key.split("_")[0], "axes": {"task": "mnist"} if "task" in key else {},
                   "seed": seed, "hidden": 128, "metric": "accuracy", "seconds": 60.0, "steps": 7800,
                   "best_step": 7800, "test_metrics": {"accuracy": 0.96 + seed / 100},
                   "config": configs[f"{key}_s{seed}"]}
            (directory / "result.json").write_text(json.dumps(row))
    rows = {row[0]: row[1:5] for row in table_rows(tmp_path) if row[0].startswith("Table 2, lstm")}
    field = ("Table 2, lstm (n_h = 128; the field's recipe: RMSprop 1e-3, clipped at 1 (Cooijmans et al. "
             "2016), not the paper's)")
    assert set(rows) == {"Table 2, lstm (n_h = 128)", field}
    assert rows["Table 2, lstm (n_h = 128)"][:2] == ["97.3% test", "33.0 [33.0, 33.0]%"]
    # its trials are the catalog's
    assert rows[field] == ["97.3% test", "97.0 [96.0, 98.0]%", "0.3 points below", "paper, 3"]


def test_every_variant_of_another_reading_names_a_printed_row_and_its_reading_once():
    """The tables compare a variant of another reading (the catalog's ``row`` and ``reading``) with the
    row its paper prints, named by its reading: a row the table does not print would be compared with
    nothing, and two readings of one row in the same words could not be told apart."""
    from spectral_analysis.experiments import load_catalog
    from spectral_analysis.paper.ucr import TABLE4_ACCURACY
    from spectral_analysis.plotting.results_tables import TABLE2, TABLE2_FIELD, TABLE3

    printed = {TABLE2_FIELD: set(TABLE2), "table3-ptb": set(TABLE3),
               "table4-ucr": set(TABLE4_ACCURACY["Coffee"]), "fig5-depth": {"mlp", "resnet"}}
    worded = {name: [v for v in e.variants if "row" in v] for name, e in load_catalog().items()}
    assert {name for name, variants in worded.items() if variants} == set(printed)
    for name, variants in worded.items():
        assert {v["row"] for v in variants} <= printed.get(name, set()), name
        readings = [(v["row"], v["reading"]) for v in variants]
        assert len(set(readings)) == len(readings), name
    # the field's LSTM grid trains Table 2's LSTM row only by the field's recipes, each not the paper's
    assert all(v["row"] == "lstm" and v["reading"].endswith("not the paper's") for v in worded[TABLE2_FIELD])
    assert len(worded[TABLE2_FIELD]) == len(load_catalog()[TABLE2_FIELD].variants)


def test_every_table3_variant_reads_the_printed_perplexities_of_the_row_it_trains():
    """Each table3-ptb variant is a Table 3 network trained by the grid's recipe or a named other reading,
    so its table row carries the paper's printed perplexities; a label of no row has none."""
    from spectral_analysis.experiments import find_experiment
    from spectral_analysis.plotting.results_tables import TABLE3, table3_printed

    variants = [v["label"] for v in find_experiment("table3-ptb").variants]
    assert {table3_printed(v) for v in variants} == set(TABLE3.values())
    assert table3_printed("lstm-1x128") == table3_printed("lstm-1x128-field") == TABLE3["lstm-1x128"]
    assert table3_printed("rnn-1x128-mean") == TABLE3["rnn-1x128"]
    assert table3_printed("gru-1x128") is None and table3_printed("lstm-3x128-field") is None


def test_a_table3_row_kept_at_paper_scale_stands_beside_the_grid_drawn(tmp_path):
    """Table 3's paper grid is far from complete on a CPU, but a row run there on its own (the field
    recipe's LSTM) is drawn beside the grid the table reads, labelled with its recipe and scale, in the
    reproduction table and in a Table 3 file of its own."""
    import json

    from spectral_analysis.plotting.reproduction import table_rows
    from spectral_analysis.plotting.results_tables import table3

    for scale, perplexity in (("smoke", 9000.0), ("paper", 128.0)):
        directory = tmp_path / "table3-ptb" / scale / "lstm-1x128-field_s0"
        directory.mkdir(parents=True)
        row = {"experiment": "table3-ptb", "scale": scale, "trial": "lstm-1x128-field_s0", "status": "done",
               "variant": "lstm-1x128-field", "axes": {}, "seed": 0, "hidden": 128, "metric": "cross_entropy",
               "seconds": 60.0, "steps": 10, "best_step": 10,
               "test_metrics": {"cross_entropy": math.log(perplexity), "perplexity": perplexity}}
        (directory / "result.json").write_text(json.dumps(row))
    rows = [row for row in table_rows(tmp_path) if row[0].startswith("Table 3")]
    label = "Table 3, lstm-1x128-field (PyTorch's word_language_model recipe, not the paper's)"
    assert [(row[0], row[2], row[3], row[4].split(" ")[0].rstrip(",")) for row in rows] == [
        (label, "9000.0", "68.86x the paper's", "smoke"), (label, "128.0", "0.98x the paper's", "paper")]
    written = table3(tmp_path, tmp_path)
    assert [Path(w["path"]).name for w in written] == ["table3_ptb.md", "table3_ptb_paper_rows.md"]
    drawn, paper = (Path(w["path"]).read_text() for w in written)
    assert "| lstm-1x128-field | " in paper and "| 130.7 |" in paper and "| 128.0 |" in paper
    assert "9000.0" in drawn and "128.0" not in drawn


def test_every_table2_grid_experiment_reads_the_row_of_its_own_model():
    """Each catalog grid over a Table 2 row (table2-grid, table2-lstm-grid, table2-ornn-grid) is drawn as
    the row of the model it trains, and a grid point is named by its recipe, not by its reflector count."""
    from spectral_analysis.experiments import find_experiment, load_catalog
    from spectral_analysis.experiments.groups import Group
    from spectral_analysis.plotting.results_tables import TABLE2, TABLE2_GRIDS, grid_point_text

    grids = sorted(name for name in load_catalog() if name.startswith("table2-") and name.endswith("-grid"))
    assert grids == sorted(TABLE2_GRIDS)
    for name, (model, _) in TABLE2_GRIDS.items():
        assert model in TABLE2
        assert {t.config["model"] for t in find_experiment(name).trials("paper")} == {model}
    (trial,) = find_experiment("table2-ornn-grid").trials("paper", seeds=1)
    group = Group("authors-code", {}, [{"config": trial.config}], [])
    assert grid_point_text(group) == "lr 0.001, decay 0.9, batch 128, unit reflectors, input std 0.088"


def test_each_row_says_how_far_our_mean_lies_from_the_papers_number():
    """The gap is the mean's, in the row's unit and direction: points for a percentage, a ratio for a
    perplexity, the metric's own unit otherwise; a seed without a value is left out, and a row without
    any seed has no gap."""
    import numpy as np

    from spectral_analysis.experiments.groups import Spread
    from spectral_analysis.plotting.reproduction import against_the_paper

    def spread(*values: float) -> Spread:
        return Spread.over_seeds(np.array(values, dtype=float))

    assert against_the_paper(spread(0.95, 0.99), 97.3, 100, unit=" points") == "0.3 points below"
    assert against_the_paper(spread(0.98), 97.3, 100, unit=" points") == "0.7 points above"
    assert against_the_paper(spread(0.973, np.nan), 97.3, 100, unit=" points") == "equal"
    assert against_the_paper(spread(np.nan), 97.3) == "-"
    assert against_the_paper(spread(120.2), 130.7, ratio=True) == "0.92x the paper's"
    bits = 1 / math.log(2)  # a cross entropy in nats read as bits per character
    assert against_the_paper(spread(1.33), 1.60, bits, 2, " BPC") == "0.32 BPC above"


def test_table4s_spectral_rnn_at_sixteen_reflectors_is_read_against_the_printed_spectral_row(tmp_path):
    """table4-ucr's spectral-m16 trains the printed Spectral-RNN row at the reflector counts that give its
    printed parameters: its row is compared with the paper's Spectral-RNN accuracy and says by which
    reading, in the reproduction table and in the Table 4 file; the stated reading keeps its own row."""
    from spectral_analysis.experiments import find_experiment
    from spectral_analysis.paper.ucr import spectral_readings
    from spectral_analysis.plotting.reproduction import table_rows
    from spectral_analysis.plotting.results_tables import table4

    accuracies = {"spectral": 0.8, "spectral-m16": 0.9}
    grid = find_experiment("table4-ucr")
    # every Spectral-RNN of the grid is the stated reading or one named in words
    spectral = {v["label"] for v in grid.variants if v["model"] == "spectral"}
    assert spectral == {"spectral", *spectral_readings()}
    for trial in grid.trials("paper"):  # the whole grid, so that it is read
        directory = tmp_path / "table4-ucr" / "paper" / trial.key
        directory.mkdir(parents=True)
        accuracy = accuracies.get(trial.variant, 0.5)
        row = {"experiment": "table4-ucr", "scale": "paper", "trial": trial.key, "status": "done",
               "variant": trial.variant, "axes": trial.axes, "seed": trial.seed, "hidden": 32,
               "metric": "accuracy", "seconds": 5.0, "steps": 2000, "best_step": 100,
               "test_metrics": {"accuracy": accuracy}, "test_at_best_valid": {"accuracy": accuracy},
               "config": trial.config}
        (directory / "result.json").write_text(json.dumps(row))
    rows = {row[0]: row[1:4] for row in table_rows(tmp_path)
            if row[0].startswith("Table 4, Coffee, spectral")}
    printed = "1.000 test accuracy (at the best validation)"
    m16 = "Table 4, Coffee, spectral-m16 (m1 = m2 = 16, the counts that give the printed parameters)"
    assert rows.pop("Table 4, Coffee, spectral") == [printed, "0.800 [0.800, 0.800]", "0.200 below"]
    assert rows.pop(m16) == [printed, "0.900 [0.900, 0.900]", "0.100 below"]
    # the other readings (the released code's settings) are read against the same printed row
    assert sorted(rows) == sorted(f"Table 4, Coffee, {v} ({words})"
                                  for v, words in spectral_readings().items() if v != "spectral-m16")
    assert all(cells == [printed, "0.500 [0.500, 0.500]", "0.500 below"] for cells in rows.values())
    text = Path(table4(tmp_path, tmp_path)[0]["path"]).read_text()
    line = next(line for line in text.splitlines() if line.startswith("| Coffee | spectral-m16 |"))
    assert line.split(" | ")[3] == "1.000"  # the printed Spectral-RNN row's accuracy, not '-'
