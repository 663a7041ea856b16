"""Paper check: the ICML paper's Theorem 5, Corollary 1 and Lemma 3 on trained checkpoints.

The zoo's RNN and Spectral-RNN of ``zoo-addition`` (paper scale: n = 128, m1 = m2 = 16, r = 0.1, addition
at T = 100, 5000 Adam steps, seed 0) are read, never trained here; then:

- Lemma 3: random perturbations at the largest allowed norms never exceed the lemma's bounds;
- Theorem 5, "the generalization gap grows exponentially with ||W||": for the trained RNN (||W|| > 1)
  log10 G grows linearly in T with slope ``2 log10 ||W||``. That is G(w)'s own factor
  ``max{||W||^(2T-2), 1}``, so the record says it holds by construction: it checks the implementation
  of G and that training left ||W|| > 1, not a property the paper could get wrong;
- Corollary 1, "bounds the singular radius of W in [1 - r, 1 + r], ensures good generalization": the
  trained Spectral-RNN's ||W|| must lie within ``sigma* + r`` (a measurement that fails if Eq. 7's map
  is broken); the corollary's G then bounds Theorem 5's at every T by construction. The corollary keeps
  the factor ``(1 + r)^(2T - 2)``, exponential in T; the paper claims no polynomial growth.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from spectral_analysis.analysis import bound_report, eq17_network, perturbation_check
from spectral_analysis.analysis.checkpoint_data import checkpoint_task, sample_batch, task_split
from spectral_analysis.analysis.perturbation import adversarial_perturbation, aligned_linear_network
from spectral_analysis.checks import CheckRecord
from spectral_analysis.io import load, resolve_checkpoint
from spectral_analysis.paper.kept import missing_record
from spectral_analysis.train import load_checkpoint

LENGTHS = (30, 100, 300, 1000, 3000)


def _growth(checkpoint_path: Path) -> tuple[dict[int, float], dict[int, float | None], float]:
    """log10 G against T, Corollary 1's, and ||W|| measured apart from the bound's own code (so a
    wrong factor in G shows as a slope that is not 2 log10 ||W||)."""
    subject = load(checkpoint_path)
    reports = {T: bound_report(subject, length=T) for T in LENGTHS}
    corollary = {T: (r["corollary1"] or {}).get("log10_G") for T, r in reports.items()}
    norm = float(torch.linalg.matrix_norm(subject.model.transition_matrix(0).detach().double(), ord=2))
    return {T: r["log10_G"] for T, r in reports.items()}, corollary, norm


def _lemma3(checkpoint_path: Path, trials: int) -> dict:
    checkpoint = load_checkpoint(checkpoint_path)
    task = checkpoint_task(checkpoint.metadata)
    x, _ = sample_batch(task, task_split(task, "test"), 16, seed=0)
    net = eq17_network(checkpoint.model)
    result = perturbation_check(net, x, trials=trials, seed=0).as_dict()
    result["adversarial"] = adversarial_perturbation(net, x, steps=trials * 3)
    return result


def _aligned_lemma3(T: int = 30) -> dict[str, float]:
    """The adversary on W = M = Y = I (linear, aligned inputs), where the bound is nearly tight."""
    net, x = aligned_linear_network(4, T)
    return adversarial_perturbation(net, x, steps=60)


ZOO = {"rnn": "zoo:zoo-addition/paper/rnn_s0", "spectral": "zoo:zoo-addition/paper/spectral_s0"}


def run(quick: bool = True) -> list[CheckRecord]:
    """The claims judged on the zoo's kept RNN and Spectral-RNN (``quick``: fewer random perturbations)."""
    try:
        paths = {model: resolve_checkpoint(name) for model, name in ZOO.items()}
    except ValueError:
        return [missing_record("ICML Theorem 5, Corollary 1, Lemma 3", "the bounds on trained checkpoints",
                               "zoo-addition", "From Theorem 5, we can see that W plays a huge role")]
    return records_from_checkpoints(paths, quick)


