"""The Fig. 3 and Fig. 5 checks: the forward gain against closed forms, the plain-ends option, the
verdict logic on made-up results (no training), and one tiny real sweep."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from spectral_analysis.nn import build_model
from spectral_analysis.nn.feedforward import SpectralLinear
from spectral_analysis.paper import depth, mnist_ranking
from spectral_analysis.paper.depth import PLAIN_ENDS, DepthRun, depth_sweep, forward_gain, records_from_runs
from spectral_analysis.plotting.paper_figures import plot_depth_sweep


def test_forward_gain_is_zero_for_orthogonal_linear_layers_and_l_log2_for_doubled_ones():
    torch.manual_seed(0)
    x = torch.randn(7, 12)
    # leak 1: phi is the identity; sigma starts at sigma* = 1, so every hidden W is orthogonal
    spectral = build_model("spectral-mlp", 12, 6, 3, num_layers=5, leak=1.0)
    assert forward_gain(spectral, x) == pytest.approx(0.0, abs=1e-6)
    plain = build_model("mlp", 12, 6, 3, num_layers=5, leak=1.0)
    with torch.no_grad():
        for layer in plain.hidden_layers:
            layer.weight.copy_(2 * torch.linalg.qr(torch.randn(6, 6))[0])
    assert forward_gain(plain, x) == pytest.approx(5 * math.log10(2), abs=1e-6)


def test_plain_ends_keeps_only_the_hidden_layers_spectral():
    net = build_model("spectral-resnet", 784, 16, 10, num_layers=4, plain_ends=True)
    assert type(net.input_layer) is nn.Linear and type(net.output) is nn.Linear
    assert all(isinstance(layer, SpectralLinear) for layer in net.hidden_layers)
    counts = net.parameter_counts()
    assert counts["input"] == 784 * 16 and counts["output"] == 16 * 10
    every = build_model("spectral-resnet", 784, 16, 10, num_layers=4)
    assert isinstance(every.output, SpectralLinear) and every.config["options"]["plain_ends"] is False
    assert every.parameter_counts()["transition"] == counts["transition"]


def _runs(table: dict[str, dict[int, float]]) -> dict[str, dict[int, DepthRun]]:
    return {m: {d: DepthRun(a, np.arange(2), np.array([0.1, a]), -1.0, 0.0) for d, a in v.items()}
            for m, v in table.items()}


def test_depth_verdicts_follow_the_accuracies():
    as_claimed = _runs({"mlp": {10: 0.9, 40: 0.2}, "resnet": {10: 0.9, 40: 0.85},
                        "spectral-mlp": {10: 0.9, 40: 0.8}, "spectral-resnet": {10: 0.9, 40: 0.86},
                        "spectral-mlp" + PLAIN_ENDS: {10: 0.9, 40: 0.1},
                        "spectral-resnet" + PLAIN_ENDS: {10: 0.9, 40: 0.9}})
    records = records_from_runs(as_claimed, "made up")
    assert [r.verdict for r in records] == ["holds", "holds", "differs", "differs"]
    assert records[0].numbers["accuracy"]["spectral-mlp"][40] == 0.8
    assert "as claimed for spectral-resnet (plain ends)" in records[3].evidence
    # within the 0.02 tolerance counts as resilient; beyond it does not
    as_claimed["spectral-mlp"][40].accuracy = 0.9 - 0.7 - 0.019
    assert records_from_runs(as_claimed, "made up")[1].verdict == "holds"
    as_claimed["spectral-mlp"][40].accuracy = 0.9 - 0.7 - 0.03
    assert records_from_runs(as_claimed, "made up")[1].verdict == "differs"


def test_mnist_ranking_verdict_names_the_best_model(monkeypatch):
    results = iter([{"rnn": 0.3, "irnn": 0.6, "ornn": 0.2, "spectral": 0.5, "lstm": 0.4},
                    {"rnn": 0.3, "irnn": 0.2, "ornn": 0.2, "spectral": 0.7, "lstm": 0.4}])
    monkeypatch.setattr(mnist_ranking, "final_test_accuracy", lambda *args: next(results))
    pixel, permuted = mnist_ranking.run(quick=True)
    assert pixel.verdict == "differs" and "best first: irnn 0.600, spectral 0.500" in pixel.evidence
    assert permuted.verdict == "holds" and permuted.numbers["steps_per_sequence"] == 196


def test_a_tiny_depth_sweep_trains_and_reports(tmp_path, monkeypatch):
    monkeypatch.setattr(depth, "TEST_BATCHES", 2)
    runs = depth_sweep((2,), hidden=8, steps=4, models=("mlp", "spectral-mlp"), options=None)
    for model in ("mlp", "spectral-mlp"):
        run = runs[model][2]
        assert 0 <= run.accuracy <= 1 and run.steps[-1] == 4 and len(run.valid_accuracy) == len(run.steps)
        assert math.isfinite(run.log10_gain_at_init) and run.log10_gain_trained != run.log10_gain_at_init
    accuracy = {m: {d: r.accuracy for d, r in v.items()} for m, v in runs.items()}
    curves = {m: (v[2].steps, v[2].valid_accuracy) for m, v in runs.items()}
    accuracy["mlp (variant)"], curves["mlp (variant)"] = accuracy["mlp"], curves["mlp"]
    out = plot_depth_sweep(accuracy, curves, 2, "t", tmp_path / "fig5.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
