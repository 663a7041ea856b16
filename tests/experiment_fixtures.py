"""Shared by the experiment tests: a tiny catalog, a tiny grid run in process, kept trials written by
hand, and the Makefile recipes' grids."""

import json
import re
from pathlib import Path

from spectral_analysis.experiments import load_catalog, load_experiment, run_trial
from spectral_analysis.experiments.trial import TrialSpec

ROOT = Path(__file__).resolve().parent.parent
TINY = """
name = "tiny"
source = "test"
description = "a tiny grid"
[base]
task = "addition"
lr = 1e-2
batch_size = 8
record_every = 2
eval_every = 4
checkpoint_every = 4
[[variants]]
label = "rnn"
model = "rnn"
[[variants]]
label = "spectral"
model = "spectral"
[variants.paper]
model_options = { m1 = 2, m2 = 3 }
[axes]
"task_options.length" = [5, 7]
[scales.paper]
seeds = 3
stated = "quoted"
hidden = 6
steps = 8
task_options = { train_size = 64, valid_size = 16, test_size = 16 }
[scales.smoke]
hidden = 4
steps = 8
task_options = { train_size = 32, valid_size = 16, test_size = 16 }
"""


def tiny_catalog(tmp_path: Path, text: str = TINY) -> Path:
    directory = tmp_path / "catalog"
    directory.mkdir(exist_ok=True)
    (directory / "tiny.toml").write_text(text)
    return directory


def run_tiny(tmp_path, catalog, scale="smoke", seeds=None, **spec_fields):
    experiment = load_experiment(catalog / "tiny.toml")
    rows = []
    for trial in experiment.trials(scale, seeds):
        spec = TrialSpec(
            trial.__dict__.copy(),
            str(tmp_path / "runs" / trial.key),
            str(tmp_path / "results"),
            "cpu",
            "test",
            **spec_fields,
        )
        rows.append(run_trial(spec))
    return experiment, rows


def fake_trial(
    results: Path,
    experiment: str,
    scale: str,
    key: str,
    variant: str,
    axes: dict,
    seed: int,
    curves: list[str],
    test: float,
    metric: str = "accuracy",
) -> None:
    directory = results / experiment / scale / key
    directory.mkdir(parents=True)
    row = {
        "experiment": experiment,
        "scale": scale,
        "trial": key,
        "status": "done",
        "variant": variant,
        "axes": axes,
        "seed": seed,
        "hidden": 128,
        "metric": metric,
        "test_metrics": {metric: test},
        "config": {},
    }
    (directory / "result.json").write_text(json.dumps(row))
    (directory / "curves.csv").write_text(
        "\n".join(["phase,step,accuracy,grad_h0_norm,spectral_margin", *curves])
    )


def kept_paper_trials(root: Path, experiment: str, column: str, slope: float,
                       runs: dict[str, tuple[list[float], float]]) -> None:
    """Kept paper-scale trials of ``experiment``: per variant, each seed's test ``column`` and a training
    curve of ``column`` falling by ``slope`` a record to the given end value over 9 records (so the
    median of the last five is that value + 2 * slope)."""
    for variant, (tests, train) in runs.items():
        for seed, test in enumerate(tests):
            directory = root / experiment / "paper" / f"{variant}_s{seed}"
            directory.mkdir(parents=True)
            row = {"experiment": experiment, "scale": "paper", "trial": f"{variant}_s{seed}",
                   "status": "done", "variant": variant, "axes": {}, "seed": seed, "hidden": 100,
                   "metric": column, "test_metrics": {column: test}, "config": {}}
            (directory / "result.json").write_text(json.dumps(row))
            (directory / "curves.csv").write_text(f"phase,step,{column}\n" + "".join(
                f"train,{s},{train + (9 - s) * slope}\n" for s in range(1, 10)))


def make_recipe_grids(target: str, command: str) -> list[tuple[list[tuple[str, str]], dict[str, str] | None]]:
    """The Makefile ``target``'s ``spectral-analysis COMMAND`` lines as ((experiment, scale) pairs, only),
    the names read as the command line reads them (``NAME@SCALE`` at its own scale)."""
    from spectral_analysis.cli.sweeps import named_sweeps

    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    variables = dict(re.findall(r"^(\w+) [:?]= *(.*)$", text, flags=re.M))
    recipe = text.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
    lines = [re.sub(r"\$\((\w+)\)", lambda m: variables.get(m[1], m[0]), line)
             for line in recipe.splitlines() if f" {command} " in line]
    grids = []
    for line in lines:
        args = line.split(f" {command} ", 1)[1].split()
        names = [a for a in args[: next(i for i, a in enumerate(args) if a.startswith("--"))]]
        scale = args[args.index("--scale") + 1]
        only = None
        if "--only" in args:
            key, value = args[args.index("--only") + 1].split("=")
            only = {key: value}
        grids.append((named_sweeps(load_catalog(), names, scale), only))
    return grids
