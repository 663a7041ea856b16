"""Reading kept grids: seeds aggregated, scales preferred, the gate a verdict passes, and the figures
drawn from kept results without training."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from experiment_fixtures import ROOT, TINY, fake_trial, tiny_catalog

from spectral_analysis.checks import CheckRecord
from spectral_analysis.experiments import (
    load_catalog,
    read_grid,
    read_grids,
)
from spectral_analysis.experiments.groups import Spread, log_median
from spectral_analysis.paper import (
    depth,
    dizzy_copy,
    experiments,
    mnist_ranking,
    svdrnn_leak,
    synthetic_tasks,
)
from spectral_analysis.paper.kept import MIN_SEEDS, beats, gate, judged
from spectral_analysis.plotting.results_figures import (
    KEPT_FILE_FIGURES,
    LEARNING_FIGURES,
    READERS,
    draw_figures,
)
from spectral_analysis.train import Trainer


def test_grids_aggregate_seeds_and_prefer_the_paper_scale(tmp_path):
    for seed, value in enumerate((0.2, 0.4)):
        fake_trial(
            tmp_path,
            "x",
            "smoke",
            f"a_s{seed}",
            "a",
            {},
            seed,
            [f"valid,10,{value},,", f"valid,20,{value + 0.1},,", f"train,20,,{value},0"],
            value,
        )
    grid = read_grid(tmp_path, "x")
    assert (
        grid.scale == "smoke" and grid.seeds == 2 and grid.stamp() == "smoke scale, not the paper's; 2 seeds"
    )
    steps, accuracy = grid.group("a").curve("valid", "accuracy")
    assert list(steps) == [10, 20] and np.allclose(accuracy.mean, [0.3, 0.4])
    assert np.allclose(accuracy.low, [0.2, 0.3]) and np.allclose(accuracy.high, [0.4, 0.5])
    assert np.allclose(accuracy.log_median, np.sqrt([0.2 * 0.4, 0.3 * 0.5]))  # two seeds: geometric mean
    final = grid.group("a").final()
    assert (final.mean, final.low, final.high, final.seeds) == pytest.approx((0.3, 0.2, 0.4, 2))
    assert sorted(grid.group("a").final_per_seed()) == pytest.approx([0.2, 0.4])
    fake_trial(tmp_path, "x", "smoke", "b_s0", "b", {}, 0, ["valid,10,0.5,,"], 0.5)
    grid = read_grid(tmp_path, "x")
    assert grid.stamp() == "smoke scale, not the paper's; 1-2 seeds" and grid.seeds == 1
    assert grid.stamp([grid.group("a")]).endswith("; 2 seeds")
    assert grid.stamp([grid.group("b")]).endswith("; 1 seed")
    fake_trial(tmp_path, "x", "paper", "a_s0", "a", {}, 0, ["valid,10,0.9,,"], 0.9)
    assert read_grid(tmp_path, "x").scale == "paper" and read_grid(tmp_path, "x", "smoke").seeds == 1
    assert read_grid(tmp_path, "nothing") is None


def test_the_log_median_is_the_middle_seed_not_the_largest_and_takes_vanished_and_missing_values():
    seeds = np.array([[3e-12, 1e-3, 0.0, np.nan], [8e-9, 1e-3, 0.0, np.nan], [5e-4, 1e-3, 1e-2, 2.0]])
    spread = Spread.over_seeds(seeds)
    assert spread.log_median == pytest.approx([8e-9, 1e-3, 0.0, 2.0])  # 0: two of three vanished
    assert spread.mean[0] == pytest.approx(1.6667e-4, rel=1e-3) and spread.seeds == 3
    assert log_median(np.array([1e-8, 1e-2])) == pytest.approx(1e-5)  # even count: the middle pair's
    assert log_median(np.array([0.0, 1e-2])) == 0.0 and np.isnan(log_median(np.array([np.nan, np.nan])))
    per_seed = Spread.over_seeds(np.array([0.2, np.nan, 0.8]))
    assert isinstance(per_seed.mean, float) and per_seed.seeds == 2
    assert per_seed.log_median == pytest.approx(0.4)


def test_final_reads_a_rows_own_numbers_beside_its_metrics(tmp_path):
    for seed, (steps, best) in enumerate(((100, 0.7), (300, None))):
        fake_trial(tmp_path, "x", "paper", f"a_s{seed}", "a", {}, seed, ["valid,1,0.5,,"], 0.5)
        path = tmp_path / "x" / "paper" / f"a_s{seed}" / "result.json"
        numbers = {"steps": steps, "best_valid": best, "seconds": 10.0 * (seed + 1)}
        path.write_text(json.dumps(json.loads(path.read_text()) | numbers))
    group = read_grid(tmp_path, "x").group("a")
    steps = group.final("steps")
    assert (steps.mean, steps.low, steps.high, steps.seeds) == pytest.approx((200, 100, 300, 2))
    best = group.final_per_seed("best_valid")
    assert best[0] == pytest.approx(0.7) and np.isnan(best[1]) and group.final("best_valid").seeds == 1
    assert sorted(group.final_per_seed("seconds")) == pytest.approx([10.0, 20.0])
    assert group.final("test_metrics").mean == pytest.approx(0.5)


def test_gate_judges_only_paper_scale_with_enough_seeds(tmp_path):
    for seed in range(MIN_SEEDS):
        fake_trial(tmp_path, "x", "paper", f"a_s{seed}", "a", {}, seed, ["valid,1,0.5,,"], 0.5)
        fake_trial(tmp_path, "y", "paper", f"a_s{seed}", "a", {}, seed, ["valid,1,0.5,,"], 0.5)
    fake_trial(tmp_path, "z", "smoke", "a_s0", "a", {}, 0, ["valid,1,0.5,,"], 0.5)
    (tmp_path / "y" / "paper" / "a_s2" / "result.json").unlink()
    assert gate(read_grid(tmp_path, "x"), "differs", "e") == ("differs", "paper scale; 3 seeds: e")
    verdict, evidence = gate(read_grid(tmp_path, "y"), "holds", "e")
    assert verdict == "unverified" and "fewer than the 3 paper-scale seeds" in evidence
    verdict, evidence = gate(read_grid(tmp_path, "z"), "holds", "e")
    assert verdict == "unverified" and "would read 'holds'" in evidence and "smoke scale" in evidence


def test_fig3_verdict_names_the_best_model_from_kept_results(tmp_path, monkeypatch):
    accuracy = {"rnn": 0.3, "irnn": 0.6, "spectral": 0.5}
    for task, pixels in (("mnist", 2), ("mnist", 1), ("permuted-mnist", 1)):
        for model, value in accuracy.items():
            best = value + (0.4 if task == "permuted-mnist" and model == "spectral" else 0.0)
            for seed in range(3):
                fake_trial(
                    tmp_path,
                    "fig3-mnist",
                    "paper",
                    f"{model}_{task}{pixels}_s{seed}",
                    model,
                    {"task": task, "pixels_per_step": pixels},
                    seed,
                    ["valid,1,0.1,,"],
                    best + 0.01 * seed,
                )
    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path))
    (tmp_path / "catalog").mkdir()  # a catalog without fig3-mnist: the made-up grid counts as complete
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tmp_path / "catalog"))
    records = mnist_ranking.run()
    assert [r.verdict for r in records] == ["differs", "differs", "holds", "unverified"]  # no authors' grid
    assert "best first: irnn 0.610 [0.600, 0.620], spectral 0.510" in records[0].evidence
    assert records[2].numbers["test_accuracy"]["spectral"][0] == pytest.approx(0.91)


def test_a_comparison_over_seeds_is_inconclusive_when_the_spreads_overlap():
    assert beats([0.95, 0.96], [0.90, 0.94]) == "holds"
    assert beats([0.90, 0.94], [0.95, 0.96]) == "differs"
    assert beats([0.90, 0.95], [0.94, 0.96]) == "inconclusive"
    assert beats([1e-3, 2e-3], [5e-3, 6e-3], higher_is_better=False) == "holds"
    spread = {"spectral": (0.93, 0.90, 0.96), "rnn": (0.80, 0.79, 0.81), "lstm": (0.94, 0.92, 0.95)}
    assert mnist_ranking.ranking_verdict(spread) == "inconclusive"
    spread["lstm"] = (0.98, 0.97, 0.99)
    assert mnist_ranking.ranking_verdict(spread) == "differs"
    spread["lstm"] = (0.85, 0.84, 0.86)
    assert mnist_ranking.ranking_verdict(spread) == "holds"


@pytest.mark.slow
def test_experimental_checks_read_the_committed_results_through_the_gate():
    records = (experiments.run() + mnist_ranking.run() + depth.run() + synthetic_tasks.run()
               + svdrnn_leak.run() + dizzy_copy.run())
    for record in records:
        scale, seeds = record.scale, int(re.search(r"; (\d+) seeds?", record.evidence).group(1))
        assert record.seeds == seeds
        stale = re.search(r"(\d+) of \d+ kept trials do not stand for the catalog's current entry",
                          record.evidence)
        on_first_steps = "which these runs share with the paper scale's" in record.evidence
        unfit = "not fit evidence" in record.evidence
        judged = (scale == "paper" or on_first_steps) and seeds >= MIN_SEEDS and stale is None and not unfit
        assert (record.verdict != "unverified") == judged, record.evidence[:120]
    assert "gradient w.r.t. first cell of oRNN/Spectral-RNN does not vanish" in records[0].claim


def test_the_fig4_margin_check_says_per_seed_when_irnns_margin_first_passes_r_or_that_it_never_does():
    from spectral_analysis.experiments.results import read_curves

    grid = read_grid(ROOT / "results", "fig3-mnist")
    irnn = grid.group("irnn", task="mnist", pixels_per_step=1)
    record = experiments.margin_record()
    assert "None" not in record.evidence
    seeds = [(d, None) for d in irnn.dirs] + [(d, r["last_recorded_step"])
                                             for d, r in zip(irnn.failed_dirs, irnn.failed_rows, strict=True)]
    for (directory, diverged_at), largest in zip(seeds, record.numbers["max_margin"]["irnn"], strict=True):
        curves = read_curves(directory)["train"]
        last = experiments.FIG4_STEPS if diverged_at is None else min(
            experiments.FIG4_STEPS, experiments.BEFORE_DIVERGENCE * diverged_at)
        steps, margin = curves["step"], curves["spectral_margin"]
        read = steps <= last  # the first epoch; a diverged seed only on the first half before its blow-up
        assert largest == pytest.approx(np.nanmax(margin[read]))
        above = margin[read] > 0.1
        where = f"above r from step {int(steps[read][above.argmax()])}" if above.any() else "never above r"
        assert f"{directory.name.rsplit('_', 1)[-1]} irnn largest {largest:.3f}, {where}" in record.evidence
        if diverged_at is not None:
            assert f"diverged at step {diverged_at}, read to step {int(steps[read][-1])}" in record.evidence


def test_a_claim_about_the_first_steps_is_judged_on_budget_runs_only_where_they_are_the_papers_cut_short():
    from copy import deepcopy

    from spectral_analysis.checks import CheckRecord
    from spectral_analysis.paper.kept import judged_on_first_steps, paper_prefix_gap

    grid = read_grid(ROOT / "results", "fig3-mnist", scale="budget")
    groups = [grid.group(m, task="mnist", pixels_per_step=1) for m in ("ornn", "spectral")]
    assert paper_prefix_gap(grid, groups, 390) is None  # epochs and max_steps differ, nothing else
    assert paper_prefix_gap(grid, groups, 1000) == (
        "ornn_taskmnist_pixels_per_step1_s0 ended at step 780, before step 1000")

    def record() -> CheckRecord:
        return CheckRecord("src", "claim", "differs", "the margins", {})

    judged = judged_on_first_steps(grid, record(), groups, 390, seeds=3)
    assert judged.verdict == "differs" and "read on the first 390 steps" in judged.evidence
    assert judged_on_first_steps(grid, record(), groups, 1000, seeds=3).verdict == "unverified"
    assert judged_on_first_steps(grid, record(), groups, 390, seeds=2).verdict == "unverified"
    changed = deepcopy(groups)
    changed[1].rows[2]["config"]["lr"] = 0.01  # a budget run of another learning rate is not the paper's
    assert paper_prefix_gap(grid, changed, 390) == (
        "spectral_taskmnist_pixels_per_step1_s2 differs from its paper-scale trial in lr")
    assert judged_on_first_steps(grid, record(), changed, 390, seeds=3).verdict == "unverified"
    smoke = read_grid(ROOT / "results", "fig3-mnist", scale="smoke")
    smoke_groups = [smoke.group("ornn", task="mnist", pixels_per_step=1)]
    assert "differs from its paper-scale trial in" in paper_prefix_gap(smoke, smoke_groups, 1)
    assert judged_on_first_steps(smoke, record(), smoke_groups, 1, seeds=3).verdict == "unverified"


def test_each_fig3_panel_counts_its_own_seeds_not_the_grids_fewest():
    """A configuration with fewer seeds (diverged trials) lowers only the panel that holds it."""
    grid = read_grid(ROOT / "results", "fig3-mnist")
    panels = mnist_ranking.run()[:len(mnist_ranking.PANELS)]  # the authors' code's reading follows
    for record, (task, pixels) in zip(panels, mnist_ranking.PANELS.values(), strict=True):
        assert record.seeds == min(g.seeds for g in mnist_ranking.panel_groups(grid, task, pixels))
    fig4 = [grid.group(m, task="mnist", pixels_per_step=1) for m in ("irnn", "spectral")]
    assert experiments.margin_record().seeds == min(g.seeds + len(g.failed_dirs) for g in fig4)


def test_fig3_is_read_again_with_the_authors_code_models_only_beside_a_grid_of_the_same_scale(
        tmp_path, monkeypatch):
    results = tmp_path / "results"
    for name in ("fig3-mnist", mnist_ranking.AUTHORS_CODE):
        shutil.copytree(ROOT / "results" / name / "smoke", results / name / "smoke")
    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(results))
    records = mnist_ranking.run()
    panels = len(mnist_ranking.PANELS)
    assert len(records) == 2 * panels
    authors = read_grid(results, mnist_ranking.AUTHORS_CODE, "smoke")
    plain = read_grid(results, "fig3-mnist", "smoke")
    for record, (task, pixels) in zip(records[panels:], mnist_ranking.PANELS.values(), strict=True):
        assert mnist_ranking.AUTHORS_CODE_LABEL in record.claim and record.scale == "smoke"
        accuracy = record.numbers["test_accuracy"]
        assert set(accuracy) == {g.variant for g in mnist_ranking.panel_groups(plain, task, pixels)}
        for model in ("spectral", "ornn"):  # the authors' code's runs, not fig3-mnist's
            assert accuracy[model][0] == authors.group(model, task=task, pixels_per_step=pixels).final().mean
        for model in ("rnn", "irnn", "lstm"):
            assert accuracy[model][0] == plain.group(model, task=task, pixels_per_step=pixels).final().mean
    # fig3-mnist read at a scale the authors' grid lacks: one unverified record that names the command
    shutil.rmtree(results / mnist_ranking.AUTHORS_CODE)
    records = mnist_ranking.run()
    assert len(records) == panels + 1 and records[-1].verdict == "unverified"
    assert f"run {mnist_ranking.AUTHORS_CODE} --scale smoke" in records[-1].evidence


def test_a_complete_budget_grid_is_read_before_smoke_and_after_a_complete_paper_grid(tmp_path):
    def fake(scale: str, variant: str, accuracy: float) -> None:
        fake_trial(tmp_path, "table2-mnist", scale, f"{variant}_s0", variant, {}, 0,
                    [f"valid,1,{accuracy},,"], accuracy)

    for variant in ("spectral", "rnn"):
        fake("smoke", variant, 0.1)
    fake("budget", "rnn", 0.5)
    assert read_grid(tmp_path, "table2-mnist").scale == "smoke"  # the budget grid is under way
    variants = ("spectral", "ornn", "urnn", "lstm")
    for variant in variants:
        fake("budget", variant, 0.5)
    grid = read_grid(tmp_path, "table2-mnist")
    assert grid.scale == "budget" and grid.stamp().startswith("budget scale (4 of the paper grid's 20 epochs")
    verdict, evidence = gate(grid, "holds", "e")
    assert verdict == "unverified" and "the paper's sizes but not its training length" in evidence
    for variant in ("rnn", *variants):
        fake("paper", variant, 0.9)
    assert read_grid(tmp_path, "table2-mnist").scale == "paper"


def test_a_paper_grid_under_way_is_not_read_until_every_configuration_has_a_trial(tmp_path):
    fake_trial(tmp_path, "table2-mnist", "smoke", "rnn_s0", "rnn", {}, 0, ["valid,1,0.1,,"], 0.1)
    fake_trial(tmp_path, "table2-mnist", "paper", "rnn_s0", "rnn", {}, 0, ["valid,1,0.9,,"], 0.9)
    assert read_grid(tmp_path, "table2-mnist").scale == "smoke"
    for variant in ("spectral", "ornn", "urnn", "lstm"):
        fake_trial(
            tmp_path, "table2-mnist", "paper", f"{variant}_s0", variant, {}, 0, ["valid,1,0.9,,"], 0.9
        )
    assert read_grid(tmp_path, "table2-mnist").scale == "paper"


def test_a_configuration_whose_every_seed_diverged_completes_the_grid(tmp_path):
    """A configuration that diverged in every seed has ended: the grid is read at paper scale (and the
    claims see it as beating nothing), not held back at smoke as if it were still to run."""
    from spectral_analysis.experiments.reading import read_variants

    fake_trial(tmp_path, "table2-mnist", "smoke", "rnn_s0", "rnn", {}, 0, ["valid,1,0.1,,"], 0.1)
    for variant in ("spectral", "ornn", "urnn", "lstm"):
        fake_trial(tmp_path, "table2-mnist", "paper", f"{variant}_s0", variant, {}, 0, ["valid,1,0.9,,"],
                    0.9)
    assert read_grid(tmp_path, "table2-mnist").scale == "smoke"  # the RNN has not run
    assert read_variants(tmp_path, "table2-mnist", {"rnn", "lstm"}) is None
    failed = tmp_path / "table2-mnist" / "paper" / "rnn_s0"
    failed.mkdir()
    (failed / "result.json").write_text(json.dumps(
        {"experiment": "table2-mnist", "scale": "paper", "trial": "rnn_s0", "status": "failed",
         "error": "TrainingDivergedError: the training loss is nan", "variant": "rnn", "axes": {},
         "seed": 0, "hidden": 128, "config": {}}))
    grid = read_grid(tmp_path, "table2-mnist")
    assert grid.scale == "paper" and [r["trial"] for r in grid.failed] == ["rnn_s0"]
    assert "rnn" not in grid.variants()  # no finished trial to draw; the failed row stands for it
    baselines = read_variants(tmp_path, "table2-mnist", {"rnn", "lstm"})
    assert [g.variant for g in baselines.groups] == ["lstm"] and len(baselines.failed) == 1


def test_the_variants_a_claim_reads_are_judged_once_theirs_are_kept_while_the_grid_runs_on(tmp_path):
    from spectral_analysis.experiments.reading import read_variants

    for variant in ("rnn", "lstm"):
        fake_trial(tmp_path, "table2-mnist", "paper", f"{variant}_s0", variant, {}, 0, ["valid,1,0.9,,"],
                    0.9)
    fake_trial(tmp_path, "table2-mnist", "smoke", "rnn_s0", "rnn", {}, 0, ["valid,1,0.1,,"], 0.1)
    assert read_grid(tmp_path, "table2-mnist").scale == "smoke"  # spectral, ornn, urnn still to run
    grid = read_variants(tmp_path, "table2-mnist", {"rnn", "lstm"})
    assert grid.scale == "paper" and [g.variant for g in grid.groups] == ["rnn", "lstm"]
    assert read_variants(tmp_path, "table2-mnist", {"rnn", "spectral"}) is None  # spectral not kept
    assert read_variants(tmp_path, "table2-mnist", {"no-such-variant"}) is None
    assert read_variants(tmp_path, "not-in-the-catalog", {"rnn"}) is None


def test_committed_smoke_results_cover_the_catalog():
    catalog = load_catalog()
    for name, experiment in catalog.items():
        grid = read_grid(ROOT / "results", name, "smoke")
        assert grid is not None and len(grid.groups) == len(experiment.trials("smoke")), name


@pytest.mark.slow
def test_figures_are_drawn_from_kept_results_without_training(tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("a reader trained a model")

    monkeypatch.setattr(Trainer, "run", no_training)
    beside = {"fig3-mnist": "fig3_mnist.png"} | {n: f.file for n, f in LEARNING_FIGURES.items()}
    for file in beside.values():  # left by an earlier draw: stale once the paper grid is whole
        (tmp_path / file.replace(".png", "_paper.png")).write_bytes(b"stale")
    drawn = draw_figures(ROOT / "results", tmp_path)
    names = {Path(d["path"]).name for d in drawn}
    assert {
        "fig1_addition.png",
        "fig2_copy.png",
        "fig3_mnist.png",
        "fig4_mnist_dynamics.png",
        "fig5_depth.png",
        "fig2c_leak.png",
        "bound_vs_T.png",
        "kru_amplitude.png",
        "table2_mnist.md",
        "table4_ucr.md",
        "fig6_ucr.png",
    } <= names
    assert all(Path(d["path"]).stat().st_size > 0 for d in drawn)
    for d in drawn:  # each file labelled with a scale its experiment has kept trials at (the drawn grid,
        # the paper rows beside it, or a table of the budget grid once the paper grid is whole)
        if d["experiment"] != "benchmarks":
            assert read_grid(ROOT / "results", d["experiment"], scale=d["scale"]) is not None, d
            if not Path(d["path"]).name.endswith("_budget.md"):
                assert d["scale"] in {g.scale for g in read_grids(ROOT / "results", d["experiment"])}, d
    for experiment, file in beside.items():  # the paper-scale models kept so far beside a smaller grid
        grid = read_grid(ROOT / "results", experiment)
        paper_so_far = grid.scale != "paper" and read_grid(ROOT / "results", experiment, "paper") is not None
        paper_file = file.replace(".png", "_paper.png")
        assert (paper_file in names) == paper_so_far == (tmp_path / paper_file).exists(), experiment
        assert not paper_so_far or (tmp_path / paper_file).read_bytes() != b"stale", experiment
    table2_files = [d["scale"] for d in drawn if d["experiment"] == "table2-mnist"]
    assert table2_files == [g.scale for g in read_grids(ROOT / "results", "table2-mnist")]
    table2 = read_grid(ROOT / "results", "table2-mnist")
    assert table2.stamp() in (tmp_path / "table2_mnist.md").read_text()
    assert set(READERS) - set(KEPT_FILE_FIGURES) <= set(load_catalog())


def _drawn_learning_figure(experiment: str, out: Path, monkeypatch) -> tuple[dict, dict]:
    """The panels and keyword arguments that ``experiment``'s learning figure hands to the plotter."""
    from spectral_analysis.plotting import results_figures

    drawn = []
    real = results_figures.plot_learning_curves

    def capture(panels, metric, *args, **kwargs):
        drawn.append((panels, kwargs))
        return real(panels, metric, *args, **kwargs)

    monkeypatch.setattr(results_figures, "plot_learning_curves", capture)
    LEARNING_FIGURES[experiment].draw(experiment, ROOT / "results", out)
    (panels, kwargs), = drawn
    return panels, kwargs


