"""The Fig. 5 check: the forward gain against closed forms, the plain-ends option and the verdict logic on
made-up results (the checks read kept results: tests/test_experiment_claims.py)."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from spectral_analysis.nn import build_model
from spectral_analysis.nn.feedforward import SpectralLinear
from spectral_analysis.paper.depth import (
    PLAIN_ENDS,
    DepthRun,
    failure_depth_records,
    forward_gain,
    records_from_runs,
    resilient,
    stops_around,
    stops_training_from,
    trains_where_plain_fails,
)


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


def _runs(table: dict[str, dict[int, float | list[float]]]) -> dict[str, dict[int, DepthRun]]:
    def seeds(a: float | list[float]) -> list[float]:
        return list(a) if isinstance(a, list) else [a - 0.004, a, a + 0.004]
    return {m: {d: DepthRun(seeds(a), np.arange(2), np.array([0.1, a if isinstance(a, float) else a[0]]),
                            -1.0, 0.0) for d, a in v.items()}
            for m, v in table.items()}


def test_depth_verdicts_follow_the_accuracies_over_seeds():
    as_claimed = _runs({"mlp": {10: 0.9, 40: 0.2}, "resnet": {10: 0.9, 40: 0.85},
                        "spectral-mlp": {10: 0.9, 40: 0.8}, "spectral-resnet": {10: 0.9, 40: 0.86},
                        "spectral-mlp" + PLAIN_ENDS: {10: 0.9, 40: 0.1},
                        "spectral-resnet" + PLAIN_ENDS: {10: 0.9, 40: 0.9}})
    records = records_from_runs(as_claimed, "made up")
    assert [r.verdict for r in records] == ["holds", "holds", "differs", "differs"]
    # the plain nets' failure depths: MLP fails from L = 40, one grid step from 35; ResNet trains on
    failures = failure_depth_records(as_claimed, "made up")
    assert [r.verdict for r in failures] == ["holds", "differs"]
    # another reading of the MLP is read against MLP's stated depth, its reading named in the claim
    as_claimed["mlp-he"] = _runs({"mlp-he": {10: 0.9, 40: 0.85}})["mlp-he"]
    he = failure_depth_records(as_claimed, "made up", {"mlp-he": ("mlp", "He's start")})
    assert [r.verdict for r in he] == ["differs"] and "plain mlp (He's start) stops" in he[0].claim
    assert he[0].evidence.startswith("made up: mlp-he L = 10") and he[0].numbers["stated_depth"] == 35
    del as_claimed["mlp-he"]
    assert "every seed fails from L = 40" in failures[0].evidence
    assert "every seed trains at the deepest L" in failures[1].evidence
    assert records[0].numbers["accuracy"]["spectral-mlp"][40] == pytest.approx(0.8)
    assert "spectral-resnet (plain ends) holds" in records[3].evidence
    # the trained gain is quoted only where a checkpoint gave one
    assert "spectral-mlp -1.00 -> 0.00," in records[0].evidence
    as_claimed["mlp"][40].log10_gain_trained = math.nan
    assert "mlp -1.00, resnet -1.00 -> 0.00" in records_from_runs(as_claimed, "made up")[0].evidence
    # within the 0.02 tolerance counts as resilient; beyond it does not
    for model, shallow, deep in (("mlp", 0.9, 0.2), ("spectral-mlp", 0.9, 0.9 - 0.7 - 0.019)):
        as_claimed[model][10].accuracies, as_claimed[model][40].accuracies = [shallow] * 3, [deep] * 3
    assert records_from_runs(as_claimed, "made up")[1].verdict == "holds"
    as_claimed["spectral-mlp"][40].accuracies = [0.9 - 0.7 - 0.03] * 3
    assert records_from_runs(as_claimed, "made up")[1].verdict == "differs"
    # a net that explodes at initialization (forward gain 10^12 through the depth, Fig. 5's Spectral-ResNet
    # under this grid's unstated block and initialization) cannot carry the differs: it reads inconclusive
    as_claimed["spectral-mlp"][40].log10_gain_at_init = 12.2
    exploding = records_from_runs(as_claimed, "made up")[1]
    assert exploding.verdict == "inconclusive" and exploding.numbers["exploding_at_init"] == {
        "spectral-mlp": 12.2}
    assert "spectral-mlp's differs does not count: its forward gain at initialization is 10^12.2" in \
        exploding.evidence


def test_a_spectral_net_at_chance_does_not_train_even_when_it_beats_the_plain_one():
    """Fig. 5 at L = 100 so far: every net near chance; beating MLP by a point is not 'trains'."""
    assert trains_where_plain_fails([0.114, 0.113, 0.115], [0.098, 0.101, 0.103]) == "differs"
    assert trains_where_plain_fails([0.93, 0.95, 0.94], [0.10, 0.11, 0.10]) == "holds"
    assert trains_where_plain_fails([0.45, 0.95, 0.94], [0.10, 0.11, 0.10]) == "inconclusive"
    assert trains_where_plain_fails([0.60, 0.95, 0.94], [0.10, 0.11, 0.70]) == "inconclusive"
    assert trains_where_plain_fails([0.60, 0.62, 0.61], [0.90, 0.91, 0.92]) == "differs"


def test_resilience_is_judged_on_each_seeds_drop_with_the_tolerance():
    assert resilient([0.01, 0.02, 0.03], [0.5, 0.6, 0.7]) == "holds"
    assert resilient([0.50, 0.55, 0.60], [0.01, 0.02, 0.03]) == "differs"
    assert resilient([0.01, 0.40], [0.1, 0.2]) == "inconclusive"
    assert resilient([0.11], [0.1]) == "holds"  # 0.01 more than the plain net's: inside the tolerance


def test_where_a_plain_net_stops_training_is_read_two_ways_and_judged_within_one_grid_step():
    """Fig. 5's grid (L = 30, 40, 50, 70, 100): the paper's MLP stops "around L ~ 35", its ResNet "with
    L ~ 70"; a depth counts when it is within one grid step of the grid depths nearest the stated one."""
    chance, trained = 0.114, 0.95
    mlp = _runs({"mlp": {30: [0.81, 0.88, 0.95], 40: [0.81, chance, 0.89], 50: [chance] * 3,
                         70: [chance] * 3, 100: [chance] * 3}})["mlp"]
    assert stops_training_from(mlp, every_seed=False) == 40
    assert stops_training_from(mlp, every_seed=True) == 50
    assert stops_around(mlp, 35) == ("holds", [30, 40, 50])  # 30 and 40 tie as nearest
    assert stops_around(mlp, 70)[0] == "inconclusive"  # every seed fails from 50 (in), some from 40 (out)
    resnet = _runs({"resnet": {d: [trained] * 3 for d in (30, 40, 50, 70)} | {100: [0.96, 0.95, 0.83]}})
    resnet = resnet["resnet"]
    assert stops_training_from(resnet, every_seed=False) is None
    assert stops_around(resnet, 70) == ("differs", [50, 70, 100])
    split = _runs({"m": {30: [trained] * 3, 40: [trained] * 3, 50: [trained] * 3,
                         70: [trained, chance, chance], 100: [chance] * 3}})["m"]
    assert stops_around(split, 35) == ("differs", [30, 40, 50])
    assert stops_around(split, 50) == ("inconclusive", [40, 50, 70])  # some seed from 70, every seed from 100
    # a depth that trains again deeper down does not count as where the net stopped
    again = _runs({"m": {30: [chance] * 3, 40: [trained] * 3, 50: [chance] * 3}})["m"]
    assert stops_training_from(again, every_seed=True) == 50


