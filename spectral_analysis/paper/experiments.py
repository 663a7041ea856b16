"""Paper check: the ICML experiments' qualitative claims on recurrent models, read from kept results:

- Section 7.1 (Fig. 1): "the gradient w.r.t. first cell of oRNN/Spectral-RNN does not vanish regardless
  of the depth, while IRNN/LSTM's gradients vanish as L becomes lager" (sic): ||dL/dh^(0)|| seed by seed
  at L = 300, over the early phase and over the whole run (:func:`gradient_record`), from ``fig1-addition``;
- Section 7.2 (Fig. 4): "Although IRNN has small spectral margin at first few iterations, it quickly
  deviates from being orthogonal", against Spectral-RNN's margin, which Eq. 7 keeps within r, from the
  pixel-MNIST 784-step trials of ``fig3-mnist``, read seed by seed on the first epoch
  (:data:`FIG4_STEPS`), a diverged seed only well before its divergence: a claim about the start of
  training, which the budget grid's runs (the paper's, cut to 2 of 20 epochs) decide;
- Section 7.2 (Fig. 4): "RNN suffers from vanishing gradient at first several epochs, LSTM's gradient
  explode after several epochs while oRNN and Spectral-RNN have much more stable gradients", as three
  records on the same trials' ||dL/dh^(0)|| (:func:`fig4_gradient_records`).
"""

from __future__ import annotations

import numpy as np

from spectral_analysis.checks import CheckRecord
from spectral_analysis.experiments.groups import Group
from spectral_analysis.experiments.reading import KeptGrid
from spectral_analysis.experiments.results import read_curves
from spectral_analysis.paper.kept import (
    judged,
    judged_on_first_steps,
    kept_grid,
    kept_variants,
    missing_record,
    seed_by_seed,
    unfit_trials,
)

VANISHED = 1e-8  # ||dL/dh0|| below this counts as vanished
FIG1_EARLY_STEPS = 2000  # Fig. 1's early phase: the first tenth of the 20,000-step cap
FIG4_STEPS = 390  # "quickly": within the first of the grid's 20 epochs (50,000 images, batch 128)
SEVERAL_EPOCHS = 3  # "at first several epochs", "after several epochs": the first 3 epochs, 1170 steps
EXPLODED = 1.0  # ||dL/dh0|| above this counts as exploded (the loss per example is of order 1)
BEFORE_DIVERGENCE = 0.5  # a diverged seed is read on this fraction of its steps before the divergence
FIG1_SOURCE, FIG4_SOURCE = "ICML Section 7.1 (Fig. 1, L = 300)", "ICML Section 7.2 (Fig. 4)"
FIG1_CLAIM = (
    "the gradient w.r.t. first cell of oRNN/Spectral-RNN does not vanish regardless of the depth, "
    "while IRNN/LSTM's gradients vanish as L becomes lager"
)
FIG4_GRADIENT_QUOTE = (
    "RNN suffers from vanishing gradient at first several epochs, LSTM's gradient explode after several "
    "epochs while oRNN and Spectral-RNN have much more stable gradients"
)
FIG4_CLAIM = (
    "Although IRNN has small spectral margin at first few iterations, it quickly deviates from "
    "being orthogonal"
)
EXPECTED_ALIVE = {"ornn": True, "spectral": True, "irnn": False, "lstm": False}


def vanished_per_seed(group: Group, until: float = np.inf) -> list[float]:
    """Each seed's share of its training records up to step ``until`` at which ``||dL/dh^(0)||`` is below
    :data:`VANISHED` (a seed "vanishes" over a phase when that share is at least a half)."""
    shares = []
    for directory in group.dirs:
        curves = read_curves(directory)["train"]
        gradient = curves["grad_h0_norm"][curves["step"] <= until]
        shares.append(float(np.mean(gradient < VANISHED)) if len(gradient) else float("nan"))
    return shares


