"""``spectral-analysis zoo --check``: every kept checkpoint loads by name and goes through the analyzers."""

import json
import math
import shutil
from pathlib import Path

import pytest

from spectral_analysis.analysis.zoo_check import check_zoo
from spectral_analysis.cli import main

RESULTS = Path(__file__).resolve().parent.parent / "results"
KEPT = ("table4-ucr/paper/spectral_datasetArrowHead_s0", "dizzy-copy/paper/lstm_s0",
        "fig5-depth/smoke/mlp_num_layers30_s0", "kru-amplitude/paper/kru_penalty0.0001_s0")


def _copy_entries(root: Path) -> Path:
    for entry in KEPT:
        shutil.copytree(RESULTS / entry, root / entry)
    return root


@pytest.mark.slow
def test_every_kind_of_kept_entry_loads_and_is_analyzed(tmp_path):
    rows = {r["name"].split("/", 2)[-1]: r for r in check_zoo(_copy_entries(tmp_path))}
    assert all(r["ok"] for r in rows.values()) and len(rows) == len(KEPT)
    spectral, lstm = rows["spectral_datasetArrowHead_s0"], rows["lstm_s0"]
    assert spectral["analyzed"] == "analyze" and spectral["T"] == 251  # ArrowHead's series length
    assert math.isfinite(spectral["log10_G"]) and spectral["jacobian_bound_holds"] is True
    assert lstm["analyzed"] == "analyze" and lstm["log10_G"] is None
    assert "skipped" not in lstm and lstm["bound_note"]  # G(w) is Eq. 17's: the row says why it is left out
    assert rows["mlp_num_layers30_s0"]["analyzed"] == "spectra (feed-forward)"
    assert rows["mlp_num_layers30_s0"]["matrices"] == 32  # input, 30 hidden layers, output
    assert rows["kru_penalty0.0001_s0"]["analyzed"] == "analyze"


@pytest.mark.slow
def test_a_broken_entry_fails_with_its_error_line_and_the_rest_go_on(tmp_path, capsys):
    root = _copy_entries(tmp_path)
    model = root / KEPT[0] / "model.safetensors"
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    assert main(["zoo", "--check", "--results", str(root), "--json"]) == 1
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["entries"]}
    broken = rows["zoo:table4-ucr/paper/spectral_datasetArrowHead_s0"]
    assert not broken["ok"] and "is neither a safetensors nor a torch.save file" in broken["error"]
    assert sum(r["ok"] for r in rows.values()) == len(KEPT) - 1
    assert main(["zoo", "--check", "--results", str(root), "--experiment", "fig5-depth"]) == 0
    assert "1 of 1 entries load and analyze" in capsys.readouterr().out


@pytest.mark.slow
def test_an_entry_whose_bound_came_out_non_finite_fails(tmp_path, monkeypatch):
    """The report writes a non-finite G(w) as null; a computed bound that is null fails the entry."""
    import spectral_analysis.analysis.zoo_check as zoo_check

    real = zoo_check.analyze_subject

    def overflowing(*args, **kwargs):
        report = real(*args, **kwargs)
        if "skipped" not in report["bound"]:
            report["bound"]["log10_G"] = None
        return report

    monkeypatch.setattr(zoo_check, "analyze_subject", overflowing)
    shutil.copytree(RESULTS / KEPT[0], tmp_path / KEPT[0])
    shutil.copytree(RESULTS / KEPT[1], tmp_path / KEPT[1])
    rows = {r["name"].split("/", 2)[-1]: r for r in check_zoo(tmp_path)}
    assert not rows["spectral_datasetArrowHead_s0"]["ok"]
    assert "log10 G(w) came out non-finite" in rows["spectral_datasetArrowHead_s0"]["error"]
    assert rows["lstm_s0"]["ok"]  # its bound is skipped with a reason: nothing to be finite
