"""The numbers the documentation states, generated into its marked blocks so that each is written once.

A page holds ``<!-- NAME:begin -->`` ... ``<!-- NAME:end -->`` blocks; ``spectral-analysis figures
--readme PAGE`` rewrites every block it knows from ``results/``, and the tests fail when a page's block
is not what the results give. The blocks:

- ``reproduction``, ``reproduction-kept``, ``reproduction-summary``: the reproduction table, its paper-
  and budget-scale rows, and the README's headline rows (:mod:`.reproduction`);
- ``checks-FIGURE``: the verdicts and evidence of the paper checks that read one figure, in a fold
  beneath it on the Figures page (:data:`FIGURE_CHECKS` says which checks read which figure);
- ``demo``: the main job's numbers (``make demo``) from the run kept in ``results/demo/demo.json``;
- ``grid=EXPERIMENT@SCALE``: every configuration of a kept grid, seed by seed (:func:`grid_markdown`);
- ``calibration=EXPERIMENT@SCALE``: each baseline of a grid beside its plain-PyTorch reference, as
  ``spectral-analysis calibrate`` kept it (:func:`calibration_markdown`);
- ``bounds-table-fig2r``, ``bounds-table-pixel``: every bound on the row-MNIST zoo and on the pixel-MNIST
  subjects, from ``figures/bounds_table_fig2r.csv`` and ``figures/bounds_table_pixel.csv``
  (:func:`bounds_table_markdown`);
- ``benchmark=NAME``: the benchmark report ``benchmarks/NAME.json`` (``benchmarks/bench_*.py --out``),
  :func:`~spectral_analysis.plotting.benchmarks.benchmark_markdown`;
- ``certificates``: every certificate record kept under ``results/certificates`` (``certify --state
  DIR --json > DIR/record.json``), :func:`certificates_markdown`.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from spectral_analysis.analysis.certify import kl_allowed
from spectral_analysis.checks import CheckRecord, replace_marked_block
from spectral_analysis.experiments.calibration import CALIBRATION_DIR, recipe_status
from spectral_analysis.experiments.catalog import find_experiment
from spectral_analysis.experiments.grid import configuration_key
from spectral_analysis.experiments.groups import Group
from spectral_analysis.experiments.reading import read_grid, seeds_text
from spectral_analysis.experiments.row_status import plateaued
from spectral_analysis.plotting.benchmarks import BENCHMARKS_DIR, benchmark_markdown
from spectral_analysis.train.trainer import UNRECORDED_MACHINE

# Which paper checks read which figure: the figure's stem -> the starts of the checks' sources.
FIGURE_CHECKS: dict[str, tuple[str, ...]] = {
    "fig1_addition": ("ICML Section 7.1 (Fig. 1",),
    "fig2_copy": ("ICML Section 7.1 (Fig. 2)",),
    "fig3_mnist": ("ICML Section 7.2 (Fig. 3)",),
    "fig4_mnist_dynamics": ("ICML Section 7.2 (Fig. 4)",),
    "fig5_depth": ("ICML Section 7.2 (Fig. 5)",),
    "fig6_ucr": ("ICML Appendix C (Table 4)",),
    "table3_ptb": ("ICML Section 7.3 (Table 3",),
    "fig2a_r": ("svdRNN (earlier version) Section 7.2 (Fig. 2(a))",),
    "fig2c_leak": ("svdRNN (earlier version) Section 7 (Fig. 2(c, f))",),
    "dizzy_copy": ("DizzyRNN Section 6 (Fig. 1)",),
    "kru_copy": ("KRU Section 4.1 (Fig. 1",),
    "kru_adding": ("KRU Section 4.2 (Fig. 2",),
    "kru_mnist": ("KRU Section 4.3 (Table 2",),
    "kru_ptb": ("KRU Section 4.4 (Table 3",),
    "kru_table4": ("KRU Section 4.5 (Table 4",),
    "kru_amplitude": ("KRU Section 4.7",),
}
CHECKS_PREFIX = "checks-"
GRID_PREFIX = "grid="
CALIBRATION_PREFIX = "calibration="
BENCHMARK_PREFIX = "benchmark="
DEMO_RECORD = Path("demo") / "demo.json"
CERTIFICATES = Path("certificates")  # results/certificates/EXPERIMENT/SCALE/TRIAL/PRIOR/record.json
CERTIFICATE_GOAL = 0.15  # the certified error the certificates issue (#80) asks of pixel MNIST


def figure_records(records: list[CheckRecord], figure: str) -> list[CheckRecord]:
    """The checks that read ``figure`` (a key of :data:`FIGURE_CHECKS`), in the checks' order."""
    if figure not in FIGURE_CHECKS:
        raise ValueError(f"no paper check is mapped to the figure {figure!r}; known: {sorted(FIGURE_CHECKS)}")
    return [r for r in records if r.source.startswith(FIGURE_CHECKS[figure])]


