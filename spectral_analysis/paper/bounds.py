"""Paper check: the ICML paper's Theorem 5, Corollary 1 and Lemma 3 on trained checkpoints.

An RNN and a Spectral-RNN are trained on the addition task (quick: n = 32, 300 steps; otherwise the
demo's n = 128, 2000 steps), then:

- Lemma 3: random perturbations at the largest allowed norms never exceed the lemma's bounds;
- Theorem 5's G(w) against T: for the RNN (||W|| > 1) log10 G grows linearly in T (exponential growth),
  with slope ``2 log10 ||W||``; for Spectral-RNN the claim is polynomial growth, which holds exactly only
  for ||W|| <= 1: the measured slope is compared with that of ``T^4``;
- Corollary 1: with the structure's bound ``sigma* + r`` in place of ||W||, G(w) of Spectral-RNN is
  polynomial up to the factor ``(1 + r)^(2T - 2)``.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from spectral_analysis.analysis import bound_report, eq17_network, perturbation_check
from spectral_analysis.analysis.checkpoint_data import checkpoint_task, sample_batch, task_split
from spectral_analysis.checks import CheckRecord
from spectral_analysis.io import load
from spectral_analysis.train import TrainConfig, load_checkpoint, train

LENGTHS = (30, 100, 300, 1000, 3000)


def _trained(model: str, root: Path, quick: bool) -> Path:
    out = root / model
    train(
        TrainConfig(
            model=model,
            task="addition",
            out=str(out),
            hidden=32 if quick else 128,
            steps=300 if quick else 2000,
            task_options={"length": 30, "train_size": 2000},
            eval_every=10_000,
            checkpoint_every=10_000,
            progress=False,
            seed=0,
        )
    )
    return out / "last.safetensors"


def _growth(checkpoint_path: Path) -> tuple[dict[int, float], dict[int, float | None], float]:
    reports = {T: bound_report(load(checkpoint_path), length=T) for T in LENGTHS}
    corollary = {T: (r["corollary1"] or {}).get("log10_G") for T, r in reports.items()}
    return {T: r["log10_G"] for T, r in reports.items()}, corollary, reports[LENGTHS[0]]["norms"]["W"]


def _lemma3(checkpoint_path: Path, trials: int) -> dict:
    checkpoint = load_checkpoint(checkpoint_path)
    task = checkpoint_task(checkpoint.metadata)
    x, _ = sample_batch(task, task_split(task, "test"), 16, seed=0)
    return perturbation_check(eq17_network(checkpoint.model), x, trials=trials, seed=0).as_dict()


def run(quick: bool = True) -> list[CheckRecord]:
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {model: _trained(model, Path(tmp), quick) for model in ("rnn", "spectral")}
        lemma = {model: _lemma3(path, 10 if quick else 50) for model, path in paths.items()}
        growth = {model: _growth(path) for model, path in paths.items()}
    worst = {m: max(r["hidden_slack_max"], r["output_slack_max"]) for m, r in lemma.items()}
    violations = sum(len(r["violations"]) for r in lemma.values())
    records.append(
        CheckRecord(
            "ICML Lemma 3",
            "the perturbation bound holds for every admissible perturbation",
            "holds" if violations == 0 else "fails",
            f"{sum(r['trials'] for r in lemma.values())} random perturbations at the largest allowed norms "
            f"on trained RNN and Spectral-RNN (addition): {violations} violations; worst measured/bound "
            + "ratios " + ", ".join(f"{m} {w:.3g}" for m, w in worst.items()),
            {"worst_ratio": worst, "violations": violations},
        )
    )
    a, b = LENGTHS[-2], LENGTHS[-1]
    for model in ("rnn", "spectral"):
        log10_G, corollary, norm = growth[model]
        slope = (log10_G[b] - log10_G[a]) / (b - a)
        exponential = 2 * math.log10(norm)
        polynomial = 4 * (math.log10(b) - math.log10(a)) / (b - a)  # the T^4 factor's slope between a and b
        table = ", ".join(f"T = {T}: {v:.2f}" for T, v in log10_G.items())
        if model == "rnn":
            claim, ok = (
                "G(w) grows exponentially in T for an RNN with ||W|| > 1",
                norm > 1 and abs(slope - exponential) < 0.05 * exponential + polynomial,
            )
        else:
            claim, ok = "G(w) grows polynomially in T for Spectral-RNN", slope <= 1.5 * polynomial
        evidence = (
            f"||W|| = {norm:.4f}; log10 G: {table}; slope between T = {a} and {b}: {slope:.2e} per step, "
            f"against 2 log10 ||W|| = {exponential:.2e} (exponential part) and {polynomial:.2e} (T^4)"
        )
        if model == "spectral":
            evidence += (
                ". Polynomial growth is exact only for ||W|| <= 1; here the (||W||)^(2T-2) factor adds "
                f"{(2 * b - 2) * math.log10(max(norm, 1.0)):.2f} to log10 G at T = {b}"
            )
        records.append(
            CheckRecord(
                "ICML Theorem 5 (" + ("RNN" if model == "rnn" else "Spectral-RNN") + ")",
                claim,
                "holds" if ok else "differs",
                evidence,
                {
                    "norm_W": norm,
                    "log10_G": log10_G,
                    "slope": slope,
                    "exponential_slope": exponential,
                    "polynomial_slope": polynomial,
                },
            )
        )
    log10_G, corollary, norm = growth["spectral"]
    records.append(
        CheckRecord(
            "ICML Corollary 1",
            "with the update rule (7), G(w) = B^2 T^4 h ln h (1 + r)^(2T-2) ... / gamma^2",
            "holds"
            if all(v is not None and v >= log10_G[T] - 1e-9 for T, v in corollary.items())
            else "differs",
            "Corollary 1's log10 G (||W|| replaced by sigma* + r = 1.1): "
            + ", ".join(f"T = {T}: {v:.2f}" for T, v in corollary.items())
            + f"; it bounds Theorem 5's value at every T (||W|| = {norm:.4f} <= 1.1)",
            {"log10_G": corollary},
        )
    )
    return records
