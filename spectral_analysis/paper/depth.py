"""Paper check: the depth experiment of ICML Section 7.2 (Fig. 5), read from the kept ``fig5-depth`` results.

The paper: MLPs on flattened MNIST, leaky ReLU, hidden width 128, 30-100 layers after the input layer;
"MLP is not able to function around L ~ 35 and ResNet with L ~ 70. On the other hand, the SVD based
methods are resilient to increasing depth and thus achieve higher precision."

Accuracy is the test accuracy of each seed; claims are judged over seeds (:func:`beats`). A net
"trains" when its test accuracy reaches :data:`TRAINS` (chance is 0.1). Each model's forward gain
``log10 ||h_L|| / ||h_0||`` (mean over 200 test images) says how much the signal shrinks or grows through
the depth: at init, of the net the first kept seed started from (rebuilt from its configuration and seed,
as the trainer built it), and trained, where the zoo kept a checkpoint (the zoo's seed; deep MLPs at width 128
are too large to keep: NaN).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from spectral_analysis.checks import CheckRecord
from spectral_analysis.data import TaskData, load_task
from spectral_analysis.experiments.catalog import load_catalog
from spectral_analysis.experiments.groups import Group
from spectral_analysis.experiments.reading import KeptGrid
from spectral_analysis.nn import build_model
from spectral_analysis.paper.kept import (
    beats,
    every,
    judged,
    kept_grid,
    kept_variants,
    missing_record,
    spread_text,
)
from spectral_analysis.train import load_checkpoint
from spectral_analysis.vocabulary import DEFAULT_LEAK

PLAIN_ENDS = " (plain ends)"  # key suffix of the SVD nets with plain input and output layers
READINGS = {"": "every layer SVD-parameterized", PLAIN_ENDS: "plain input and output layers"}
SOURCE = "ICML Section 7.2 (Fig. 5)"
EARLY_EVALUATIONS = 3  # validation is read once an epoch (eval_every = 390): epochs 1-3
TRAINS = 0.5  # the test accuracy a net must reach to count as trained on MNIST (chance: 0.1)
EXPLODES_AT_INIT = 3.0  # log10 of a forward gain at initialization: above it a net explodes before training
RESILIENCE_TOLERANCE = 0.02  # accuracy an SVD net may lose beyond its plain twin and still count as resilient
SHALLOW_QUOTE = ("On a shallow network, Spectral-MLP and Spectral-ResNet achieve similar performance as "
                 "ResNet while MLP's convergence is slower")
STATED_FAILURE_DEPTHS = {"mlp": 35, "resnet": 70}  # "MLP is not able to function around L ~ 35 and ResNet
# with L ~ 70"
FAILURE_QUOTE = "MLP is not able to function around $L \\sim 35$ and ResNet with $L \\sim 70$"


@dataclass
class DepthRun:
    """One model at one depth: each seed's final test accuracy, the validation curve and the forward gain
    before and after training."""

    accuracies: list[float]
    steps: np.ndarray
    valid_accuracy: np.ndarray
    log10_gain_at_init: float
    log10_gain_trained: float

    @property
    def accuracy(self) -> float:
        """The mean over seeds."""
        return sum(self.accuracies) / len(self.accuracies)


def plain_readings() -> dict[str, tuple[str, str]]:
    """The plain nets the grid trains by another reading (the catalog's ``row`` and ``reading``), each
    read against the stated depth of its net: ``{"mlp-he": ("mlp", "He et al. ...")}``."""
    catalog = load_catalog()
    variants = catalog["fig5-depth"].variants if "fig5-depth" in catalog else []
    return {v["label"]: (v["row"], v["reading"]) for v in variants if v.get("row") in STATED_FAILURE_DEPTHS}


def forward_gain(model: torch.nn.Module, inputs: torch.Tensor) -> float:
    """Mean over the batch of ``log10 ||h_L|| / ||h_0||``: h_0 after the input layer, h_L after the last
    hidden layer (or block)."""
    with torch.no_grad():
        _, hidden = model(inputs, return_hidden=True)
    norms = hidden.double().norm(dim=-1)
    return float(torch.log10(norms[-1] / norms[0]).mean())


def start_model(row: dict, task: TaskData) -> torch.nn.Module:
    """The net a kept trial started from, rebuilt from its configuration and seed as the trainer built it."""
    config = row["config"]
    torch.manual_seed(row["seed"])
    return build_model(config["model"], task.input_size, config["hidden"], task.output_size,
                       **config.get("model_options", {}))


def _gains(group: Group, task: TaskData, probe: torch.Tensor) -> tuple[float, float]:
    """Forward gain of the net the first kept seed started from, and of the kept trained net (the zoo's seed;
    NaN where the zoo kept no checkpoint)."""
    at_init = forward_gain(start_model(group.rows[0], task), probe)
    checkpoint_path = group.checkpoint()
    if checkpoint_path is None:
        return at_init, math.nan
    return at_init, forward_gain(load_checkpoint(checkpoint_path).model, probe)


def runs_from_grid(grid: KeptGrid) -> dict[str, dict[int, DepthRun]]:
    """``runs[model][depth]`` from the kept grid; the plain-ends variants keyed with :data:`PLAIN_ENDS`."""
    task = load_task("mnist-flat")
    probe = task.test.inputs[:200]
    runs: dict[str, dict[int, DepthRun]] = {}
    for g in grid.groups:
        name = g.variant.replace("-plain-ends", PLAIN_ENDS)
        steps, valid = g.curve("valid", "accuracy")
        runs.setdefault(name, {})[int(g.axes["num_layers"])] = DepthRun(
            g.final_per_seed(), steps, valid.mean, *_gains(g, task, probe))
    return {m: dict(sorted(v.items())) for m, v in runs.items()}


def _drops(runs: dict[int, DepthRun]) -> list[float]:
    """Accuracy each seed loses from the shallowest to the deepest net (seeds paired in order)."""
    return [a - b for a, b in zip(runs[min(runs)].accuracies, runs[max(runs)].accuracies, strict=False)]


def trains_where_plain_fails(spectral: list[float], plain: list[float]) -> str:
    """``holds``: every SVD seed beats every plain seed and reaches :data:`TRAINS`; ``differs``: no SVD
    seed reaches it, or the plain net's worst seed beats the SVD net's best; else ``inconclusive``."""
    if max(spectral) < TRAINS:
        return "differs"
    ordered = beats(spectral, plain)
    return "inconclusive" if ordered == "holds" and min(spectral) < TRAINS else ordered


def resilient(spectral_drops: list[float], plain_drops: list[float]) -> str:
    """``holds`` when the SVD net's largest drop is below the plain net's smallest plus the tolerance,
    ``differs`` when its smallest is above the plain net's largest plus the tolerance."""
    return beats(spectral_drops, [d + RESILIENCE_TOLERANCE for d in plain_drops], higher_is_better=False)


def stops_training_from(runs: dict[int, DepthRun], every_seed: bool) -> int | None:
    """The smallest depth from which (at it and every deeper one) every seed, or with ``every_seed``
    false at least one seed, stays below :data:`TRAINS`; ``None`` when there is none."""
    first = None
    for depth in sorted(runs, reverse=True):
        failing = [a < TRAINS for a in runs[depth].accuracies]
        if not (all(failing) if every_seed else any(failing)):
            break
        first = depth
    return first


def _fails_from(depth: int | None, every_seed: bool) -> str:
    if depth is None:  # the deepest L has a seed that trains (every_seed) or no seed that fails
        return f"{'some' if every_seed else 'every'} seed trains at the deepest L"
    return f"{'every' if every_seed else 'some'} seed fails from L = {depth}"


def stops_around(runs: dict[int, DepthRun], stated: int) -> tuple[str, list[int]]:
    """Whether a plain net stops training "around" the ``stated`` depth: within one grid step of the
    grid depths nearest to it. ``holds`` when both readings of where it stops (the first depth from which
    any seed fails, and every seed) are within, ``differs`` when neither is, else ``inconclusive``;
    also returns the accepted depths."""
    depths = sorted(runs)
    distance = min(abs(d - stated) for d in depths)
    nearest = [i for i, d in enumerate(depths) if abs(d - stated) == distance]
    accepted = depths[max(0, nearest[0] - 1): nearest[-1] + 2]
    inside = [stops_training_from(runs, every_seed) in accepted for every_seed in (False, True)]
    return ("holds" if all(inside) else "differs" if not any(inside) else "inconclusive"), accepted


def records_from_runs(runs: dict[str, dict[int, DepthRun]], size: str) -> list[CheckRecord]:
    """Two claims, each judged in both readings over seeds: Spectral-MLP trains at the deepest L where MLP
    fails, and the SVD nets lose no more accuracy from the shallowest to the deepest L than their plain
    twins (within :data:`RESILIENCE_TOLERANCE`)."""
    depths = sorted(next(iter(runs.values())))
    deep = depths[-1]
    table = "; ".join(
        f"{m}: " + ", ".join(f"L = {d} {spread_text(r.accuracies, '.3f')}" for d, r in v.items())
        for m, v in runs.items()
    )
    gains = ", ".join(
        f"{m} {v[deep].log10_gain_at_init:.2f}"
        + (f" -> {v[deep].log10_gain_trained:.2f}" if math.isfinite(v[deep].log10_gain_trained) else "")
        for m, v in runs.items()
    )
    numbers = {
        key: {m: {d: getattr(r, key) for d, r in v.items()} for m, v in runs.items()}
        for key in ("accuracy", "accuracies", "log10_gain_at_init", "log10_gain_trained")
    }
    drops = {m: _drops(v) for m, v in runs.items()}
    records = []
    for suffix, reading in READINGS.items():
        mlp, spectral = runs["mlp"][deep].accuracies, runs["spectral-mlp" + suffix][deep].accuracies
        records.append(
            CheckRecord(
                SOURCE,
                f"Spectral-MLP trains (test accuracy >= {TRAINS}) at depths where plain MLP fails "
                f"(L = {deep}; {reading})",
                trains_where_plain_fails(spectral, mlp),
                f"{size}: {table}. At L = {deep}, Spectral-MLP ({reading}) {spread_text(spectral, '.3f')} "
                f"against MLP {spread_text(mlp, '.3f')}. "
                f"Forward gain log10 ||h_L||/||h_0|| at L = {deep}, at init (-> trained, where the zoo kept "
                f"the checkpoint): {gains}",
                {**numbers, "deepest": deep, "trains": TRAINS},
                quote="when the network is deeper, both MLP and ResNet start to fail. " + FAILURE_QUOTE,
            )
        )
        pairs = {f"spectral-{p}{suffix}": p for p in ("mlp", "resnet")}
        outcomes = {s: resilient(drops[s], drops[p]) for s, p in pairs.items()}
        exploding = {s: runs[s][deep].log10_gain_at_init for s in pairs
                     if outcomes[s] == "differs" and runs[s][deep].log10_gain_at_init > EXPLODES_AT_INIT}
        outcomes.update({s: "inconclusive" for s in exploding})
        explained = "".join(
            f"; {s}'s differs does not count: its forward gain at initialization is 10^{gain:.1f} at "
            f"L = {deep}, so it explodes before training, under a residual block and an initialization the "
            "paper does not state (Section 7 gives 'a residual block of two layers' and, for the RNNs "
            "alone, Gaussian initialization)" for s, gain in exploding.items())
        records.append(
            CheckRecord(
                SOURCE,
                f"the SVD-based nets are resilient to increasing depth: they lose no more accuracy from "
                f"L = {depths[0]} to L = {deep} than MLP and ResNet ({reading})",
                every(list(outcomes.values())),
                f"{size}: accuracy lost from L = {depths[0]} to L = {deep} (seeds): "
                + ", ".join(f"{m} {spread_text(drops[m], '.3f')}" for m in ("mlp", "resnet", *pairs))
                + "; " + ", ".join(f"{s} {o}" for s, o in outcomes.items())
                + f" (tolerance {RESILIENCE_TOLERANCE})" + explained,
                {"accuracy_drop": {m: drops[m] for m in ("mlp", "resnet", *pairs)},
                 "exploding_at_init": exploding},
                quote="On the other hand, the SVD based methods are resilient to increasing depth and thus "
                      "achieve higher precision",
            )
        )
    return records


def similar(accuracies: list[float], reference: list[float], tolerance: float = RESILIENCE_TOLERANCE) -> str:
    """``holds`` when every seed lies within ``tolerance`` of the reference seeds' range, ``differs`` when
    the two ranges are more than ``tolerance`` apart, else ``inconclusive``."""
    low, high = min(reference) - tolerance, max(reference) + tolerance
    if low <= min(accuracies) and max(accuracies) <= high:
        return "holds"
    return "differs" if max(accuracies) < low or min(accuracies) > high else "inconclusive"


def shallow_records(grid: KeptGrid, size: str) -> list[CheckRecord]:
    """At the shallowest L: the SVD nets' test accuracy :func:`similar` to ResNet's (in both readings),
    and MLP converging slower than every other net (each seed's mean validation accuracy over the first
    :data:`EARLY_EVALUATIONS` evaluations, compared by :func:`beats`)."""
    depth = min(grid.values("num_layers"))
    groups = {g.variant: g for g in grid.groups if int(g.axes["num_layers"]) == depth}
    resnet = groups["resnet"].final_per_seed()
    records = []
    for suffix, reading in READINGS.items():
        names = [f"spectral-{p}{suffix.replace(PLAIN_ENDS, '-plain-ends')}" for p in ("mlp", "resnet")]
        outcomes = {n: similar(groups[n].final_per_seed(), resnet) for n in names}
        records.append(CheckRecord(
            SOURCE, f"on a shallow net (L = {depth}) Spectral-MLP and Spectral-ResNet reach a test accuracy "
                    f"similar to ResNet's: every seed within {RESILIENCE_TOLERANCE} of ResNet's seeds "
                    f"({reading})",
            every(list(outcomes.values())),
            f"{size}: L = {depth}: resnet {spread_text(resnet, '.3f')}, " + ", ".join(
                f"{n} {spread_text(groups[n].final_per_seed(), '.3f')} ({outcomes[n]})" for n in names),
            {"test_accuracy": {n: groups[n].final_per_seed() for n in ["resnet", *names]}},
            quote=SHALLOW_QUOTE))
    early = {name: g.first_per_seed("valid", "accuracy", EARLY_EVALUATIONS) for name, g in groups.items()
             if name not in plain_readings()}  # another reading of MLP is not another net
    outcomes = {name: beats(values, early["mlp"]) for name, values in early.items() if name != "mlp"}
    records.append(CheckRecord(
        SOURCE, f"on a shallow net (L = {depth}) MLP converges slower than every other net (mean validation "
                f"accuracy over the first {EARLY_EVALUATIONS} evaluations, seed against seed)",
        every(list(outcomes.values())),
        f"{size}: L = {depth}, early validation accuracy: " + ", ".join(
            f"{name} {spread_text(values, '.3f')}" for name, values in early.items())
        + "; against mlp: " + ", ".join(f"{name} {o}" for name, o in outcomes.items()),
        {"early_validation_accuracy": early}, quote=SHALLOW_QUOTE))
    return records


def failure_depth_records(runs: dict[str, dict[int, DepthRun]], size: str,
                           nets: dict[str, tuple[str, str | None]] | None = None) -> list[CheckRecord]:
    """Where each plain net stops training against the depth the paper states (:func:`stops_around`);
    ``nets``: each variant of ``runs`` read, the net it is and its reading in words (``None``: the stated
    one; default: MLP and ResNet as stated)."""
    nets = nets if nets is not None else {model: (model, None) for model in STATED_FAILURE_DEPTHS}
    records = []
    for variant, (model, reading) in nets.items():
        stated = STATED_FAILURE_DEPTHS[model]
        verdict, accepted = stops_around(runs[variant], stated)
        first_any, first_every = (stops_training_from(runs[variant], e) for e in (False, True))
        read_as = f" ({reading})" if reading else ""
        records.append(
            CheckRecord(
                SOURCE,
                f"plain {model}{read_as} stops training (test accuracy < {TRAINS}) around L ~ {stated}: from "
                f"a depth within one grid step of it ({', '.join(map(str, accepted))})",
                verdict,
                f"{size}: {variant} " + ", ".join(f"L = {d} {spread_text(r.accuracies, '.3f')}"
                                                 for d, r in runs[variant].items())
                + f". {_fails_from(first_any, False)}; {_fails_from(first_every, True)}",
                {"first_depth_some_seed_fails": first_any, "first_depth_every_seed_fails": first_every,
                 "stated_depth": stated, "accepted_depths": accepted, "trains": TRAINS},
                quote=FAILURE_QUOTE,
            )
        )
    return records


def _size(grid: KeptGrid) -> str:
    return (f"flattened MNIST, width {grid.groups[0].rows[0]['hidden']}, leaky ReLU (leak {DEFAULT_LEAK}), "
            "sigma in [0.9, 1.1]; test accuracy, mean [min, max] over seeds")


def run(quick: bool = True) -> list[CheckRecord]:
    """The claims from kept results (``quick`` is accepted for the common interface). Where each plain net
    stops training reads MLP and ResNet alone, so it is judged on their complete paper-scale seeds as soon as
    those are kept, whatever scale and seed count the rest of the grid has reached."""
    grid = kept_grid("fig5-depth")
    if grid is None:
        claim = "the SVD based methods are resilient to increasing depth"
        return [missing_record(SOURCE, claim, "fig5-depth", claim)]
    records = [judged(grid, record) for record in [*records_from_runs(runs_from_grid(grid), _size(grid)),
                                                   *shallow_records(grid, _size(grid))]]
    plain = kept_variants("fig5-depth", set(STATED_FAILURE_DEPTHS)) or grid
    records += [judged(plain, r) for r in failure_depth_records(runs_from_grid(plain), _size(plain))]
    for variant, (model, reading) in plain_readings().items():
        other = kept_variants("fig5-depth", {variant})
        records += ([judged(other, r) for r in failure_depth_records(runs_from_grid(other), _size(other),
                                                                     {variant: (model, reading)})]
                    if other is not None else
                    [missing_record(SOURCE, f"plain {model} ({reading}) stops training around L ~ "
                                    f"{STATED_FAILURE_DEPTHS[model]}", "fig5-depth", FAILURE_QUOTE)])
    return records