def figure_checks_markdown(records: list[CheckRecord], figure: str) -> str:
    """One bullet per check of ``figure``: verdict, the claim as tested, scale and seeds, the paper's
    words and the evidence, all as the check wrote them.

    >>> from spectral_analysis.checks import CheckRecord
    >>> r = CheckRecord("DizzyRNN Section 6 (Fig. 1)", "a claim", "holds", "0.9", quote="q",
    ...                 scale="paper", seeds=3)
    >>> figure_checks_markdown([r], "dizzy_copy")
    '- **holds** (paper scale, 3 seeds): a claim. The paper: "q". Evidence: 0.9.'
    """
    chosen = figure_records(records, figure)
    if not chosen:
        raise ValueError(f"no paper check reads {figure!r} (sources starting {FIGURE_CHECKS[figure]})")
    lines = []
    for r in chosen:
        where = f" ({r.scale} scale, {seeds_text([r.seeds]) if r.seeds else '- seeds'})" if r.scale else ""
        quote = f' The paper: "{r.quote}".' if r.quote and r.quote != r.claim else ""
        lines.append(f"- **{r.verdict}**{where}: {r.claim}.{quote} Evidence: {r.evidence}.")
    return "\n".join(lines)


def demo_markdown(record: Mapping[str, Any]) -> str:
    """The main job's run as the docs state it: where it ran, each model's test MSE, and log10 G(w) of
    Theorem 5 (Corollary 1 beside it for Spectral-RNN) at each length, from ``demo --record``'s file."""
    names = {"rnn": "RNN", "spectral": "Spectral-RNN (Theorem 5, measured `||W||`)"}
    runs = record["runs"]
    lengths = list(next(iter(runs.values()))["log10_G"])
    mse = ", ".join(f"{names[m].split(' (')[0]} test MSE {r['test_mse']:.4f}" for m, r in runs.items())
    lines = [f"`spectral-analysis demo` on {record['machine']} ({record['date']}, torch {record['torch']}): "
             f"addition T = {record['length']}, {record['steps']} steps each, n = 128; {mse} (always "
             f"predicting 1 scores {record['baseline_mse']:.3f}). log10 G(w) of the trained weights at "
             "each length, with gamma = 1 and B from the data:", "",
             "| model | `||W||` | " + " | ".join(f"T = {T}" for T in lengths) + " |",
             "|---|---|" + "---|" * len(lengths)]
    for model, r in runs.items():
        lines.append(f"| {names[model]} | {r['W_norm']:.3f} | "
                     + " | ".join(f"{r['log10_G'][T]:.2f}" for T in lengths) + " |")
        if r.get("corollary1_log10_G"):
            lines.append("| Spectral-RNN (Corollary 1, `||W|| <= 1 + r`) | | "
                         + " | ".join(f"{r['corollary1_log10_G'][T]:.2f}" for T in lengths) + " |")
    return "\n".join(lines)


def _value(metric: str, value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.3f}" if metric == "accuracy" else f"{value:#.4g}"


def _configuration(group: Group) -> str:
    axes = ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in group.axes.items())
    return f"{group.variant}" + (f" ({axes})" if axes else "")


def _stopped(row: Mapping[str, Any]) -> str:
    cap = row["config"].get("max_steps")
    how = "plateau" if plateaued(row) else ("cap" if cap and row["steps"] >= cap else "end")
    return f"{row['steps']:,} ({how})"


def _machine_text(machine: str) -> str:
    """A machine as a table cell names it: a GPU without the "(CUDA)" tag; the seconds a checkpoint kept
    before its trainer recorded machines (``UNRECORDED_MACHINE``) in words."""
    return "a machine not recorded" if machine == UNRECORDED_MACHINE else machine.removesuffix(" (CUDA)")


