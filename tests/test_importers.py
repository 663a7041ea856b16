"""Any PyTorch recurrent model in: importers, the user's own data, every analyzer on imported models."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import spectral_analysis
from spectral_analysis.analysis import bound_report, jacobian_products, jacobians_by_autograd
from spectral_analysis.cli import main
from spectral_analysis.data.arrays import load_user_data
from spectral_analysis.io import SubjectError, load
from spectral_analysis.nn import build_model, svd_parametrize

D = torch.float64
SCRIPT = Path(__file__).parent / "scripts" / "plain_pytorch_models.py"


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    """Models trained and saved by a script that never imports the toolkit."""
    out = tmp_path_factory.mktemp("plain")
    subprocess.run([sys.executable, str(SCRIPT), str(out)], check=True, timeout=300)
    return out


@pytest.mark.parametrize("name", ["rnn1", "gru1", "lstm1", "rnn2"])
@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
@pytest.mark.slow
def test_saved_models_import_with_the_same_outputs(plain, name, suffix):
    subject = load(plain / f"{name}{suffix}", arch="rnn_relu" if name.startswith("rnn") else None)
    x = torch.from_numpy(np.load(plain / "inputs.npy"))[:4]
    logits = torch.load(plain / f"{name}_logits.pt", weights_only=True)
    assert torch.allclose(subject.model(x)[:, -1], logits, atol=1e-5)
    assert subject.convention == ("torch.save state_dict" if suffix == ".pt" else "safetensors state_dict")
    assert any("head found under 'fc.'" in a for a in subject.assumptions)
    if name != "gru1":
        assert "bias_ih and bias_hh summed into one bias per layer" in subject.assumptions


@pytest.mark.slow
def test_every_analyzer_runs_on_plain_models_in_one_command(plain, tmp_path, capsys):
    data = ["--inputs", str(plain / "inputs.npy"), "--labels", str(plain / "labels.npy")]
    model = str(plain / "rnn1.pt")
    assert main(["bound", model, "--arch", "rnn_relu", *data, "--margin", "0.5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["subject"]["architecture"] == "rnn_relu" and report["m"] == 96
    assert report["B_source"].startswith("measured on the given inputs") and report["explicit"] is not None
    assert report["gamma"] == 0.5 and 0 <= report["error_rate"] < 0.5
    assert main(["weights", str(plain / "rnn1.safetensors"), "--out", str(tmp_path / "w.npz"), "--json"]) == 1
    assert "does not record" in capsys.readouterr().err  # an nn.RNN's non-linearity is never guessed
    assert main(["weights", str(plain / "rnn1.safetensors"), "--arch", "rnn_relu", "--out",
                 str(tmp_path / "w.npz"), "--json"]) == 0
    capsys.readouterr()
    for name in ("rnn1", "gru1", "lstm1", "rnn2"):
        out = tmp_path / name
        arch = ["--arch", "rnn_relu"] if name.startswith("rnn") else []
        assert main(["analyze", str(plain / f"{name}.pt"), *arch, "--out", str(out), "--samples", "3",
                     "--trials", "3", *data, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert len(report["jacobian_log10_norms"]) == 13 and len(report["grad_norms"]) == 13
        assert len(report["lyapunov_exponents"]) == report["model"]["hidden_size"] * (
            2 if name == "lstm1" else 1) * (2 if name == "rnn2" else 1)
        assert report["subject"]["assumptions"], "the import's assumptions are reported"
        if name in ("gru1", "lstm1", "rnn2"):  # outside Eq. 17: refused with the hypothesis that fails
            assert "skipped" in report["bound"]
        assert (out / "report.md").read_text().count("assumptions") == 1


def test_imported_rnn_bound_equals_the_hand_ported_toolkit_rnn(plain):
    """log10 G of the import equals that of the same weights copied by hand into build_model('rnn')."""
    state = torch.load(plain / "rnn1.pt", weights_only=True)
    subject = load(plain / "rnn1.pt", arch="rnn_relu")
    ported = build_model("rnn", 2, 16, 3, activation="relu", output_bias=True)
    with torch.no_grad():
        ported.transitions[0].weight.copy_(state["rnn.weight_hh_l0"])
        ported.input_weights[0].copy_(state["rnn.weight_ih_l0"])
        ported.biases[0].copy_(state["rnn.bias_ih_l0"] + state["rnn.bias_hh_l0"])
        ported.output.weight.copy_(state["fc.weight"])
        ported.output.bias.copy_(state["fc.bias"])
    by_hand = load(ported)
    for T in (12, 100):
        a = bound_report(subject, length=T, data_bound=2.0)["log10_G"]
        b = bound_report(by_hand, length=T, data_bound=2.0)["log10_G"]
        assert abs(a - b) < 1e-10


@pytest.mark.parametrize("cell", [nn.GRU, nn.LSTM])
def test_gated_jacobian_products_equal_full_autograd(cell):
    torch.manual_seed(3)
    module = cell(3, 5, num_layers=2, batch_first=True).double()
    subject = load(module)
    x = torch.randn(2, 6, 3, dtype=D)
    fast = jacobian_products(subject.model, x, keep_matrices=True).matrices
    slow = jacobians_by_autograd(subject.model, x)
    assert torch.allclose(fast, slow, atol=1e-10, rtol=0)
    out, _ = module(x)
    assert torch.allclose(subject.model(x), out, atol=1e-12)  # identity head: y_t = h_t


def test_svd_parametrized_rnn_module_is_a_spectral_rnn():
    torch.manual_seed(4)
    rnn = nn.RNN(3, 8, batch_first=True).double()
    svd_parametrize(rnn, "weight_hh_l0", m1=3, m2=3, sigma=(1.0, 0.2))
    subject = load(rnn)
    assert subject.model.config["name"] == "spectral" and subject.architecture == "rnn_tanh"
    x = torch.randn(2, 5, 3, dtype=D)
    assert torch.allclose(subject.model(x), rnn(x)[0], atol=1e-12)
    report = bound_report(subject, length=5, data_bound=1.0)
    assert report["W_norm_bound"] == pytest.approx(1.2) and report["corollary1"] is not None
    assert torch.allclose(subject.model.singular_values(), torch.linalg.svdvals(rnn.weight_hh_l0.detach()))


def test_hostile_pickle_is_refused_and_runs_nothing(tmp_path, capsys):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"weight_hh_l0": Payload()}, tmp_path / "evil.pt")
    assert main(["bound", str(tmp_path / "evil.pt"), "--length", "5", "--data-bound", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs more than weights" in err[0] and "GLOBAL" in err[0]
    assert not marker.exists()


def test_bad_models_get_one_line_reasons(tmp_path):
    torch.save(nn.RNN(3, 4, bidirectional=True).state_dict(), tmp_path / "bi.pt")
    with pytest.raises(SubjectError, match="bidirectional"):
        load(tmp_path / "bi.pt")
    torch.save(nn.GRU(3, 4).state_dict(), tmp_path / "gru.pt")
    wrong_family = r"--arch \(arch=\) lstm needs weight_hh_l0 with 4n = 16 rows.*a gru"
    with pytest.raises(SubjectError, match=wrong_family):
        load(tmp_path / "gru.pt", arch="lstm")
    state = nn.LSTM(3, 4).state_dict()
    del state["bias_hh_l0"]
    torch.save(state, tmp_path / "partial.pt")
    with pytest.raises(SubjectError, match=r"missing \['bias_hh_l0'\]"):
        load(tmp_path / "partial.pt")
    torch.save({"a.weight": torch.zeros(3, 4), "b.weight": torch.zeros(2, 4), **nn.RNN(2, 4).state_dict()},
               tmp_path / "heads.pt")
    with pytest.raises(SubjectError, match="several possible heads.*--head-prefix"):
        load(tmp_path / "heads.pt", arch="rnn_tanh")
    assert load(tmp_path / "heads.pt", arch="rnn_tanh", head_prefix="b").model.output_size == 2
    with pytest.raises(SubjectError, match=r"--head-prefix \(head_prefix=\) 'c'"):
        load(tmp_path / "heads.pt", arch="rnn_tanh", head_prefix="c")
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(SubjectError, match="not a state_dict"):
        load(tmp_path / "list.pt")
    with pytest.raises(SubjectError, match="no recurrent weights"):
        load(nn.Linear(3, 4))
    torch.save({**{f"enc.{k}": v for k, v in nn.RNN(2, 4).state_dict().items()},
                **{f"dec.{k}": v for k, v in nn.GRU(2, 4).state_dict().items()}}, tmp_path / "two.pt")
    with pytest.raises(SubjectError, match=r"several recurrent modules \(weight_hh_l0 under \['dec.', 'enc."):
        load(tmp_path / "two.pt", arch="rnn_tanh")
    with pytest.raises(SubjectError, match=r"--arch \(arch=\) must be one of"):
        load(nn.RNN(2, 3), arch="transformer")


def test_user_data_errors_name_the_problem(tmp_path, plain, capsys):
    np.save(tmp_path / "flat.npy", np.zeros((4, 3)))
    np.save(tmp_path / "nan.npy", np.full((4, 3, 2), np.nan))
    np.save(tmp_path / "ok.npy", np.zeros((4, 3, 2)))
    np.save(tmp_path / "labels5.npy", np.arange(5))
    np.save(tmp_path / "big.npy", np.array([0, 1, 2, 7]))
    with pytest.raises(ValueError, match=r"shape \(N, T, n_i\)"):
        load_user_data(tmp_path / "flat.npy")
    with pytest.raises(ValueError, match="NaN or inf"):
        load_user_data(tmp_path / "nan.npy")
    with pytest.raises(ValueError, match=r"labels must have shape \(4,\)"):
        load_user_data(tmp_path / "ok.npy", tmp_path / "labels5.npy")
    model = str(plain / "gru1.pt")
    data = ["--inputs", str(tmp_path / "ok.npy"), "--labels", str(tmp_path / "big.npy")]
    assert main(["bound", model, *data]) == 1
    assert "outside the head's 3 classes" in capsys.readouterr().err
    np.savetxt(tmp_path / "rows.csv", np.zeros((4, 6)), delimiter=",")
    assert load_user_data(tmp_path / "rows.csv", input_size=2).inputs.shape == (4, 3, 2)
    assert main(["analyze", model, "--out", str(tmp_path / "a")]) == 1
    assert "--inputs" in capsys.readouterr().err


def test_public_entry_point_and_stacked_rnn_refusal(plain, tmp_path):
    with pytest.raises(ValueError, match="give --arch rnn_tanh or --arch rnn_relu"):
        spectral_analysis.load(str(plain / "rnn2.pt"))  # relu weights: read as tanh they would lie
    subject = spectral_analysis.load(str(plain / "rnn2.pt"), arch="rnn_relu")
    assert subject.model.num_layers == 2 and subject.architecture == "rnn_relu"
    lightning = {"state_dict": torch.load(plain / "rnn2.pt", weights_only=True),
                 "hyper_parameters": {"model": {"nonlinearity": "relu", "hidden_size": 16}}}
    torch.save(lightning, tmp_path / "lightning.ckpt")  # a Lightning checkpoint records it
    recorded = spectral_analysis.load(str(tmp_path / "lightning.ckpt"))
    assert recorded.architecture == "rnn_relu" and "hyper_parameters" in " ".join(recorded.assumptions)
    x = torch.from_numpy(np.load(plain / "inputs.npy"))[:4]
    assert torch.equal(recorded.model(x), subject.model(x))
    with pytest.raises(ValueError, match="stacks 2, so layer 2 reads h_t"):
        bound_report(subject, length=12, data_bound=1.0)


def test_gru_fused_kernel_equals_the_reference_loop_and_symbol_ids():
    torch.manual_seed(6)
    model = build_model("gru", 4, 6, 2, num_layers=2).double()
    with torch.no_grad():
        for b in (*model.biases, *model.recurrent_biases):
            b.normal_()
    x = torch.randn(3, 7, 4, dtype=D)
    assert torch.allclose(model.run(x, recurrence="torch").outputs, model.run(x, recurrence="loop").outputs,
                          atol=1e-12)
    grads = []
    for route in ("torch", "loop"):  # the loop's backward (unbind) is torch.gru's too
        model.zero_grad()
        model.run(x, recurrence=route).outputs.square().sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(*grads, strict=True))
    ids = torch.randint(0, 4, (3, 7))
    one_hot = nn.functional.one_hot(ids, 4).to(D)
    assert torch.allclose(model(ids), model(one_hot), atol=1e-12)


def test_no_read_out_or_input_is_guessed_around_an_embedding(tmp_path):
    """A language model's embedding is neither taken for the read-out nor silently skipped: the import
    refuses symbol ids it would read as one-hot vectors, and a bias-free weight as wide as the input
    must be named with --head-prefix."""
    torch.manual_seed(8)
    lm = nn.ModuleDict({"embedding": nn.Embedding(12, 8), "rnn": nn.RNN(8, 8, nonlinearity="relu")})
    torch.save(lm.state_dict(), tmp_path / "lm.pt")
    subject = load(tmp_path / "lm.pt", arch="rnn_relu")
    assert subject.model.output_size == 8  # no head: the identity read-out, not the 12-row embedding
    assert any("embedding.weight (12, 8) may feed" in a for a in subject.assumptions)
    with pytest.raises(ValueError, match=r"imported without embedding.weight \(12, 8\)"):
        subject.model(torch.randint(0, 8, (2, 5)))
    assert subject.model(torch.randn(2, 5, 8)).shape == (2, 5, 8)  # the vectors the embedding makes
    torch.save({"table.weight": lm["embedding"].weight.detach(), **lm["rnn"].state_dict()},
               tmp_path / "unnamed.pt")
    with pytest.raises(SubjectError, match=r"table.weight \(12, 8\) has no bias .* --head-prefix"):
        load(tmp_path / "unnamed.pt", arch="rnn_relu")
