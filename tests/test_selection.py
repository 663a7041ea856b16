"""Validation grids (a catalog entry's ``selects``): what they choose from kept results, and that the
repository's experiments use what their committed validation grids chose."""

import json

import pytest
from experiment_fixtures import ROOT, TINY, tiny_catalog

from spectral_analysis.experiments import (
    load_catalog,
    load_experiment,
    read_grid,
    read_rows,
    run_trial,
    selection,
)
from spectral_analysis.experiments.trial import TrialSpec
from spectral_analysis.experiments.validation import axis_value, config_value

RATES = """
name = "tiny-rates"
source = "test"
description = "which learning rate the tiny grid uses"
selects = "tiny"
[base]
task = "addition"
model = "rnn"
batch_size = 8
record_every = 2
eval_every = 2
[[variants]]
label = "rnn"
[axes]
lr = [1e-4, 1e-2, 3.0]
[scales.paper]
seeds = 1
stated = "quoted"
hidden = 6
steps = 8
task_options = { length = 5, train_size = 64, valid_size = 16, test_size = 16 }
[scales.smoke]
hidden = 4
steps = 2
"""


def _run_rates(tmp_path, catalog):
    for trial in load_experiment(catalog / "tiny-rates.toml").trials("paper"):
        run_trial(TrialSpec(trial.__dict__.copy(), str(tmp_path / "runs" / trial.key),
                            str(tmp_path / "results"), "cpu", "test"))


def test_a_validation_grid_chooses_the_value_with_the_best_validation_once_complete_and_current(
        tmp_path, monkeypatch):
    catalog = tiny_catalog(tmp_path)
    (catalog / "tiny-rates.toml").write_text(RATES)
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(catalog))
    results = tmp_path / "results"
    assert selection(results, "tiny-rates") is None  # nothing kept
    _run_rates(tmp_path, catalog)
    best = {r["axes"]["lr"]: r["best_valid"] for r in read_rows(results, "tiny-rates", "paper")}
    chosen = selection(results, "tiny-rates")
    assert (chosen.selects, chosen.axis, chosen.metric) == ("tiny", "lr", "mse")
    assert chosen.scores == {"rnn": pytest.approx(best)}
    assert chosen.chosen == {"rnn": min(best, key=best.get)}
    # a second seed planned: no choice until its trials are kept too
    (catalog / "tiny-rates.toml").write_text(RATES.replace("seeds = 1", "seeds = 2"))
    assert selection(results, "tiny-rates") is None
    _run_rates(tmp_path, catalog)
    both = read_rows(results, "tiny-rates", "paper")
    means = {lr: sum(r["best_valid"] for r in both if r["axes"]["lr"] == lr) / 2 for lr in best}
    assert len(both) == 6 and selection(results, "tiny-rates").scores == {"rnn": pytest.approx(means)}
    # a grid whose trials no longer stand for the catalog (here: trained 8 steps, now 9) chooses nothing
    (catalog / "tiny-rates.toml").write_text(RATES.replace("seeds = 1", "seeds = 2").replace("steps = 8",
                                                                                           "steps = 9"))
    assert selection(results, "tiny-rates") is None
    with pytest.raises(ValueError, match="no validation grid"):
        selection(results, "tiny")


def test_a_validation_grid_needs_one_axis_and_a_selected_experiment_the_catalog_has(tmp_path):
    catalog = tiny_catalog(tmp_path)
    two_axes = RATES.replace("[axes]", '[axes]\n"task_options.length" = [5, 7]')
    (catalog / "tiny-rates.toml").write_text(two_axes)
    with pytest.raises(ValueError, match="tiny-rates.toml: 'selects' names one experiment"):
        load_experiment(catalog / "tiny-rates.toml")
    (catalog / "tiny-rates.toml").write_text(RATES.replace('selects = "tiny"', 'selects = "tinny"'))
    with pytest.raises(ValueError, match="lacks: {'tiny-rates': 'tinny'}"):
        load_catalog(catalog)