def test_thestart_model_is_the_net_the_trainer_started_from(tmp_path):
    """The at-init forward gain needs no kept checkpoint: the trial's configuration and seed rebuild the
    start. A 1e-12 learning rate leaves the trained net at its start, so the two gains agree."""
    from spectral_analysis.data import load_task
    from spectral_analysis.paper.depth import start_model
    from spectral_analysis.train import TrainConfig, load_checkpoint, train

    options = {"num_layers": 3, "plain_ends": True}
    config = TrainConfig(model="spectral-mlp", task="mnist-flat", out=str(tmp_path / "run"), hidden=6,
                         steps=1, lr=1e-12, batch_size=8, seed=3, model_options=options,
                         task_options={"train_size": 32}, progress=False)
    train(config)
    task = load_task("mnist-flat", train_size=32)
    row = {"seed": 3, "config": {"model": "spectral-mlp", "hidden": 6, "model_options": options}}
    probe = task.test.inputs[:50]
    trained = load_checkpoint(tmp_path / "run" / "last.safetensors").model
    trained_gain = forward_gain(trained, probe)
    assert forward_gain(start_model(row, task), probe) == pytest.approx(trained_gain, abs=1e-6)
    assert forward_gain(start_model({**row, "seed": 4}, task), probe) != pytest.approx(trained_gain, abs=1e-3)


