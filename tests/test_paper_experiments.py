"""The Fig. 5 check: the forward gain against closed forms, the plain-ends option and the verdict logic on
made-up results (the checks read kept results: tests/test_experiments.py)."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from spectral_analysis.nn import build_model
from spectral_analysis.nn.feedforward import SpectralLinear
from spectral_analysis.paper.depth import PLAIN_ENDS, DepthRun, forward_gain, records_from_runs


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
