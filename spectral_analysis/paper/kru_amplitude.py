"""Paper check: KRU's Fig. 6 on the chorales (Section 4.7, soft unitary constraints), read from the kept
``kru-amplitude`` results (KRU at Table 4's JSB size, amplitudes 1e-7 to 1e-1).

- "the higher the amplitude the closer the recurrent matrix will be to the unitary set": each seed's
  spectral margin max_i abs(sigma_i(W) - 1) at the end of training (its last training records), the
  largest amplitude against the smallest by :func:`~spectral_analysis.paper.kept.beats` (lower is
  closer).
- "For JSB Chorales the best validation performance is achieved at an amplitude of 1e-2": each seed's
  best validation NLL, amplitude 1e-2 against every other amplitude by
  :func:`~spectral_analysis.paper.kept.beats` (lower is better).
- "we are not using gradient clipping with KRU. Our soft unitary constraints offer a principled alternative
  to gradient clipping": every paper-scale KRU trial of the catalog with a soft unitary constraint
  (amplitude > 0) and no clipping trains without diverging. One kept trial that diverged refutes it
  (``differs``); it ``holds`` once every such trial is kept and none diverged, else ``unverified``.
"""

from __future__ import annotations

from pathlib import Path

from spectral_analysis.checks import CheckRecord
from spectral_analysis.experiments.catalog import load_catalog
from spectral_analysis.experiments.fitness import diverged
from spectral_analysis.experiments.groups import END_RECORDS, Group
from spectral_analysis.experiments.reading import KeptGrid
from spectral_analysis.experiments.results import read_rows
from spectral_analysis.io import default_results_dir
from spectral_analysis.paper.kept import beats, every, judged, kept_grid, missing_record, spread_text

SOURCE = "KRU Section 4.7 (Fig. 6, JSB Chorales)"
EXPERIMENT = "kru-amplitude"
UNITARY_QUOTE = ("the higher the amplitude the closer the recurrent matrix will be to the unitary set")
BEST_QUOTE = "For JSB Chorales the best validation performance is achieved at an amplitude of 1e - 2"
CLAIMED_BEST = 1e-2
CLIPPING_SOURCE = "KRU Section 4.7"
CLIPPING_QUOTE = ("Please note that we are not using gradient clipping with KRU. Our soft unitary "
                  "constraints offer a principled alternative to gradient clipping.")


def end_margins(group: Group) -> list[float]:
    """Each seed's median spectral margin over its last :data:`END_RECORDS` training records."""
    return group.last_per_seed("train", "spectral_margin", END_RECORDS)



def records_from_grid(grid: KeptGrid | None) -> list[CheckRecord]:
    """The claims from a kept grid (``None``: nothing kept, every claim ``unverified``)."""
    amplitudes = sorted(grid.values("penalty")) if grid else []
    groups = {a: grid.group("kru", penalty=a) for a in amplitudes}
    if len(amplitudes) < 2 or any(g is None for g in groups.values()):
        return [missing_record(SOURCE, "closer to unitary with the amplitude; best at 1e-2", EXPERIMENT,
                               UNITARY_QUOTE)]
    row = groups[amplitudes[0]].rows[0]
    setting = f"{row['task']}, KRU n = {row['hidden']}"
    seeds = min(g.seeds for g in groups.values())
    margins = {a: end_margins(g) for a, g in groups.items()}
    low, high = amplitudes[0], amplitudes[-1]
    unitary = CheckRecord(
        SOURCE, f"W ends closer to the unitary set at amplitude {high:g} than at {low:g} (spectral margin)",
        beats(margins[high], margins[low], higher_is_better=False),
        f"{setting}; max abs(sigma_i(W) - 1) at the end of training, mean [min, max] over seeds: "
        + ", ".join(f"{a:g}: {spread_text(m)}" for a, m in margins.items()),
        {"spectral_margin": {f"{a:g}": m for a, m in margins.items()}}, quote=UNITARY_QUOTE)
    records = [judged(grid, unitary, seeds)]
    if CLAIMED_BEST in groups:
        nll = {a: g.final_per_seed("best_valid") for a, g in groups.items()}
        outcomes = {a: beats(nll[CLAIMED_BEST], v, higher_is_better=False) for a, v in nll.items()
                    if a != CLAIMED_BEST}
        best = CheckRecord(
            SOURCE, f"the best validation {row['metric']} is at amplitude {CLAIMED_BEST:g}",
            every(list(outcomes.values())),
            f"{setting}; best validation {row['metric']}, mean [min, max] over seeds: "
            + ", ".join(f"{a:g}: {spread_text(v)}" + (f" ({outcomes[a]})" if a in outcomes else "")
                        for a, v in nll.items()),
            {"best_valid": {f"{a:g}": v for a, v in nll.items()}}, quote=BEST_QUOTE)
        records.append(judged(grid, best, seeds))
    return records


def constrained_unclipped(config: dict) -> bool:
    """A KRU run with a soft unitary constraint (amplitude > 0) and no gradient clipping, as KRU trains."""
    return config.get("model") == "kru" and (config.get("penalty") or 0) > 0 and config.get("clip") is None


def clipping_record(results: str | Path | None = None, catalog: str | Path | None = None) -> CheckRecord:
    """"Our soft unitary constraints offer a principled alternative to gradient clipping", read on every
    kept paper-scale KRU trial of the catalog's experiments that :func:`constrained_unclipped`."""
    results = results or default_results_dir()
    planned, kept, diverged_rows = {}, {}, []
    for name, experiment in load_catalog(catalog).items():
        trials = {t.key for t in experiment.trials("paper") if constrained_unclipped(t.config)}
        if not trials:
            continue
        rows = [r for r in read_rows(results, name, "paper") if r["trial"] in trials
                and constrained_unclipped(r.get("config") or {}) and r["status"] in ("done", "failed")]
        planned[name], kept[name] = len(trials), len(rows)
        diverged_rows += [(name, r) for r in rows if diverged(r)]
    counts = ", ".join(f"{name} {kept[name]}/{planned[name]}" for name in planned)
    lost = "; ".join(f"{name} {r['trial']} (amplitude {r['config']['penalty']:g}): "
                     + r["error"].removeprefix("TrainingDivergedError: ").split(": training diverged")[0]
                     for name, r in diverged_rows)
    verdict = "differs" if diverged_rows else "holds" if planned and kept == planned else "unverified"
    evidence = (f"paper-scale KRU trials with amplitude > 0 and no clipping kept, per experiment: {counts}; "
                f"{len(diverged_rows)} of {sum(kept.values())} diverged" + (f": {lost}" if lost else ""))
    record = CheckRecord(CLIPPING_SOURCE, "KRU trains without gradient clipping and without diverging "
                         "(a soft unitary constraint, amplitude > 0)", verdict, evidence,
                         {"kept": kept, "planned": planned,
                          "diverged": [r["trial"] for _, r in diverged_rows]},
                         quote=CLIPPING_QUOTE)
    record.scale = "paper"
    return record


def run(quick: bool = True) -> list[CheckRecord]:
    """The three claims from kept results (``quick`` is accepted for the common interface)."""
    return records_from_grid(kept_grid(EXPERIMENT)) + [clipping_record()]
