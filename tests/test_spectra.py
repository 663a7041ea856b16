"""Per-matrix spectra: exact values on matrices with known singular values, every recurrent model's
transition, any plain module under its own parameter names (gates split, convolutions sliced),
WeightWatcher's power-law fit on a known tail and against WeightWatcher itself, and the command."""

import csv
import io

import numpy as np
import pytest
import torch
from torch import nn

from spectral_analysis.analysis.spectra import (
    MIN_EVALS_FOR_ALPHA,
    WeightMatrix,
    matrix_row,
    power_law_fit,
    spectral_table,
)
from spectral_analysis.cli import main
from spectral_analysis.nn import MODEL_NAMES, RECURRENT_MODELS, build_model


def test_a_matrix_with_known_singular_values():
    torch.manual_seed(0)
    U, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))
    s = torch.tensor([3.0, 2.0, 1.0, 0.5], dtype=torch.float64)
    W = U[:, :4] @ torch.diag(s) @ V.T
    row = matrix_row(WeightMatrix("W", "transition", None, [W]))
    assert (row["N"], row["M"], row["num_evals"]) == (6, 4, 4)
    assert row["sigma_max"] == pytest.approx(3.0) and row["sigma_min"] == pytest.approx(0.5)
    assert row["condition_number"] == pytest.approx(6.0) and row["spectral_margin"] == pytest.approx(2.0)
    assert row["frobenius_norm"] == pytest.approx(float(s.norm()))
    assert row["spectral_norm"] == pytest.approx(9.0)  # WeightWatcher's lambda_max = sigma_max^2
    assert row["norm"] == pytest.approx(float((s ** 2).sum()))  # WeightWatcher's norm: ||W||_F^2
    assert row["stable_rank"] == pytest.approx(float((s ** 2).sum()) / 9.0)
    assert row["alpha"] is None  # 4 eigenvalues: no tail to fit
    with pytest.raises(ValueError, match="non-finite"):
        matrix_row(WeightMatrix("bad", "input", None, [torch.full((2, 2), float("nan"))]))


@pytest.mark.parametrize("name", RECURRENT_MODELS)
def test_every_recurrent_model_has_its_transition_in_the_table(name):
    torch.manual_seed(1)
    model = build_model(name, 3, 8, 2)
    rows = spectral_table(model)
    gates = {"lstm": 4, "gru": 3}.get(name, 1)
    assert rows["kind"].tolist() == ["transition"] * gates + ["input"] * gates + ["output"]
    W = model.transition_matrix(0).detach().double()
    top = max(float(torch.linalg.matrix_norm(block, ord=2)) for block in W.chunk(gates))
    assert rows["sigma_max"].iloc[:gates].max() == pytest.approx(top, rel=1e-9)
    if name == "spectral":  # the parametrization's own singular values
        assert rows["sigma_max"].iloc[0] == pytest.approx(float(model.singular_values().max()), rel=1e-5)


def test_feed_forward_nets_list_each_linear_layer():
    names = [n for n in MODEL_NAMES if n not in RECURRENT_MODELS]
    for name in names:
        rows = spectral_table(build_model(name, 5, 6, 3, num_layers=2))
        assert rows["kind"].tolist() == ["input", "hidden", "hidden", "output"], name
        assert rows["name"].tolist()[1] == "hidden_layers.0.weight"


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
    assert [r["name"] for r in rows] == ["transitions.0", "input_weights.0", "output.weight"]
    assert float(rows[0]["sigma_max"]) <= 1.1 + 1e-6  # sigma* + r


def test_a_plain_lstm_is_read_under_its_own_names_gate_by_gate():
    torch.manual_seed(2)
    lstm = nn.LSTM(3, 8, num_layers=2, bidirectional=True)
    table = spectral_table(lstm)
    names = [name for name, p in lstm.named_parameters() if name.startswith("weight_")]
    assert table["name"].unique().tolist() == names
    assert table["gate"].tolist()[:4] == ["input", "forget", "cell", "output"]
    forget = lstm.weight_hh_l1_reverse.detach().double()[8:16]
    row = table[(table["name"] == "weight_hh_l1_reverse") & (table["gate"] == "forget")].iloc[0]
    assert row["kind"] == "transition"
    assert row["sigma_max"] == pytest.approx(float(torch.linalg.matrix_norm(forget, ord=2)), rel=1e-12)
    gru = spectral_table(nn.GRU(3, 5))
    assert gru["gate"].tolist()[:3] == ["reset", "update", "new"]


