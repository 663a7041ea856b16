"""Per-matrix spectra: exact values on matrices with known singular values, every recurrent model's
transition, the power-law fit on a known tail, and the command."""

import csv
import io

import numpy as np
import pytest
import torch

from spectral_analysis.analysis.spectra import MIN_EVALS_FOR_ALPHA, matrix_row, power_law_fit, spectral_table
from spectral_analysis.cli import main
from spectral_analysis.nn import MODEL_NAMES, RECURRENT_MODELS, build_model


def test_a_matrix_with_known_singular_values():
    torch.manual_seed(0)
    U, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))
    s = torch.tensor([3.0, 2.0, 1.0, 0.5], dtype=torch.float64)
    W = U[:, :4] @ torch.diag(s) @ V.T
    row = matrix_row("W", "transition", W)
    assert (row["N"], row["M"], row["num_evals"]) == (6, 4, 4)
    assert row["sigma_max"] == pytest.approx(3.0) and row["sigma_min"] == pytest.approx(0.5)
    assert row["condition_number"] == pytest.approx(6.0) and row["spectral_margin"] == pytest.approx(2.0)
    assert row["frobenius_norm"] == pytest.approx(float(s.norm()))
    assert row["spectral_norm"] == pytest.approx(9.0)  # WeightWatcher's lambda_max = sigma_max^2
    assert row["stable_rank"] == pytest.approx(float((s ** 2).sum()) / 9.0)
    assert row["alpha"] is None  # 4 eigenvalues: no tail to fit
    with pytest.raises(ValueError, match="non-finite"):
        matrix_row("bad", "input", torch.full((2, 2), float("nan")))


@pytest.mark.parametrize("name", RECURRENT_MODELS)
def test_every_recurrent_model_has_its_transition_in_the_table(name):
    torch.manual_seed(1)
    model = build_model(name, 3, 8, 2)
    rows = spectral_table(model)
    assert [r["kind"] for r in rows] == ["transition", "input", "output"]
    W = model.transition_matrix(0).detach().double()
    assert rows[0]["sigma_max"] == pytest.approx(float(torch.linalg.matrix_norm(W, ord=2)), rel=1e-9)
    if name == "spectral":  # the parametrization's own singular values
        assert rows[0]["sigma_max"] == pytest.approx(float(model.singular_values().max()), rel=1e-5)


def test_feed_forward_nets_list_each_linear_layer():
    names = [n for n in MODEL_NAMES if n not in RECURRENT_MODELS]
    for name in names:
        rows = spectral_table(build_model(name, 5, 6, 3, num_layers=2))
        assert [r["kind"] for r in rows] == ["input", "hidden", "hidden", "output"], name


def test_the_power_law_fit_recovers_a_known_tail():
    rng = np.random.default_rng(0)
    evals = (rng.pareto(2.0, 4000) + 1.0)  # density ~ x^-(a+1): alpha = 3
    fit = power_law_fit(evals)
    assert fit["alpha"] == pytest.approx(3.0, abs=0.25) and 0 <= fit["D"] < 0.1
    assert power_law_fit(evals[:MIN_EVALS_FOR_ALPHA - 1])["alpha"] is None


def test_the_spectra_command_prints_csv(tmp_path, capsys):
    from spectral_analysis.train import save_checkpoint

    model = build_model("spectral", 2, 6, 3)
    save_checkpoint(tmp_path / "m.safetensors", model, {"task": {"name": "addition", "length": 5}})
    assert main(["spectra", str(tmp_path / "m.safetensors"), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["name"] for r in rows] == ["transition[0]", "input[0]", "output"]
    assert float(rows[0]["sigma_max"]) <= 1.1 + 1e-6  # sigma* + r