@pytest.mark.slow
def test_plain_failure_depths_read_every_kept_seed_while_an_svd_cell_has_one(tmp_path, monkeypatch):
    """The kept paper-scale grid with one SVD cell cut to seed 0: the grid is read with 1 seed, yet MLP
    and ResNet, complete with 3 seeds, are judged on all 3 (read from a copy of results/fig5-depth)."""
    import shutil

    from spectral_analysis.io.zoo import default_results_dir
    from spectral_analysis.paper import depth

    kept = default_results_dir() / "fig5-depth" / "paper"
    for trial in kept.glob("*_s[0-9]"):
        if trial.name.startswith("spectral-resnet_num_layers30_s") and not trial.name.endswith("_s0"):
            continue
        (tmp_path / "fig5-depth" / "paper" / trial.name).mkdir(parents=True)
        for name in ("result.json", "curves.csv"):
            shutil.copy(trial / name, tmp_path / "fig5-depth" / "paper" / trial.name / name)
    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path))
    records = depth.run()
    plain = [r for r in records if r.claim.startswith("plain ")]
    assert [r.claim.split()[1] for r in plain] == ["mlp", "resnet", "mlp"]
    assert "(He et al. (2015)'s initialization" in plain[2].claim
    assert "(" not in plain[0].claim.split("stops")[0]
    assert all(r.scale == "paper" and r.seeds == 3 and r.verdict != "unverified" for r in plain)
    assert all(r.seeds == 1 and r.verdict == "unverified" for r in records if r not in plain)


def test_the_shallow_fig5_claims_compare_seeds_with_resnet_and_mlps_early_accuracy():
    from experiment_fixtures import ROOT

    from spectral_analysis.experiments.reading import read_grid
    from spectral_analysis.experiments.results import read_curves
    from spectral_analysis.paper.depth import EARLY_EVALUATIONS, shallow_records, similar
    from spectral_analysis.paper.kept import every

    assert similar([0.95, 0.96], [0.96, 0.97]) == "holds"  # within 0.02 of ResNet's range
    assert similar([0.94, 0.96], [0.965, 0.975]) == "inconclusive"  # one seed 0.025 below
    assert similar([0.90, 0.92], [0.965, 0.975]) == "differs"  # every seed more than 0.02 below
    assert similar([1.0, 1.0], [0.90, 0.95]) == "differs"  # better by more counts as dissimilar too
    grid = read_grid(ROOT / "results", "fig5-depth")
    every_layer, plain_ends, slower = shallow_records(grid, "kept")
    assert "(L = 30)" in slower.claim and "plain input and output layers" in plain_ends.claim

    def early(variant: str) -> list[float]:  # the mean of each seed's first validation records, read directly
        dirs = grid.group(variant, num_layers=30).dirs
        return [float(np.mean(read_curves(d)["valid"]["accuracy"][:EARLY_EVALUATIONS])) for d in dirs]

    mlp, resnet = early("mlp"), early("resnet")
    assert slower.numbers["early_validation_accuracy"]["mlp"] == pytest.approx(mlp)
    assert ("resnet holds" in slower.evidence) == (min(resnet) > max(mlp))
    accuracies = every_layer.numbers["test_accuracy"]
    expected = [similar(accuracies[n], accuracies["resnet"]) for n in ("spectral-mlp", "spectral-resnet")]
    assert every_layer.verdict == every(expected)