def training_seconds_text(group: Group) -> str:
    """The median training seconds per trial, with the GPU they ran on where the trials ran on one. A
    trial resumed on another machine than it started on (its ``seconds_by_machine`` names two) stays
    out of the median and is shown apart, its seconds split by machine: they add two machines' speeds."""
    parts, whole = [], []
    for row, seconds in zip(group.rows, group.final_per_seed("seconds"), strict=True):
        split = row.get("seconds_by_machine") or {}
        if len(split) > 1:
            parts.append(f"seed {row['seed']} resumed across machines: " + " + ".join(
                f"{part:.0f} on {_machine_text(machine)}" for machine, part in split.items()))
        elif math.isfinite(seconds):
            whole.append((row, seconds))
    if whole:
        gpus = sorted({_machine_text(str(r.get("machine", "a GPU"))) for r, _ in whole
                       if r.get("device") == "cuda"})
        parts.insert(0, f"{statistics.median(s for _, s in whole):.0f}" + (f" on {', '.join(gpus)}" if gpus
                                                                             else ""))
    return "; ".join(parts) or "-"


def grid_markdown(results: Path, experiment: str, scale: str) -> str:
    """Every configuration of ``experiment``'s kept grid at ``scale``: each seed's final test value of the
    primary metric, their mean [min, max], the mean best validation value, each seed's last step and why
    it stopped (plateau, the ``max_steps`` cap, or the end of a fixed length), the median training
    seconds; a diverged seed is named with its step. What the docs' tables of a grid are generated from.

    >>> grid_markdown(Path("results"), "table2-grid", "paper").splitlines()[0].split(" | ")[:3]
    ['| configuration', "seeds' test accuracy", 'mean [min, max]']
    """
    grid = read_grid(results, experiment, scale)
    if grid is None or grid.scale != scale:
        raise ValueError(f"no kept {scale} grid of {experiment!r} in {results}")
    metric = grid.groups[0].rows[0]["metric"]
    lines = [f"| configuration | seeds' test {metric} | mean [min, max] | best validation, mean | "
             "steps (why stopped) | training s, median |", "|---|---|---|---|---|---|"]
    for group in grid.groups:
        rows = sorted(group.rows, key=lambda r: r["seed"])
        tests = [(r.get("test_metrics") or {}).get(metric) for r in rows]
        finite = [t for t in tests if t is not None and math.isfinite(t)]
        key = configuration_key(rows[0]["trial"])
        diverged = [f"seed {r['seed']} diverged" for r in grid.failed if configuration_key(r["trial"]) == key]
        seeds = ", ".join(_value(metric, t) for t in tests) + "".join(f"; {d}" for d in diverged)
        spread = (f"{_value(metric, statistics.fmean(finite))} [{_value(metric, min(finite))}, "
                  f"{_value(metric, max(finite))}]" if len(finite) > 1 else "-")
        best = [r["best_valid"] for r in rows if r.get("best_valid") is not None]
        lines.append(f"| {_configuration(group)} | {seeds} | {spread} | "
                     f"{_value(metric, statistics.fmean(best)) if best else '-'} | "
                     f"{', '.join(_stopped(r) for r in rows)} | {training_seconds_text(group)} |")
    return "\n".join(lines)


def _loss(value: float) -> str:
    """A training loss to three decimals, in scientific notation past 1e6 (a side that blew up), or
    ``diverged`` where it is infinite (a side that stopped on a non-finite loss)."""
    if not math.isfinite(value):
        return "diverged"
    return f"{value:.3f}" if abs(value) < 1e6 else f"{value:.2e}"


def _metric(value: float | None) -> str:
    """A calibration side's validation metric as :func:`_loss` shows a loss, or ``-`` where that side
    diverged and has none."""
    return "-" if value is None else _loss(value)


def _seed_spread(row: dict, side: str) -> str:
    """A calibration side's training loss, with its seeds' range where it is a mean over seeds."""
    losses = [seed[f"{side}_loss"] for seed in row.get("seeds", [])]
    spread = f" [{_loss(min(losses))}, {_loss(max(losses))}]" if losses else ""
    return f"{_loss(row[f'{side}_loss'])}{spread}"