def test_a_plain_mlp_a_convolution_and_a_parametrized_weight():
    from spectral_analysis.nn import svd_parametrize

    torch.manual_seed(3)
    conv = nn.Conv2d(4, 6, (3, 2))
    net = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), svd_parametrize(nn.Linear(7, 7), sigma=None), conv)
    table = spectral_table(net).set_index("name")
    assert table.index.tolist() == ["0.weight", "2.weight", "3.weight"]  # the raw factors are not rows
    composed = net[2].weight.detach().double()
    assert table.loc["2.weight", "sigma_max"] == pytest.approx(float(torch.linalg.matrix_norm(composed, 2)))
    slices = conv.weight.detach().double().permute(2, 3, 0, 1).reshape(6, 6, 4)  # one 6 x 4 per position
    sigma = torch.cat([torch.linalg.svdvals(w) for w in slices])
    row = table.loc["3.weight"]
    assert (row["rf"], row["num_evals"], row["N"], row["M"]) == (6, 24, 6, 4)
    assert row["sigma_max"] == pytest.approx(float(sigma.max()))
    assert row["spectral_norm"] == pytest.approx(float(sigma.max()) ** 2 / 2)  # WeightWatcher's conv2d_norm
    with pytest.raises(ValueError, match="spectral_analysis.load"):
        spectral_table(nn.ReLU())


def test_the_power_law_fit_is_weightwatchers():
    """Against weightwatcher itself where it is installed (its analyze() defaults), layer by layer."""
    ww = pytest.importorskip("weightwatcher")
    import logging

    torch.manual_seed(4)
    net = nn.Sequential(nn.Linear(300, 200), nn.Linear(200, 100), nn.Conv2d(16, 32, 3), nn.Linear(40, 15),
                        nn.Linear(64, 64))
    with torch.no_grad():  # a heavy-tailed layer, as trained ones are
        net[4].weight.copy_(torch.distributions.StudentT(2.0).sample((64, 64)))
    logging.disable(logging.WARNING)
    try:
        theirs = ww.WeightWatcher(model=net).analyze()
    finally:
        logging.disable(logging.NOTSET)
    ours = spectral_table(net)
    columns = ["N", "M", "num_evals", "alpha", "xmin", "D", "spectral_norm", "norm", "stable_rank",
               "alpha_weighted", "num_pl_spikes"]
    np.testing.assert_allclose(ours[columns].to_numpy(float), theirs[columns].to_numpy(float), rtol=1e-6)


def test_a_plain_file_is_read_under_its_own_keys_without_an_architecture(tmp_path, capsys, caplog):
    """A plain PyTorch file: the file's own keys and matrices, nothing the import would add (a read-out
    it does not hold, the toolkit's names), an nn.RNN without --arch, and a network that is no RNN."""
    torch.manual_seed(3)
    lstm = nn.LSTM(3, 6, proj_size=2)
    torch.save(lstm.state_dict(), tmp_path / "lstm.pt")
    table = spectral_table(str(tmp_path / "lstm.pt"))
    module_table = spectral_table(lstm)
    assert table["name"].tolist() == module_table["name"].tolist()
    assert table["gate"].tolist() == module_table["gate"].tolist()  # 4n rows of n = 6, not of proj_size 2
    assert np.allclose(table["sigma_max"], module_table["sigma_max"], rtol=1e-12)
    torch.save(nn.RNN(2, 5).state_dict(), tmp_path / "rnn.pt")
    assert main(["spectra", str(tmp_path / "rnn.pt"), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["name"] for r in rows] == ["weight_ih_l0", "weight_hh_l0"] and not rows[0]["gate"]
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(4, 2))
    with caplog.at_level("WARNING"):
        table = spectral_table(net.state_dict())
    assert table["name"].tolist() == ["2.weight"] and "0.weight (4, 1, 3, 3)" in caplog.text
    from spectral_analysis.nn import svd_parametrize

    constrained = nn.Sequential(svd_parametrize(nn.Linear(4, 4), sigma=(1.0, 0.1), init="random"),
                                nn.Linear(4, 2))
    caplog.clear()
    with caplog.at_level("WARNING"):
        table = spectral_table(constrained.state_dict())
    assert table["name"].tolist() == ["1.weight"] and "0.parametrizations.weight.original" in caplog.text
    with pytest.raises(ValueError, match="holds no weight matrix"):
        spectral_table({"bias": torch.zeros(3)})