def test_each_experiment_uses_what_its_committed_validation_grid_chose():
    validations = [e for e in load_catalog().values() if e.selects]
    assert "kru-adding-amplitude" in {e.name for e in validations}
    for validation in validations:
        chosen = selection(ROOT / "results", validation.name)
        selected = load_catalog()[validation.selects]
        if chosen is None:  # under way (or changed since): each validated variant's kept trials were
            # trained with one value, one the grid tries (its choice when last complete, which the rows of
            # a grid partly retrained no longer tell)
            ((axis, tried),) = validation.axes.items()
            kept = read_rows(ROOT / "results", selected.name, "paper")
            earlier = read_grid(ROOT / "results", validation.name, scale="paper")
            for variant in {v["label"] for v in validation.variants}:
                trained = [r for r in kept if r["variant"] == variant]
                assert not trained or (earlier is not None and earlier.stale), (
                    f"{selected.name} keeps {variant} trials {[r['trial'] for r in trained]} before "
                    f"{validation.name}, its validation grid, ever ran (the runner holds them back)")
                used = {config_value(r["config"], axis) for r in trained}
                assert len(used) <= 1 and used <= set(tried), (
                    f"{selected.name} keeps {variant} trials {[r['trial'] for r in trained]} trained with "
                    f"{axis} = {sorted(used)} while {validation.name}, its validation grid (of {tried}), is "
                    "under way")
            continue
        for variant, value in chosen.chosen.items():
            trials = [t for t in selected.trials("paper") if t.variant == variant]
            used = [axis_value(t, chosen.axis) for t in trials]  # the trainer's default where unset
            assert trials and all(u == value for u in used), (
                f"{selected.name}'s {variant} trials should use {chosen.axis} = {value} "
                f"({validation.name}: {chosen.scores[variant]})")



def test_each_validation_grid_trains_the_variant_it_validates_as_the_selected_grid_does():
    """A validation grid chooses one setting for a recipe: the model it trains (its options, size and
    optimizer) is the selected experiment's variant at the paper's sizes, or its choice is about another
    network (kru-mnist's KRU changed its input scale after its amplitude was validated)."""
    fields = ("model", "model_options", "hidden", "optimizer", "optimizer_options", "lr", "batch_size",
              "clip")
    for validation in (e for e in load_catalog().values() if e.selects):
        selected = load_catalog()[validation.selects]
        ((axis, _),) = validation.axes.items()
        for trial in validation.trials("paper"):
            twin = next(t for t in selected.trials("paper") if t.variant == trial.variant)
            differing = {f: (trial.config.get(f), twin.config.get(f)) for f in fields if f != axis
                         and trial.config.get(f) != twin.config.get(f)}
            assert not differing, (validation.name, trial.key, differing)

@pytest.mark.slow
def test_the_runner_holds_back_the_validated_variant_until_its_grid_chose_what_the_catalog_uses(
        tmp_path, monkeypatch, capsys):
    from spectral_analysis.cli import main
    from spectral_analysis.experiments import held_back

    catalog = tiny_catalog(tmp_path)
    (catalog / "tiny-rates.toml").write_text(RATES)
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(catalog))
    results = tmp_path / "results"
    tiny = load_catalog()["tiny"]
    held = held_back(tiny, "paper", load_catalog(), results)
    assert list(held) == ["rnn"] and "rnn waits for tiny-rates, its validation grid" in held["rnn"]
    assert held_back(tiny, "smoke", load_catalog(), results) == {}  # CI's sizes are never held
    assert main(["run", "tiny", "--catalog", str(catalog), "--scale", "paper", "--only", "seed=0",
                 "--backend", "processes", "--workers", "1", "--out", str(tmp_path / "runs"),
                 "--results", str(results)]) == 0
    text = capsys.readouterr().out
    rnn = sorted(t.key for t in tiny.trials("paper", only={"seed": "0"}) if t.variant == "rnn")
    assert {r["variant"] for r in read_rows(results, "tiny", "paper")} == {"spectral"}  # the rnn waits
    assert f"tiny (paper): {len(rnn)} trial(s) held back: rnn waits for tiny-rates" in text
    assert f"  held back: {held['rnn']} ({', '.join(rnn)})" in text
    _run_rates(tmp_path, catalog)
    chosen = selection(results, "tiny-rates").chosen["rnn"]
    other = next(v for v in (1e-4, 1e-2, 3.0) if v != chosen)
    (catalog / "tiny.toml").write_text(TINY.replace("lr = 1e-2", f"lr = {other!r}"))
    held = held_back(load_catalog()["tiny"], "paper", load_catalog(), results)
    assert held["rnn"] == (f"rnn uses lr = {other!r}, but tiny-rates chose {chosen!r}: set it in tiny's "
                           "entry first")
    (catalog / "tiny.toml").write_text(TINY.replace("lr = 1e-2", f"lr = {chosen!r}"))
    assert held_back(load_catalog()["tiny"], "paper", load_catalog(), results) == {}