def gradient_record() -> CheckRecord:
    """Fig. 1's gradient claim at L = 300, seed by seed over two phases of training: the first
    :data:`FIG1_EARLY_STEPS` steps and the whole run. A seed vanishes over a phase when its gradient at the
    first cell is below :data:`VANISHED` at half its records or more; each phase is judged by
    :func:`seed_by_seed` (oRNN and Spectral-RNN must not vanish, IRNN and LSTM must). The paper's figure
    shows "a reasonable number of iterations" that its text does not give, so where the phases disagree
    the verdict is ``inconclusive``."""
    grid = kept_grid("fig1-addition")
    if grid is None:
        return missing_record(FIG1_SOURCE, FIG1_CLAIM, "fig1-addition", FIG1_CLAIM)
    groups = {m: g for m in EXPECTED_ALIVE if (g := grid.group(m, length=300)) is not None}
    phases = {"early": FIG1_EARLY_STEPS, "whole": np.inf}
    shares = {phase: {m: vanished_per_seed(g, until) for m, g in groups.items()}
              for phase, until in phases.items()}
    readings = {phase: seed_by_seed({m: [(v >= 0.5) != EXPECTED_ALIVE[m] for v in values]
                                     for m, values in per_model.items()})
                for phase, per_model in shares.items()}
    verdict = readings["early"] if readings["early"] == readings["whole"] else "inconclusive"
    ending = {m: g.last_per_seed("train", "grad_h0_norm") for m, g in groups.items()}

    def listing(phase: str) -> str:
        return ", ".join(f"{m} " + "/".join(f"{v:.2f}" for v in values)
                         for m, values in shares[phase].items())

    evidence = (
        f"addition L = 300, n = {grid.groups[0].rows[0]['hidden']}: each seed's share of training records "
        f"with ||dL/dh^(0)|| below {VANISHED:g} (a seed vanishes at a share of 0.5 or more), over the first "
        f"{FIG1_EARLY_STEPS:,} steps: {listing('early')} ({readings['early']}); over the whole run: "
        f"{listing('whole')} ({readings['whole']}). The paper's figure shows \"a reasonable number of "
        "iterations\" its text does not give" + ("" if readings["early"] == readings["whole"] else
                                                  ", and the two phases read differently")
        + ". At the end of training (median of each seed's last 5 records): "
        + ", ".join(f"{m} " + ", ".join(f"{v:.2g}" for v in values) for m, values in ending.items())
    )
    return judged(
        grid,
        CheckRecord(
            FIG1_SOURCE, FIG1_CLAIM, verdict, evidence,
            {"vanished_share": shares, "phase_verdicts": readings, "grad_h0_norm_at_end": ending,
             "vanished_below": VANISHED, "early_steps": FIG1_EARLY_STEPS},
            quote=FIG1_CLAIM,
        ),
        min((g.seeds for g in groups.values()), default=0),
    )


def _margins_per_seed(group: Group) -> list[tuple[str, np.ndarray, np.ndarray, int | None]]:
    """Each seed's ``(trial, steps, spectral margin, divergence step)`` on the first :data:`FIG4_STEPS`
    steps. A seed that diverged is read only on the first half of its record before the divergence
    (:data:`BEFORE_DIVERGENCE`), so the run-up to its blow-up never counts as deviating from orthogonal."""
    seeds = []
    for directory, diverged_at in [*((d, None) for d in group.dirs),
                                   *zip(group.failed_dirs, (r.get("last_recorded_step")
                                                            for r in group.failed_rows), strict=True)]:
        curves = read_curves(directory)["train"]
        steps, margin = curves["step"], curves["spectral_margin"]
        last = FIG4_STEPS if diverged_at is None else min(FIG4_STEPS, BEFORE_DIVERGENCE * diverged_at)
        kept = steps <= last
        seeds.append((directory.name, steps[kept], margin[kept], diverged_at))
    return seeds


def margin_record() -> CheckRecord:
    """Fig. 4's claim on the first :data:`FIG4_STEPS` steps, seed by seed: each IRNN seed starts
    orthogonal (margin 0) and its spectral margin passes r within them (a diverged seed read as
    :func:`_margins_per_seed` says), while every Spectral-RNN seed's stays within r. ``holds`` when
    every seed of both shows it, ``differs`` when no seed of one does, else ``inconclusive``."""
    grid = kept_grid("fig3-mnist")
    if grid is None:
        return missing_record(FIG4_SOURCE, FIG4_CLAIM, "fig3-mnist", FIG4_CLAIM)
    r = 0.1
    groups = {m: g for m in ("irnn", "spectral")
              if (g := grid.group(m, task="mnist", pixels_per_step=1)) is not None}
    as_claimed: dict[str, list[bool]] = {}
    first_above: dict[str, list[int | None]] = {}
    margin: dict[str, list[float]] = {}
    lines = []
    for model, group in groups.items():
        for trial, steps, values, diverged_at in _margins_per_seed(group):
            above = values > r
            first = int(steps[np.argmax(above)]) if above.any() else None
            largest = float(np.nanmax(values)) if len(values) else float("nan")
            claimed = first is not None if model == "irnn" else largest <= r + 1e-6
            as_claimed.setdefault(model, []).append(claimed)
            first_above.setdefault(model, []).append(first)
            margin.setdefault(model, []).append(largest)
            read = (f", diverged at step {diverged_at}, read to step {int(steps[-1]) if len(steps) else 0}"
                    if diverged_at is not None else "")
            where = f"above r from step {first}" if first is not None else "never above r"
            lines.append(f"{trial.rsplit('_', 1)[-1]} {model} largest {largest:.3f}, {where}{read}")
    verdict = seed_by_seed(as_claimed) if len(as_claimed) == 2 else "unverified"
    evidence = (
        f"pixel MNIST, 784 steps, the spectral margin max_i |sigma_i - 1| seed by seed in the first "
        f"{FIG4_STEPS} training steps (the first epoch; r = {r}; a diverged seed read on the first half of "
        f"its record before the divergence): " + "; ".join(lines) + ". IRNN starts at 0 (orthogonal); "
        "Spectral-RNN's margin <= r holds by construction of Eq. 7, the measured part is IRNN's"
    )
    record = CheckRecord(
        FIG4_SOURCE,
        FIG4_CLAIM,
        verdict,
        evidence,
        {"max_margin": margin, "first_step_above_r": first_above, "as_claimed": as_claimed,
         "steps_read": FIG4_STEPS},
        quote=FIG4_CLAIM,
    )
    # the seeds of the two models the claim reads, diverged ones included
    seeds = min((len(v) for v in as_claimed.values()), default=0)
    return judged_on_first_steps(grid, record, list(groups.values()), FIG4_STEPS, seeds)


