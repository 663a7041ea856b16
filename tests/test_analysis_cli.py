"""The analyzer commands on real checkpoints: weights, bound, analyze; their errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from spectral_analysis.analysis.network import Eq17Network
from spectral_analysis.cli import main
from spectral_analysis.nn import build_model
from spectral_analysis.train import TrainConfig, load_checkpoint, save_checkpoint, train

SMALL_ADDITION = {"length": 12, "train_size": 60, "valid_size": 20, "test_size": 20}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("analysis-runs")
    common = {"batch_size": 20, "record_every": 5, "eval_every": 20, "checkpoint_every": 20,
              "progress": False}
    train(TrainConfig(model="spectral", task="ucr", out=str(root / "ucr"), hidden=12, steps=40,
                      model_options={"m1": 4, "m2": 4, "output_bias": True},
                      task_options={"dataset": "GunPoint"}, lr=3e-3, **common))
    train(TrainConfig(model="rnn", task="addition", out=str(root / "rnn"), hidden=8, steps=20,
                      task_options=SMALL_ADDITION, **common))
    train(TrainConfig(model="lstm", task="addition", out=str(root / "lstm"), hidden=6, steps=20,
                      task_options=SMALL_ADDITION, **common))
    mlp = build_model("mlp", 4, 8, 3)
    save_checkpoint(root / "mlp.safetensors", mlp, {"task": {"name": "mnist-flat", "length": 1}})
    return root


def run_json(capsys, *args: str) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_bound_json_with_training_margins(runs, capsys):
    ckpt = str(runs / "ucr" / "last.safetensors")
    report = run_json(capsys, "bound", ckpt, "--data", "train", "--margin", "0.05")
    for key in ("log10_G", "T", "h", "B", "gamma", "norms", "margin_loss", "bound", "explicit", "corollary1"):
        assert key in report
    assert report["gamma"] == 0.05 and report["data"] == "train" and report["m"] == 40
    assert report["absorbed"] == {"constant_input": True, "output_unit": True}
    assert report["h"] == max(report["n"], report["n_i"], report["n_y"]) == 13
    assert report["B"] == pytest.approx(math.sqrt(report["B_inputs"] ** 2 + 1))
    assert report["log10_G"] == pytest.approx(sum(report["factors"].values()))
    assert report["corollary1"]["W_norm_used"] == pytest.approx(1.1)
    assert 0 <= report["margin_loss"] <= 1 and report["vacuous"] is True
    test = run_json(capsys, "bound", ckpt, "--data", "test", "--margin", "0.05")
    assert test["data"] == "test" and test["train_margin_loss"] == report["margin_loss"]
    longer = run_json(capsys, "bound", ckpt, "--length", "784", "--data-bound", "2")
    assert longer["T"] == 784 and longer["B"] == pytest.approx(math.sqrt(5)) and longer["gamma"] == 1.0
    assert longer["margin_loss"] is None and longer["bound"] is None


def test_weights_npz_recomputes_the_model_and_the_bound(runs, capsys, tmp_path):
    ckpt = runs / "ucr" / "last.safetensors"
    out = tmp_path / "w.npz"
    run_json(capsys, "weights", str(ckpt), "--out", str(out))
    arrays = np.load(out)
    checkpoint = load_checkpoint(ckpt)
    model = checkpoint.model.double()
    W, M, Y = (torch.from_numpy(arrays[k]) for k in ("W", "M", "Y"))
    net = Eq17Network(W, M, Y, model.activation, model.leak, False, bool(arrays["constant_input"]),
                      bool(arrays["output_unit"]), model.input_size, None)
    x = torch.randn(3, 15, model.input_size, dtype=torch.float64)
    assert torch.allclose(net.final(net.inputs(x))[1], model(x)[:, -1], atol=1e-10)
    report = run_json(capsys, "bound", str(ckpt))
    norms = [np.linalg.norm(arrays[k], 2) for k in ("W", "M", "Y")]
    w2 = sum(np.linalg.norm(arrays[k]) ** 2 for k in ("W", "M", "Y"))
    h, T, B = report["h"], report["T"], report["B"]
    by_hand = (2 * math.log10(B) + 4 * math.log10(T) + math.log10(h * math.log(h)) + math.log10(w2)
               + max(0.0, (2 * T - 2) * math.log10(norms[0])) + max(0.0, 2 * math.log10(norms[1]))
               + max(0.0, 2 * math.log10(norms[2])))
    assert report["log10_G"] == pytest.approx(by_hand, rel=1e-10)


@pytest.mark.slow
def test_analyze_writes_report_and_figures(runs, capsys, tmp_path):
    out = tmp_path / "analysis"
    report = run_json(capsys, "analyze", str(runs / "rnn" / "last.safetensors"), "--out", str(out),
                      "--samples", "3", "--trials", "3")
    T = 12
    assert len(report["jacobian_norms"]) == len(report["grad_norms"]) == T + 1
    assert len(report["lyapunov_exponents"]) == 8
    assert report["perturbation"]["holds"] and report["jacobian_bound_holds"]
    assert report["bound"]["gamma_source"] == "default (no data)"
    assert len(report["state_norm_max"]) == len(report["state_norm_median"]) == T + 1
    assert report["state_norm_max"][0] == 0.0  # the zero start state
    assert all(top >= middle > 0 for top, middle in zip(report["state_norm_max"][1:],
                                                         report["state_norm_median"][1:], strict=True))
    assert [row["step"] for row in report["trajectory"]] == [5, 10, 15, 20]
    for name in ("report.json", "report.md", "jacobians.png", "lyapunov.png", "trajectory.png",
                 "singular_values.png"):
        assert (out / name).stat().st_size > 0
    assert json.loads((out / "report.json").read_text())["grad_norms"] == report["grad_norms"]
    markdown = (out / "report.md").read_text()
    assert "## Lyapunov exponents" in markdown
    largest = int(np.argmax(report["state_norm_max"]))
    assert f"The state (h, and an LSTM's cells) is largest at t = {largest}: " in markdown
    top = max(report["trajectory"], key=lambda row: row["grad_norm_peak"])
    assert f"in the steps up to {top['step']} " in markdown and top["grad_norm_peak"] > 0


@pytest.mark.slow
def test_the_analysis_figure_says_how_many_values_it_could_not_draw(runs, capsys, tmp_path, monkeypatch):
    """A singular J(t) (infinite condition number) or an overflowed state is null in report.json; the
    panel says how many it left out instead of drawing an unexplained gap (or nothing at all)."""
    from spectral_analysis.plotting import analysis as plotting

    report = run_json(capsys, "analyze", str(runs / "rnn" / "last.safetensors"), "--out", str(tmp_path),
                      "--samples", "2", "--trials", "2")
    figures = []
    monkeypatch.setattr(plotting, "save_figure", lambda fig, path: figures.append(fig) or path)

    def notes() -> list[str]:
        figures.clear()
        plotting.plot_analysis(report, tmp_path / "figures")
        return [" ".join(ax.get_title().split()) for ax in figures[0].axes]

    assert not any("not drawn" in note for note in notes())  # a healthy report: every value drawn
    T1 = len(report["jacobian_log10_condition"])
    report["jacobian_log10_condition"] = [None] * T1
    report["state_norm_max"][-3:] = [None] * 3
    drawn = notes()
    assert f"{T1} of {T1} not drawn: infinite (J(t) singular in a sample) or undefined (J(t) = 0)" in drawn
    assert f"3 of {T1} not drawn: the largest state overflowed float64" in drawn


@pytest.mark.slow
def test_analyze_works_for_an_lstm_and_explains_what_it_skips(runs, capsys, tmp_path):
    report = run_json(capsys, "analyze", str(runs / "lstm" / "last.safetensors"), "--out", str(tmp_path),
                      "--samples", "2", "--trials", "2")
    assert "LSTM" in report["bound"]["skipped"] and "LSTM" in report["perturbation"]["skipped"]
    assert len(report["lyapunov_exponents"]) == 12  # the state (h, c)
    assert report["jacobian_log10_bound"] is None and len(report["grad_norms"]) == 13


@pytest.mark.parametrize("args, needle", [
    (["--margin", "0"], "margin gamma must be > 0"),
    (["--margin", "-0.5"], "margin gamma must be > 0"),
    (["--delta", "1"], "delta must lie in (0, 1)"),
    (["--delta", "0"], "delta must lie in (0, 1)"),
    (["--data-bound", "-1"], "data bound B must be > 0"),
    (["--data", "train", "--margin-quantile", "1.5"], "quantile must lie in (0, 1)"),
])
def test_bound_errors_name_the_problem(runs, capsys, args, needle):
    assert main(["bound", str(runs / "ucr" / "last.safetensors"), *args]) == 1
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("checkpoint, extra, needle", [
    ("mlp.safetensors", [], "not a recurrent model"),
    ("lstm/last.safetensors", [], "LSTM"),
    ("rnn/last.safetensors", ["--data", "train"], "regression-last"),
])
def test_bound_refuses_models_and_tasks_outside_the_theorem(runs, capsys, checkpoint, extra, needle):
    assert main(["bound", str(runs / checkpoint), *extra]) == 1
    assert needle in capsys.readouterr().err


def test_corrupt_checkpoint_is_refused(tmp_path, capsys):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint at all")
    assert main(["bound", str(bad)]) == 1
    assert "neither a safetensors nor a torch.save file" in capsys.readouterr().err


def test_a_diverged_model_is_exported_by_weights_and_refused_by_the_analyzers_with_the_weight_named(
        runs, capsys, tmp_path):
    checkpoint = load_checkpoint(runs / "rnn" / "last.safetensors")
    with torch.no_grad():
        checkpoint.model.transitions[0].weight[0, 0] = float("nan")
    diverged = tmp_path / "diverged.safetensors"
    save_checkpoint(diverged, checkpoint.model, checkpoint.metadata)
    for command in (["analyze", str(diverged), "--out", str(tmp_path / "a")], ["bound", str(diverged)]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert "weight 'transitions.0.weight' has 1 non-finite entries" in err and "Traceback" not in err
    out = tmp_path / "w.npz"
    assert main(["weights", str(diverged), "--allow-nonfinite", "--out", str(out)]) == 0
    assert int(np.isnan(np.load(out)["W"]).sum()) == 1
    with pytest.raises(SystemExit):  # the analyzers that need singular values do not take the flag
        main(["analyze", str(diverged), "--allow-nonfinite", "--out", str(tmp_path / "a")])