def test_a_value_under_which_a_seed_diverged_is_not_chosen_on_its_survivors():
    from spectral_analysis.experiments import Selection

    def chosen(scores, diverged, metric="mse"):
        return Selection("grid", "tiny", "penalty", metric, {"kru": scores}, {"kru": diverged}).chosen

    # 1e-3's surviving seed is the best, but its other seed diverged: 1e-1, whose seeds both trained, wins
    assert chosen({1e-3: 0.05, 1e-1: 0.10, 0.0: 0.15}, {1e-3: 1, 1e-1: 0, 0.0: 0}) == {"kru": 1e-1}
    assert chosen({1e-3: 0.05, 1e-1: 0.10, 0.0: 0.15}, {1e-3: 0, 1e-1: 0, 0.0: 0}) == {"kru": 1e-3}
    assert chosen({1e-3: 0.05, 1e-1: 0.10}, {1e-3: 1, 1e-1: 1}) == {"kru": 1e-3}  # as many diverged
    assert chosen({1e-3: 0.9, 1e-1: 0.8}, {1e-3: 0, 1e-1: 0}, metric="accuracy") == {"kru": 1e-3}
    assert chosen({1e-3: float("nan"), 1e-1: 0.10}, {1e-3: 2, 1e-1: 1}) == {"kru": 1e-1}
    assert chosen({1e-3: float("nan"), 1e-1: float("nan")}, {1e-3: 2, 1e-1: 2}) == {}


def test_a_grid_counts_its_diverged_seeds_and_never_chooses_a_value_under_which_every_seed_diverged(
        tmp_path, monkeypatch):
    catalog = tiny_catalog(tmp_path)
    (catalog / "tiny-rates.toml").write_text(RATES.replace("3.0", "1e30").replace("seeds = 1", "seeds = 2"))
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(catalog))
    _run_rates(tmp_path, catalog)
    rows = read_rows(tmp_path / "results", "tiny-rates", "paper")
    assert sorted(r["trial"] for r in rows if r["status"] == "failed") == ["rnn_lr1e+30_s0", "rnn_lr1e+30_s1"]
    chosen = selection(tmp_path / "results", "tiny-rates")
    assert chosen.diverged == {"rnn": {1e-4: 0, 1e-2: 0, 1e30: 2}}
    assert chosen.scores["rnn"][1e30] != chosen.scores["rnn"][1e30]  # NaN: no seed finished
    assert chosen.chosen["rnn"] in (1e-4, 1e-2)
    # a trial that failed otherwise than by diverging is no result: the grid waits for it to run again
    kept = tmp_path / "results" / "tiny-rates" / "paper" / "rnn_lr1e+30_s0" / "result.json"
    kept.write_text(json.dumps({**json.loads(kept.read_text()), "error": "OSError: No space left on device"}))
    assert selection(tmp_path / "results", "tiny-rates") is None


def test_the_runner_holds_back_a_variant_whose_grid_diverged_under_every_value(tmp_path, monkeypatch):
    from spectral_analysis.experiments import Selection, held_back, validation

    catalog = tiny_catalog(tmp_path)
    (catalog / "tiny-rates.toml").write_text(RATES)
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(catalog))
    nan = float("nan")
    every_seed_diverged = Selection("tiny-rates", "tiny", "lr", "mse", {"rnn": {1e-4: nan, 1e-2: nan}},
                                    {"rnn": {1e-4: 1, 1e-2: 1}})
    monkeypatch.setattr(validation, "selection", lambda results, name: every_seed_diverged)
    held = held_back(load_catalog()["tiny"], "paper", load_catalog(), tmp_path / "results")
    assert held == {"rnn": "rnn: every seed of tiny-rates, its validation grid, diverged, so it chose "
                           "nothing"}