def test_a_grid_validated_only_at_epoch_ends_is_drawn_from_its_training_records(tmp_path, monkeypatch):
    panels, kwargs = _drawn_learning_figure("kru-ptb", tmp_path, monkeypatch)
    grid = read_grid(ROOT / "results", "kru-ptb")
    for group in grid.groups:  # two validations (the epoch ends) against 100 training records a trial
        assert len(group.curve("valid", "cross_entropy")[0]) == 2
        steps = panels[""][group.variant]["steps"]
        assert len(steps) > 50 and np.array_equal(steps, group.curve("train", "cross_entropy")[0])
    assert kwargs["data_name"] == "training"
    assert LEARNING_FIGURES["fig1-addition"].phase == "valid"


@pytest.mark.slow
def test_the_ucr_figure_draws_the_test_curves_that_test_with_valid_kept(tmp_path, monkeypatch):
    panels, kwargs = _drawn_learning_figure("table4-ucr", tmp_path, monkeypatch)
    grid = read_grid(ROOT / "results", "table4-ucr")
    assert set(panels) == set(grid.values("dataset")) and kwargs["data_name"] == "test"
    for group in grid.groups:  # a test line at each validation, thinned as validation is
        steps, _ = group.curve("test", "cross_entropy")
        drawn_curve = panels[group.axes["dataset"]][group.variant]
        assert len(steps) > 40 and np.array_equal(drawn_curve["steps"], steps)
        assert np.allclose(drawn_curve["metric"][-1], np.mean(group.final_per_seed("test_metrics",
                                                                                   "cross_entropy")))


