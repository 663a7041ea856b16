"""Fit evidence: a kept trial that diverged, stayed at its task's chance level or collapsed to one output
is marked unfit in its row, and a check that rests on such a trial says unverified."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from train_fixtures import small_config

from spectral_analysis.checks import CheckRecord
from spectral_analysis.data import load_task
from spectral_analysis.experiments.fitness import chance_level, trial_fitness
from spectral_analysis.experiments.reading import read_grid
from spectral_analysis.experiments.results import record_fitness
from spectral_analysis.paper import dizzy_copy
from spectral_analysis.paper.experiments import fig4_gradient_records
from spectral_analysis.paper.kept import judged, unfit_trials
from spectral_analysis.train import load_checkpoint, save_checkpoint, train

ROOT = Path(__file__).resolve().parents[1]
ADDITION = {"task": "addition", "task_options": {"length": 12, "train_size": 160, "valid_size": 32,
                                                 "test_size": 32}}


def test_a_diverged_trial_and_one_at_its_tasks_chance_level_are_unfit():
    failed = {"status": "failed", "error": "TrainingDivergedError: the gradient norm is inf at step 9",
              "last_recorded_step": 8}
    assert trial_fitness(failed, None) == {"fit": False, "reasons": [
        "diverged (the last record before it at step 8)"]}
    at_baseline = {"status": "done", "metric": "mse", "test_metrics": {"mse": 0.166}, "config": ADDITION}
    fitness = trial_fitness(at_baseline, None)
    assert not fitness["fit"] and fitness["chance"] == pytest.approx(1 / 6)
    assert fitness["reasons"][0].startswith("at chance: test mse 0.166 within 2% of the baseline 0.1667")
    learned = {**at_baseline, "test_metrics": {"mse": 0.01}}
    assert trial_fitness(learned, None)["fit"]
    # an accuracy is at chance within 3 binomial standard errors of the majority class
    coffee = load_task("ucr", dataset="Coffee")
    chance, higher = chance_level(coffee, "accuracy")
    assert higher and chance == pytest.approx(13 / 28)
    band = 3 * (chance * (1 - chance) / len(coffee.test)) ** 0.5
    row = {"status": "done", "metric": "accuracy", "config": {"task": "ucr"}}
    assert not trial_fitness({**row, "test_metrics": {"accuracy": chance + band - 1e-6}}, None, coffee)["fit"]
    assert trial_fitness({**row, "test_metrics": {"accuracy": chance + band + 1e-6}}, None, coffee)["fit"]
    # a language model at its words' frequencies (Penn Treebank's unigram) learned no context: at chance
    ptb = load_task("ptb", length=35, batch_size=20)
    unigram, higher = chance_level(ptb, "cross_entropy")
    assert not higher and unigram == ptb.baselines["cross_entropy_unigram"]
    row = {"status": "done", "metric": "cross_entropy", "config": {"task": "ptb"}}
    assert not trial_fitness({**row, "test_metrics": {"cross_entropy": 0.99 * unigram}}, None, ptb)["fit"]
    assert trial_fitness({**row, "test_metrics": {"cross_entropy": 0.97 * unigram}}, None, ptb)["fit"]


def test_a_model_whose_output_does_not_depend_on_its_input_is_collapsed(tmp_path):
    config = small_config(tmp_path / "run", model="rnn", model_options={}, steps=8)
    train(config)
    trained = load_checkpoint(tmp_path / "run" / "last.safetensors")
    row = {"status": "done", "metric": "mse", "test_metrics": {"mse": 0.01},
           "config": {"task": "addition", "task_options": config.task_options}}
    assert trial_fitness(row, tmp_path / "run" / "last.safetensors")["collapse_measured"]
    model = trained.model
    with torch.no_grad():  # the read-out sees nothing of the state: one output for every input
        for name, parameter in model.named_parameters():
            if name.startswith("output") and name.endswith("weight"):
                parameter.zero_()
    save_checkpoint(tmp_path / "flat.safetensors", model,
                    {k: v for k, v in trained.metadata.items() if k not in ("format", "format_version",
                                                                             "package_version", "model")})
    fitness = trial_fitness(row, tmp_path / "flat.safetensors")
    assert not fitness["fit"] and fitness["reasons"][0].startswith("collapsed: its predictions")


def test_record_fitness_writes_each_row_and_the_summary_column(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "dizzy-copy" / "paper", results / "dizzy-copy" / "paper")
    rows = record_fitness(results, "dizzy-copy", "paper")
    kept = json.loads((results / "dizzy-copy" / "paper" / "lstm_s0" / "result.json").read_text())
    assert kept["fitness"]["fit"] is False and "collapsed" in " ".join(kept["fitness"]["reasons"])
    assert {r["trial"]: r["fitness"]["fit"] for r in rows}["dizzy_s0"] is True
    header = (results / "dizzy-copy" / "paper" / "summary.csv").read_text().splitlines()[0].split(",")
    assert "fit" in header


def test_a_check_resting_on_an_unfit_trial_is_unverified_and_a_claim_of_no_learning_may_rest_on_chance():
    grid = read_grid(ROOT / "results", "dizzy-copy", "paper")
    rnn = [g for g in grid.groups if g.variant == "rnn"]
    unfit = unfit_trials(grid, {"rnn": rnn})
    assert unfit and all(u.startswith("rnn seed ") and "at chance" in u for u in unfit)
    assert unfit_trials(grid, {"rnn": rnn}, stays_at_chance={"rnn"}) == []  # the claim itself
    record = judged(grid, CheckRecord("src", "a claim", "holds", "the numbers", {}), unfit=unfit)
    assert record.verdict == "unverified" and "would read 'holds'" in record.evidence
    assert record.numbers["unfit_trials"] == unfit
    # DizzyRNN against baselines at chance: the comparison carries no verdict
    reached, ahead = dizzy_copy.run()
    assert ahead.verdict == "unverified" and "not fit evidence" in ahead.evidence
    assert "not fit evidence" not in reached.evidence  # its own seeds are the claim's evidence


def test_fig4s_lstm_claim_rests_on_a_collapsed_seed_and_is_unverified():
    lstm = fig4_gradient_records()[1]
    assert lstm.claim.startswith("LSTM's gradient") and lstm.verdict == "unverified"
    assert any(u.startswith("lstm seed 0 (task mnist, pixels_per_step 1): at chance")
               for u in lstm.numbers["unfit_trials"])