def records_from_checkpoints(paths: dict[str, Path], quick: bool = True) -> list[CheckRecord]:
    """Lemma 3, Theorem 5 and Corollary 1 on trained ``rnn`` and ``spectral`` checkpoints."""
    records = []
    lemma = {model: _lemma3(path, 10 if quick else 50) for model, path in paths.items()}
    growth = {model: _growth(path) for model, path in paths.items()}
    worst = {m: max(r["hidden_slack_max"], r["output_slack_max"]) for m, r in lemma.items()}
    adversarial = {m: max(r["adversarial"]["hidden"], r["adversarial"]["output"]) for m, r in lemma.items()}
    aligned = _aligned_lemma3()
    adversarial["aligned linear (W = M = Y = I)"] = max(aligned["hidden"], aligned["output"])
    violations = (sum(len(r["violations"]) for r in lemma.values())
                  + sum(v > 1 + 1e-9 for v in adversarial.values()))
    records.append(
        CheckRecord(
            "ICML Lemma 3",
            "the perturbation bound holds for every admissible perturbation",
            "holds" if violations == 0 else "fails",
            f"{sum(r['trials'] for r in lemma.values())} random perturbations at the largest allowed norms "
            f"on trained RNN and Spectral-RNN (addition), then projected gradient ascent on (dW, dM, dY) "
            f"within the allowed norms: {violations} violations; worst measured/bound ratios, random: "
            + ", ".join(f"{m} {w:.3g}" for m, w in worst.items()) + "; adversarial: "
            + ", ".join(f"{m} {w:.3g}" for m, w in adversarial.items())
            + ". On trained nets the bound is loose by many orders; the aligned linear case is where it "
            "could be caught",
            {"worst_ratio": worst, "adversarial_ratio": adversarial, "violations": violations},
            quote=r"such that $\|\delta W\| \le \frac{1}{T} \|W\|$ [...] the perturbation in the "
                  "activation is bounded by",
        )
    )
    a, b = LENGTHS[-2], LENGTHS[-1]
    log10_G, _, norm = growth["rnn"]
    slope = (log10_G[b] - log10_G[a]) / (b - a)
    exponential = 2 * math.log10(norm)
    polynomial = 4 * (math.log10(b) - math.log10(a)) / (b - a)  # the T^4 factor's slope between a and b
    ok = norm > 1 and abs(slope - exponential) < 0.05 * exponential + polynomial
    records.append(
        CheckRecord(
            "ICML Theorem 5 (RNN)",
            "the generalization gap grows exponentially with ||W|| (G(w) of a trained RNN with ||W|| > 1)",
            "holds" if ok else "differs",
            f"holds by construction of G(w)'s factor max(||W||^(2T-2), 1) once ||W|| > 1; measured: trained "
            f"||W|| = {norm:.4f}; log10 G: " + ", ".join(f"T = {T}: {v:.2f}" for T, v in log10_G.items())
            + f"; slope between T = {a} and {b}: {slope:.2e} per step, against 2 log10 ||W|| = "
            f"{exponential:.2e} (exponential part) and {polynomial:.2e} (T^4)",
            {"norm_W": norm, "log10_G": log10_G, "slope": slope, "exponential_slope": exponential,
             "polynomial_slope": polynomial},
            quote="From Theorem 5, we can see that W plays a huge role since the generalization gap grows "
                  "exponentially with ||W||, i.e. the largest singular value of W.",
        )
    )
    log10_G, corollary, norm = growth["spectral"]
    bounded = norm <= 1.1 + 1e-6
    records.append(
        CheckRecord(
            "ICML Corollary 1",
            "Spectral-RNN, which bounds the singular radius of W in [1 - r, 1 + r], has G(w) with "
            "(1 + r)^(2T-2) in place of max(||W||^(2T-2), 1)",
            "holds" if bounded and all(v is not None and v >= log10_G[T] - 1e-9
                                       for T, v in corollary.items()) else "fails",
            f"measured: the trained Spectral-RNN has ||W|| = {norm:.4f} {'<=' if bounded else '>'} "
            f"1 + r = 1.1; "
            "given that, Corollary 1's G bounds Theorem 5's by construction: log10 G (||W|| replaced by 1.1) "
            + ", ".join(f"T = {T}: {v:.2f}" for T, v in corollary.items())
            + " against Theorem 5's " + ", ".join(f"{v:.2f}" for v in log10_G.values())
            + ". The (1 + r)^(2T-2) factor is exponential in T (2 log10 1.1 = 0.083 per step); the paper "
            "claims good generalization, not polynomial growth",
            {"log10_G": corollary, "norm_W": norm},
            quote="our proposed Spectral-RNN approach, which bounds the singular radius of W in "
                  "[1 - r, 1 + r], ensures good generalization: Corollary 1. With the update rule in (7), "
                  "Spectral-RNN has generalization gap bounded by",
        )
    )
    return records