def test_a_check_does_not_judge_from_trials_the_current_catalog_entry_would_retrain(tmp_path, monkeypatch):
    capped = TINY.replace("steps = 8\ntask_options = { train_size = 64",
                          "steps = 8\nmax_steps = 16\ntask_options = { train_size = 64")
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tiny_catalog(tmp_path, capped)))
    trials = load_catalog()["tiny"].trials("paper")

    def keep(trial, config: dict, best_step: int, steps: int) -> None:
        directory = tmp_path / "results" / "tiny" / "paper" / trial.key
        directory.mkdir(parents=True, exist_ok=True)
        row = {"experiment": "tiny", "scale": "paper", "trial": trial.key, "status": "done",
               "variant": trial.variant, "axes": trial.axes, "seed": trial.seed, "metric": "mse",
               "test_metrics": {"mse": 0.1}, "config": config, "steps": steps, "best_step": best_step}
        (directory / "result.json").write_text(json.dumps(row))

    for trial in trials:
        keep(trial, trial.config, best_step=16, steps=16)  # ran to the cap: stands
    grid = read_grid(tmp_path / "results", "tiny")
    assert grid.trials == 12 and not grid.stale and gate(grid, "holds", "e")[0] == "holds"
    shorter = {k: v for k, v in trials[0].config.items() if k != "max_steps"}
    keep(trials[0], shorter, best_step=2, steps=8)  # an older run that plateaued early: stands
    assert not read_grid(tmp_path / "results", "tiny").stale
    keep(trials[0], shorter, best_step=8, steps=8)  # stopped at its minimum, still improving: trains on
    keep(trials[1], {**trials[1].config, "hidden": 5}, best_step=16, steps=16)  # a changed entry
    grid = read_grid(tmp_path / "results", "tiny")
    assert grid.stale == {trials[0].key: ["max_steps"], trials[1].key: ["hidden"]}
    verdict, evidence = gate(grid, "holds", "e")
    assert verdict == "unverified" and "would read 'holds'" in evidence
    assert "2 of 12 kept trials" in evidence and "differ in hidden, max_steps" in evidence
    assert grid.stamp().endswith("2 of 12 trials stale")
    # a claim that names the configurations it reads is held back by their stale trials alone
    clean = [g for g in grid.groups if not {r["trial"] for r in g.rows} & set(grid.stale)]
    holding = [g for g in grid.groups if trials[1].key in {r["trial"] for r in g.rows}]
    assert clean and holding
    record = judged(grid, CheckRecord("src", "claim", "holds", "e", {}), groups=clean)
    assert record.verdict == "holds" and record.stale is None
    record = judged(grid, CheckRecord("src", "claim", "holds", "e", {}), groups=holding)
    assert record.verdict == "unverified" and "2 of 12 kept trials" in record.evidence
    assert record.stale == "2/12"  # seeds 0 and 1 of one configuration
    assert judged(grid, CheckRecord("src", "claim", "holds", "e", {}), groups=clean + holding).verdict == \
        "unverified" and len(grid.stale) == 2  # the grid itself keeps every stale trial