def calibration_markdown(results: Path, experiment: str, scale: str) -> str:
    """The calibrations kept for ``experiment``'s grid at ``scale`` (``results/EXPERIMENT/calibration/
    SCALE/VARIANT.json``), in the catalog's variant order: steps (and seeds, over which the losses and
    metrics are means; the seeds' range in brackets), each side's training loss (the mean over the last
    quarter of its records) beside the task's constant-predictor loss, each side's validation metric, the
    verdict, and whether the recipe tried is still the grid's.

    >>> calibration_markdown(Path("results"), "fig1-addition", "paper").splitlines()[0].split(" | ")[:3]
    ['| baseline', 'steps', 'training loss: toolkit']
    """
    folder = results / experiment / CALIBRATION_DIR / scale
    kept = {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}
    if not kept:
        raise ValueError(f"no kept calibration of {experiment!r} at {scale!r} in {folder}: spectral-analysis "
                         f"calibrate {experiment} --scale {scale} keeps one")
    grid = find_experiment(experiment)
    order = [t.variant for t in grid.trials(scale, seeds=1)]
    lines = ["| baseline | steps | training loss: toolkit | reference | constant predictor | validation: "
             "toolkit | reference | verdict | recipe |", "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    def place(name: str) -> tuple[int, str]:
        variant = kept[name]["variant"]
        return order.index(variant) if variant in order else len(order), name

    for name in sorted(kept, key=place):
        row = kept[name]
        seeds = f" ({len(row['seeds'])} seeds, means)" if "seeds" in row else ""
        point = f", at {', '.join(f'{k} {v}' for k, v in row['axes'].items())}" if "@" in name else ""
        lines.append(f"| {row['variant']} ({row['model']}{point}) | {row['steps']}{seeds} | "
                     f"{_seed_spread(row, 'toolkit')} | {_seed_spread(row, 'reference')} | "
                     f"{row['constant_predictor_loss']:.3f} | {row['metric']} "
                     f"{_metric(row['toolkit_valid'])} | {_metric(row['reference_valid'])} | "
                     f"{row['verdict']} | {recipe_status(row, grid, scale)} |")
    return "\n".join(lines)


def _fixed(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def bounds_table_markdown(csv_path: Path) -> str:
    """The ``bounds-table`` CSV as the docs show it: test error, log10 G of Theorem 5 and Corollary 1,
    Appendix A.6's explicit bound (its regime where it has none; ``-`` in tables kept before the regime
    was), log10 of Bartlett et al.'s unrolled bound, and each certificate with Q's test error and KL."""
    from spectral_analysis.analysis.bounds_table import read_bounds_table

    names = {"ornn": "oRNN", "rnn": "RNN", "spectral": "svdRNN"}
    header = ["subject", "model (largest sigma allowed)", "test error", "log10 G (Thm 5)", "log10 G (Cor. 1)",
              "A.6 explicit", "log10 unrolled (Bartlett)",
              "Q centred on w, prior at init (Q's test error, KL)", "Q centred on w, learned prior (Q's test "
              "error, KL)", "w derandomized (prior at init, learned)", "w, held out"]
    lines = ["| " + " | ".join(header) + " |", "|---|---|---:|---:|---:|---|---:|---|---|---|---:|"]
    for row in read_bounds_table(csv_path):
        bound = row["sigma_bound"]
        r = "" if row["model"] != "spectral" else f" r = {bound - 1:g}"
        name = f"{names.get(row['model'], row['model'])}{r} ({'free' if bound is None else f'{bound:g}'})"
        certificates = [f"{_fixed(row[f'certified_error_{p}'], 3)} "
                        f"({_fixed(row[f'q_test_error_{p}'], 3)}, {row[f'kl_{p}']:.0f})"
                        if row[f"certified_error_{p}"] is not None else "-" for p in ("init", "learned")]
        explicit = (_fixed(row["explicit_bound"], 3) if row["explicit_bound"] is not None
                    else row["explicit_regime"] or "-")
        derandomized = ", ".join(_fixed(row[f"derandomized_{p}"], 3) for p in ("init", "learned"))
        cells = [row["checkpoint"].removeprefix("zoo:"), name, _fixed(row["test_error"], 3),
                 _fixed(row["log10_G"], 1), _fixed(row["log10_G_corollary1"], 1), explicit,
                 _fixed(row["log10_unrolled_bound"], 1), *certificates, derandomized,
                 _fixed(row["held_out_bound"], 3)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def certificates_markdown(results: Path) -> str:
    """Every kept certificate record (``results/certificates/EXPERIMENT/SCALE/TRIAL/PRIOR/record.json``):
    the checkpoint's test error; Q's certified 0-1 error, its Monte Carlo training error, KL and m, the
    part of the KL that the distance between Q's mean and the prior's makes (Q centred on the checkpoint),
    Q's own test error and the largest KL that would certify it at :data:`CERTIFICATE_GOAL`; the tightest
    certificate of Q with its noise scaled down (the same mean,
    :func:`~spectral_analysis.analysis.derandomize.quietest_certified_q`); the deterministic network's
    derandomized certificate (at its gamma and noise scale) and held-out bound; and the hours of work the
    record took (``-`` where stages were kept before they recorded their time).

    >>> certificates_markdown(Path("results")).splitlines()[1].startswith("|---|")
    True
    """
    records = sorted((results / CERTIFICATES).glob("*/*/*/*/record.json"))
    if not records:
        raise ValueError(f"no certificate record under {results / CERTIFICATES}: spectral-analysis certify "
                         "... --state DIR --json > DIR/record.json keeps one")
    header = ["subject (prior)", "test error of w", "Q certified", "Q's training error (networks)", "KL (m)",
              "KL of the means' distance", "Q's test error", f"KL that {CERTIFICATE_GOAL} allows",
              "Q with less noise certified (noise scale)", "w derandomized (gamma, noise scale)",
              "w, held out", "hours"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for path in records:
        r = json.loads(path.read_text())
        allowed = kl_allowed(r["mc_error_upper"], r["m"], r["delta"], CERTIFICATE_GOAL)
        # Q centred on w: its mean's part of the KL is ||w - w_0||^2 / (2 lambda), the rest its variances'
        centred = r.get("mean") == "checkpoint"
        means = r["prior_distance"] ** 2 / (2 * r["prior_variance"]) if centred else None
        d = r.get("deterministic") or {}
        derandomized = ("-" if d.get("derandomized_bound") is None else
                        f"{d['derandomized_bound']:.3f} ({d['derandomized_gamma']:g}, "
                        f"{d['derandomized_noise_scale']:g})")
        quieter = ("-" if "scaled_q_bound" not in d else
                   f"{d['scaled_q_bound']:.3f} ({d['scaled_q_noise_scale']:g})")
        state = r.get("state")  # a resumed record counts all its work only where its stages kept their time
        timed = state is None or not state["resumed"] or state.get("untimed") == []
        subject = "/".join(path.parent.relative_to(results / CERTIFICATES).parts[:3])
        cells = [f"{subject} ({path.parent.name})",
                 f"{r.get('checkpoint_test_error', math.nan):.3f}", f"{r['certified_error']:.3f}",
                 f"{r['mc_error']:.3f} ({r['mc_samples']:,})", f"{r['kl']:,.0f} ({r['m']:,})",
                 "-" if means is None else f"{means:,.0f}", f"{r.get('stochastic_test_error', math.nan):.3f}",
                 "-" if allowed is None else f"{allowed:,.0f}", quieter, derandomized,
                 "-" if "held_out_bound" not in d else f"{d['held_out_bound']:.3f}",
                 f"{r['seconds'] / 3600:.1f}" if timed else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def read_demo_record(results: Path) -> dict[str, Any]:
    path = results / DEMO_RECORD
    if not path.is_file():
        raise ValueError(f"no kept demo run at {path}: run `spectral-analysis demo --record {path}` first")
    return json.loads(path.read_text())


def fill_blocks(text: str, makers: Mapping[str, Callable[[], str]],
                figure_checks: Callable[[str], str] | None = None,
                results: Path | None = None) -> tuple[str, list[str]]:
    """``text`` with every block it holds that ``makers`` names (with ``figure_checks``, every
    ``checks-FIGURE`` block; with ``results``, every ``grid=EXPERIMENT@SCALE`` and
    ``calibration=EXPERIMENT@SCALE`` block) and every ``benchmark=NAME`` block regenerated, and the names
    of the blocks filled."""
    filled = []
    names = list(makers)
    if figure_checks is not None:
        names += [CHECKS_PREFIX + figure for figure in FIGURE_CHECKS]
    for name in names:
        if f"<!-- {name}:begin -->" in text:
            body = makers[name]() if name in makers else figure_checks(name.removeprefix(CHECKS_PREFIX))
            text = replace_marked_block(text, name, body)
            filled.append(name)
    if results is not None:
        for prefix, maker in ((GRID_PREFIX, grid_markdown), (CALIBRATION_PREFIX, calibration_markdown)):
            for name in dict.fromkeys(re.findall(rf"<!-- ({prefix}[\w.-]+@\w+):begin -->", text)):
                experiment, scale = name.removeprefix(prefix).split("@")
                text = replace_marked_block(text, name, maker(results, experiment, scale))
                filled.append(name)
    for name in dict.fromkeys(re.findall(rf"<!-- ({BENCHMARK_PREFIX}[\w.-]+):begin -->", text)):
        report = BENCHMARKS_DIR / f"{name.removeprefix(BENCHMARK_PREFIX)}.json"
        text = replace_marked_block(text, name, benchmark_markdown(report))
        filled.append(name)
    return text, filled