def _seed_gradients(group: Group, with_failed: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each seed's ``(steps, ||dL/dh0||)`` training records (``with_failed``: the diverged seeds' too, up
    to their divergence)."""
    dirs = [*group.dirs, *(group.failed_dirs if with_failed else [])]
    return [(c["step"], c["grad_h0_norm"]) for c in (read_curves(d)["train"] for d in dirs)]


def _fig4_group(grid: KeptGrid, model: str) -> Group | None:
    return grid.group(model, task="mnist", pixels_per_step=1)


def fig4_gradient_records() -> list[CheckRecord]:
    """The three parts of Fig. 4's gradient claim on pixel MNIST at 784 steps, per seed (holds when every
    seed shows it, differs when none does): the RNN's median ||dL/dh0|| over the first
    :data:`SEVERAL_EPOCHS` epochs below :data:`VANISHED` (a claim about the start of training:
    :func:`judged_on_first_steps`); the LSTM's at most :data:`EXPLODED` in those epochs and above it
    after them; oRNN's and Spectral-RNN's within [VANISHED, EXPLODED] at every record of training."""
    epochs = SEVERAL_EPOCHS * FIG4_STEPS
    parts = [
        ("rnn", "RNN's gradient at the first cell vanishes during the first several epochs (pixel MNIST, "
                f"784 steps; the first {SEVERAL_EPOCHS} epochs)"),
        ("lstm", "LSTM's gradient at the first cell explodes after several epochs (pixel MNIST, 784 steps; "
                 f"above {EXPLODED:g} after the first {SEVERAL_EPOCHS} epochs, not within them)"),
        ("ornn,spectral", "oRNN's and Spectral-RNN's gradients at the first cell stay stable: neither "
                          f"vanish nor explode (pixel MNIST, 784 steps; within [{VANISHED:g}, {EXPLODED:g}] "
                          "at every record)"),
    ]
    records = []
    for models, claim in parts:
        names = models.split(",")
        grid = kept_variants("fig3-mnist", set(names)) or kept_grid("fig3-mnist")
        groups = [g for g in (_fig4_group(grid, m) for m in names) if g is not None] if grid else []
        if len(groups) < len(names):
            records.append(missing_record(FIG4_SOURCE, claim, "fig3-mnist", FIG4_GRADIENT_QUOTE))
            continue
        texts, outcomes, last = [], {}, 0
        for group in groups:
            for steps, grad in _seed_gradients(group, with_failed=models == "rnn"):
                last = max(last, int(steps[-1]))
                early, late = grad[steps <= epochs], grad[steps > epochs]
                if models == "rnn":
                    value = float(np.nanmedian(early))
                    outcomes.setdefault(group.variant, []).append(value < VANISHED)
                    texts.append(f"{group.variant} median {value:.2e}")
                elif models == "lstm":
                    before, after = float(np.nanmax(early)), float(np.nanmax(late)) if len(late) else np.nan
                    outcomes.setdefault(group.variant, []).append(before <= EXPLODED < after)
                    texts.append(f"lstm max {before:.2e} within, {after:.2e} after")
                else:
                    low, high = float(np.nanmin(grad)), float(np.nanmax(grad))
                    outcomes.setdefault(group.variant, []).append(low >= VANISHED and high <= EXPLODED)
                    texts.append(f"{group.variant} {low:.2e} to {high:.2e}")
        evidence = (f"||dL/dh^(0)|| per seed (one epoch = {FIG4_STEPS} steps; records to step {last}): "
                    + "; ".join(texts)
                    + f"; as claimed in {sum(map(sum, outcomes.values()))} of "
                    f"{sum(map(len, outcomes.values()))} seeds")
        record = CheckRecord(FIG4_SOURCE, claim, seed_by_seed(outcomes), evidence,
                             {"as_claimed": outcomes, "vanished_below": VANISHED, "exploded_above": EXPLODED},
                             quote=FIG4_GRADIENT_QUOTE)
        seeds = min(g.seeds + (len(g.failed_dirs) if models == "rnn" else 0) for g in groups)
        # the LSTM claim is about a model that learns: a seed at chance or collapsed is no evidence of it
        unfit = unfit_trials(grid, {"lstm": groups}) if models == "lstm" else None
        records.append(judged_on_first_steps(grid, record, groups, epochs, seeds) if models == "rnn"
                       else judged(grid, record, seeds, unfit=unfit, groups=groups))
    return records


def run(quick: bool = True) -> list[CheckRecord]:
    """Every claim from kept results (``quick`` is accepted for the common interface; nothing trains)."""
    return [gradient_record(), margin_record(), *fig4_gradient_records()]