def test_a_budget_grid_with_stale_trials_names_them_as_why_it_is_unverified(tmp_path, monkeypatch):
    """A budget grid never stands for the paper; when its trials are also stale, the reason a reader acts
    on (which runs to retrain) is named, not only the scale (it was left out below paper scale)."""
    budget = TINY + '[scales.budget]\nseeds = 3\nbudget = "a test budget"\nsteps = 4\n'
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tiny_catalog(tmp_path, budget)))
    trials = load_catalog()["tiny"].trials("budget")
    for index, trial in enumerate(trials):
        directory = tmp_path / "results" / "tiny" / "budget" / trial.key
        directory.mkdir(parents=True)
        config = {**trial.config, "lr": 0.5} if index == 0 else trial.config
        (directory / "result.json").write_text(json.dumps({
            "experiment": "tiny", "scale": "budget", "trial": trial.key, "status": "done",
            "variant": trial.variant, "axes": trial.axes, "seed": trial.seed, "metric": "mse",
            "test_metrics": {"mse": 0.1}, "config": config, "steps": 4, "best_step": 4}))
    grid = read_grid(tmp_path / "results", "tiny")
    assert grid.scale == "budget" and list(grid.stale) == [trials[0].key]
    verdict, evidence = gate(grid, "holds", "e")
    assert verdict == "unverified" and "would read 'holds'" in evidence
    stale = f"1 of {len(trials)} kept trials do not stand for the catalog's current entry (they differ in lr)"
    assert stale in evidence


