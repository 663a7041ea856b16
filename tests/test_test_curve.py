"""``test_with_valid``: the test set scored at each validation (a test curve, and the test metric where
validation is best, ICML Table 4's protocol) without changing the run, across resumes, and kept."""

import json

import torch
from experiment_fixtures import TINY, run_tiny, tiny_catalog
from train_fixtures import log_lines, small_config

from spectral_analysis.experiments.results import read_curves
from spectral_analysis.train import Trainer, load_checkpoint, train


def _strip(lines, phase):
    return [{k: v for k, v in line.items() if k != "time"} for line in lines if line["phase"] == phase]


def test_scoring_the_test_set_at_each_validation_changes_nothing_else(tmp_path):
    plain = train(small_config(tmp_path / "plain"))
    curve = train(small_config(tmp_path / "curve", test_with_valid=True))
    lines = log_lines(tmp_path / "curve")
    valid_steps = [line["step"] for line in lines if line["phase"] == "valid"]
    assert [line["step"] for line in lines if line["phase"] == "test"] == valid_steps == [8, 16, 24]
    assert lines[-1]["phase"] == "test"  # the end's test line comes last, and once (the steps above)
    for phase in ("train", "valid"):
        assert _strip(lines, phase) == _strip(log_lines(tmp_path / "plain"), phase)
    assert _strip([curve["test"]], "test") == _strip([plain["test"]], "test")
    a = load_checkpoint(tmp_path / "plain" / "last.safetensors").tensors
    b = load_checkpoint(tmp_path / "curve" / "last.safetensors").tensors
    assert all(torch.equal(a[k], b[k]) for k in a)
    tests = _strip(lines, "test")
    assert tests[0] != tests[-1]  # the curve moves: its points are not the end's line repeated


def test_a_resumed_or_extended_run_has_the_test_curve_of_one_run(tmp_path):
    whole = small_config(tmp_path / "whole", test_with_valid=True, max_steps=40, checkpoint_every=4)
    train(whole)
    Trainer(small_config(tmp_path / "cut", test_with_valid=True, max_steps=40,
                         checkpoint_every=4)).run(stop=lambda step: step == 13)
    train(small_config(tmp_path / "cut", test_with_valid=True, max_steps=40, checkpoint_every=4), resume=True)
    train(small_config(tmp_path / "extended", test_with_valid=True, checkpoint_every=4))  # ends at 24
    train(small_config(tmp_path / "extended", test_with_valid=True, max_steps=40, checkpoint_every=4),
          resume=True)
    expected = [(line["phase"], line["step"]) for line in log_lines(tmp_path / "whole")]
    for run in ("cut", "extended"):
        lines = log_lines(tmp_path / run)
        assert [(line["phase"], line["step"]) for line in lines] == expected, run
        assert _strip(lines, "test") == _strip(log_lines(tmp_path / "whole"), "test"), run


def test_the_kept_row_has_the_test_metric_where_validation_was_best(tmp_path):
    catalog = tiny_catalog(tmp_path, TINY.replace("eval_every = 4", "eval_every = 2\ntest_with_valid = true"))
    _, rows = run_tiny(tmp_path, catalog)
    for row in rows:
        lines = [json.loads(x) for x in (tmp_path / "runs" / row["trial"] / "metrics.jsonl").read_text()
                 .splitlines()]
        tests = {line["step"]: line for line in lines if line["phase"] == "test"}
        assert sorted(tests) == [2, 4, 6, 8]
        assert row["test_at_best_valid"]["mse"] == tests[row["best_step"]]["mse"]
        assert row["test_metrics"]["mse"] == tests[8]["mse"]
        kept = read_curves(tmp_path / "results" / "tiny" / "smoke" / row["trial"])["test"]
        assert list(kept["step"]) == [2, 4, 6, 8]