def _fig4_trials(root, gradients):
    """Kept paper-scale pixel-MNIST 784 trials of fig3-mnist: per model, each seed's ||dL/dh0|| as a
    function of the step, recorded every half epoch for 10 epochs."""
    for model, per_seed in gradients.items():
        for seed, gradient in enumerate(per_seed):
            curves = [f"train,{step},,{gradient(step)},0.0" for step in range(195, 3901, 195)]
            fake_trial(root, "fig3-mnist", "paper", f"{model}_mnist1_s{seed}", model,
                       {"task": "mnist", "pixels_per_step": 1}, seed, curves, 0.5)


def test_fig4_gradient_claims_are_read_per_seed_and_can_come_out_either_way(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTRAL_ANALYSIS_RESULTS", str(tmp_path))
    (tmp_path / "catalog").mkdir()  # a catalog without fig3-mnist: the made-up grid counts as complete
    monkeypatch.setenv("SPECTRAL_ANALYSIS_EXPERIMENTS", str(tmp_path / "catalog"))
    several = experiments.SEVERAL_EPOCHS * experiments.FIG4_STEPS

    def after(early, late):
        return lambda step: early if step <= several else late

    stable = after(1e-3, 2e-2)
    _fig4_trials(tmp_path, {"rnn": [after(0.0, 1e-3), after(1e-12, 1e-3), after(0.0, 0.5)],
                            "lstm": [after(1e-3, 5.0)] * 3, "ornn": [stable] * 3, "spectral": [stable] * 3})
    rnn, lstm, stable_pair = experiments.fig4_gradient_records()
    assert [rnn.verdict, lstm.verdict, stable_pair.verdict] == ["holds"] * 3
    assert "first 3 epochs" in rnn.claim and rnn.quote == experiments.FIG4_GRADIENT_QUOTE
    assert "rnn median 0.00e+00" in rnn.evidence and "as claimed in 3 of 3 seeds" in lstm.evidence

    shutil.rmtree(tmp_path / "fig3-mnist")  # the RNN's gradient is alive early; one LSTM seed explodes
    _fig4_trials(tmp_path, {"rnn": [after(1e-4, 1e-3)] * 3,  # from the start; an oRNN seed vanishes late
                            "lstm": [after(1e-3, 5.0), after(2.0, 5.0), after(1e-3, 0.1)],
                            "ornn": [stable, stable, after(1e-3, 1e-9)], "spectral": [stable] * 3})
    rnn, lstm, stable_pair = experiments.fig4_gradient_records()
    assert [rnn.verdict, lstm.verdict, stable_pair.verdict] == ["differs", "inconclusive", "inconclusive"]
    assert "as claimed in 1 of 3 seeds" in lstm.evidence
    assert "as claimed in 5 of 6 seeds" in stable_pair.evidence


def _with_kept_irnn_trials(budget: Path, kept: Path) -> None:
    """Put the 784-step pixel-MNIST IRNN trials of ``kept`` (Fig. 3's grid of 2026-11, started orthogonal;
    seed 2 diverged) in place of ``budget``'s, their recipe set to the catalog's current one, so that a
    reading is tested on a known divergence whatever the IRNN's kept trials are now."""
    options = next(t for t in load_catalog()["fig3-mnist"].trials("budget")
                   if t.key == "irnn_taskmnist_pixels_per_step1_s0").config["model_options"]
    for source in sorted(kept.iterdir()):
        shutil.rmtree(budget / source.name, ignore_errors=True)
        shutil.copytree(source, budget / source.name)
        result = budget / source.name / "result.json"
        row = json.loads(result.read_text())
        row["config"]["model_options"] = dict(options)
        result.write_text(json.dumps(row))


def test_fig4s_margin_is_judged_seed_by_seed_and_a_divergence_run_up_is_not_deviation(tmp_path, monkeypatch):
    """A diverged IRNN seed that stays orthogonal until the steps before its blow-up does not show the
    claim: read on the first half of its record before the divergence, it never passes r. The old reading
    (the mean over seeds, diverged records to their end) counted its run-up as deviating."""
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "fig3-mnist", results / "fig3-mnist")
    budget = results / "fig3-mnist" / "budget"
    _with_kept_irnn_trials(budget, Path(__file__).parent / "data" / "fig3-irnn-orthogonal")
    diverged = budget / "irnn_taskmnist_pixels_per_step1_s2"  # diverged at step 274
    lines = (diverged / "curves.csv").read_text().splitlines()
    header = lines[0].split(",")
    column, rows = header.index("spectral_margin"), []
    for line in lines[1:]:
        cells = line.split(",")
        if cells[0] == "train":
            cells[column] = "0.01" if float(cells[1]) < 200 else "0.9"  # orthogonal, then the run-up
        rows.append(",".join(cells))
    (diverged / "curves.csv").write_text("\n".join([lines[0], *rows]) + "\n")
    monkeypatch.setattr(experiments, "kept_grid", lambda name: read_grid(results, name))
    record = experiments.margin_record()
    assert record.numbers["as_claimed"]["irnn"] == [True, True, False]  # seeds 1, 0 (diverged), 2
    assert record.verdict == "inconclusive"
    assert "s2 irnn largest 0.010, never above r, diverged at step 274, read to step 120" in record.evidence


def test_fig1s_gradient_claim_is_read_seed_by_seed_over_the_early_phase_and_the_whole_run(monkeypatch):
    """The old reading took the end-of-training mean over seeds and could only say holds or differs:
    IRNN's 2.1e-5 was the mean of seeds 0, 6.3e-5 and 0. Seed by seed, the claim holds over the first
    2,000 steps (every IRNN and LSTM seed vanishes there, no oRNN or Spectral-RNN seed does) and differs
    over the whole run (the LSTM learns), so the verdict is inconclusive."""
    record = experiments.gradient_record()
    assert record.numbers["phase_verdicts"] == {"early": "holds", "whole": "differs"}
    assert record.verdict == "inconclusive" and "the two phases read differently" in record.evidence
    whole = record.numbers["vanished_share"]["whole"]
    assert sorted(share >= 0.5 for share in whole["irnn"]) == [False, True, True]
    assert not any(share >= 0.5 for share in whole["lstm"] + whole["ornn"] + whole["spectral"])
    monkeypatch.setattr(experiments, "FIG1_EARLY_STEPS", 10**9)  # one phase: the whole run decides
    assert experiments.gradient_record().verdict == "differs"
