"""Regenerate figures/ from code.

Always: the Householder speed figure from ``benchmarks/householder_cpu.json``. With ``--models``
(default on): the models of the papers trained on the addition task at reduced size, then

- ``bound_vs_T.png``: log10 G(w) of Theorem 5 against T for every one-layer Eq. 17 model;
- ``jacobian_decay.png``: log10 ||dh^(T)/dh^(t)|| against T - t;
- ``lyapunov_spectra.png``: the Lyapunov spectra;
- ``training_dynamics.png``: Fig. 4 (spectral margin and ||dL/dh^(0)|| over training);
- ``singular_values_irnn.png``, ``singular_values_spectral.png``: singular values over training;
- ``fig1_addition.png``: Fig. 1, validation MSE and ||dL/dh^(0)|| over training for L = 30, 100, 300;
- ``fig2_copy.png``: Fig. 2, validation cross entropy and ||dL/dh^(0)|| for time lags T = 50, 100, 200
  (the paper does not state its lags), with the memoryless baseline 10 log 8 / (T + 20);
- ``fig2c_leak.png``: the earlier version's Fig. 2(c, f), RNN and svdRNN on row-by-row MNIST (28 steps,
  20 hidden units as its Fig. 2(a)) for leaky-ReLU leaks 0, 0.2, 0.5, 1;
- ``fig3_mnist.png``: Fig. 3, validation accuracy and ||dL/dh^(0)|| on pixel MNIST (quick: 196 and 392
  steps; full: 392 and 784) and permuted MNIST;
- ``fig5_depth.png``: Fig. 5, test accuracy of MLP, ResNet, Spectral-MLP and Spectral-ResNet against
  depth, the SVD nets with every layer constrained and with plain input and output layers (quick: width
  64, L = 4-40, 300 steps; full: width 128, L = 30-100, 2000 steps).

The numbers behind them go to ``figures/figures_quick.json``. ``--full`` uses the papers' sizes
(n = 128, 2000 steps; GPU recommended); the default (quick) is n = 32, 400 steps, minutes on a CPU.

    python scripts/make_figures.py [--full] [--no-models] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from spectral_analysis.analysis import (
    bound_report,
    jacobian_products,
    lyapunov_exponents,
    read_trajectory,
)
from spectral_analysis.analysis.checkpoint_data import checkpoint_task, sample_batch, task_split
from spectral_analysis.paper.depth import fig5_runs
from spectral_analysis.plotting import plot_householder_benchmark
from spectral_analysis.plotting.analysis import plot_singular_value_heatmap
from spectral_analysis.plotting.paper_figures import (
    plot_bound_growth,
    plot_depth_sweep,
    plot_jacobian_decay,
    plot_learning_curves,
    plot_lyapunov_spectra,
    plot_training_dynamics,
)
from spectral_analysis.train import TrainConfig, load_checkpoint, train
from spectral_analysis.train.evaluation import RunLog

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("rnn", "irnn", "ornn", "spectral", "lstm", "kru", "dizzy")
LENGTHS = (10, 30, 100, 300, 1000)
RNN_MODELS = ("rnn", "irnn", "ornn", "spectral", "lstm")


def model_figures(full: bool, figures: Path) -> list[Path]:
    n, steps, length = (128, 2000, 100) if full else (32, 400, 100)
    data: dict = {"n": n, "steps": steps, "task": f"addition, T = {length}", "models": {}}
    log10_G, jacobians, lyapunov, traj = {}, {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            clock = time.perf_counter()
            out = Path(tmp) / model
            train(TrainConfig(model=model, task="addition", out=str(out), hidden=n, steps=steps, lr=1e-3,
                              task_options={"length": length, "train_size": 5000}, record_every=10,
                              eval_every=steps, checkpoint_every=steps, progress=False, seed=0))
            checkpoint = load_checkpoint(out / "last.safetensors")
            task = checkpoint_task(checkpoint.metadata)
            x, _ = sample_batch(task, task_split(task, "test"), 8, seed=0)
            model64 = checkpoint.model.double()
            x = x.double()
            jacobians[model] = jacobian_products(model64, x).log10_norms
            lyapunov[model] = lyapunov_exponents(model64, x)
            traj[model] = read_trajectory(out)
            if model != "lstm":
                log10_G[model] = {T: bound_report(checkpoint, length=T)["log10_G"] for T in LENGTHS}
            data["models"][model] = {"log10_G": log10_G.get(model), "seconds": time.perf_counter() - clock,
                                     "lyapunov_top": float(np.mean(lyapunov[model], axis=0)[0]),
                                     "jacobian_log10_norm_at_T": float(np.nanmean(jacobians[model][:, 0]))}
            print(f"{model}: {data['models'][model]['seconds']:.1f} s")
    size = f"n = {n}, {steps} steps, addition T = {length}"
    paths = [
        plot_bound_growth(log10_G, f"Theorem 5's G(w) against T, trained weights ({size})",
                          figures / "bound_vs_T.png"),
        plot_jacobian_decay(jacobians, f"Jacobian products over time ({size})",
                            figures / "jacobian_decay.png"),
        plot_lyapunov_spectra(lyapunov, f"Lyapunov spectra ({size})", figures / "lyapunov_spectra.png"),
        plot_training_dynamics({m: t.steps for m, t in traj.items() if m != "lstm"},
                               {m: t.spectral_margin for m, t in traj.items() if m != "lstm"},
                               {m: t.grad_h0_norm for m, t in traj.items() if m != "lstm"},
                               f"Fig. 4 at reduced size: spectral margin and gradient at the first cell "
                               f"({size})",
                               figures / "training_dynamics.png"),
    ]
    for model in ("irnn", "spectral"):
        t = traj[model]
        paths.append(plot_singular_value_heatmap(t.steps, t.singular_values[0],
                                                 f"{model}: singular values of W over training ({size})",
                                                 figures / f"singular_values_{model}.png"))
    (figures / "figures_quick.json").write_text(json.dumps(data, indent=1))
    return paths


def read_curves(run: Path, metric: str) -> dict[str, np.ndarray]:
    """Validation ``metric`` and the training records' ``grad_h0_norm`` from a run's metrics.jsonl."""
    lines = RunLog(run / "metrics.jsonl").read()
    valid = [x for x in lines if x["phase"] == "valid" and metric in x]
    train_lines = [x for x in lines if x["phase"] == "train" and x.get("grad_h0_norm") is not None]
    return {"steps": np.array([x["step"] for x in valid]), "metric": np.array([x[metric] for x in valid]),
            "grad_steps": np.array([x["step"] for x in train_lines]),
            "grad": np.array([x["grad_h0_norm"] for x in train_lines])}


def learning_curves(panels: dict, metric: str, full: bool) -> tuple[dict, int, int]:
    """Validation ``metric`` and ||dL/dh^(0)|| over training for the papers' RNN models in each panel
    (``panels[label] = (task, task_options)``)."""
    n, steps = (128, 2000) if full else (32, 400)
    curves: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for index, (label, (task, task_options)) in enumerate(panels.items()):
            curves[label] = {}
            for model in RNN_MODELS:
                out = Path(tmp) / f"{model}{index}"
                train(TrainConfig(model=model, task=task, out=str(out), hidden=n, steps=steps, lr=1e-3,
                                  task_options=task_options, record_every=10, eval_every=max(steps // 20, 1),
                                  checkpoint_every=steps, eval_batches=4, progress=False, seed=0))
                curves[label][model] = read_curves(out, metric)
    return curves, n, steps


def write_curves(curves: dict, n: int, steps: int, metric: str, path: Path) -> None:
    summary = {str(L): {m: float(c["metric"][-1]) for m, c in v.items()} for L, v in curves.items()}
    path.write_text(json.dumps({"n": n, "steps": steps, f"final_valid_{metric}": summary}, indent=1))


def figure1(full: bool, figures: Path) -> Path:
    """Fig. 1 at reduced size: the addition task at L = 30, 100, 300."""
    panels = {L: ("addition", {"length": L, "train_size": 5000}) for L in (30, 100, 300)}
    curves, n, steps = learning_curves(panels, "mse", full)
    write_curves(curves, n, steps, "mse", figures / "fig1_addition.json")
    return plot_learning_curves(curves, "MSE", 2 / 12, f"Fig. 1 at reduced size: addition (n = {n}, {steps} "
                                "steps, seed 0)", figures / "fig1_addition.png")


def figure2(full: bool, figures: Path) -> Path:
    """Fig. 2 at reduced size: the copy task at time lags T = 50, 100, 200."""
    lags = (50, 100, 200)
    panels = {T: ("copy", {"length": T, "train_size": 5000}) for T in lags}
    curves, n, steps = learning_curves(panels, "cross_entropy", full)
    write_curves(curves, n, steps, "cross_entropy", figures / "fig2_copy.json")
    baselines = {T: 10 * math.log(8) / (T + 20) for T in lags}
    return plot_learning_curves(curves, "cross entropy", baselines, f"Fig. 2 at reduced size: copy (n = {n}, "
                                f"{steps} steps, seed 0)", figures / "fig2_copy.png", length_name="T")


def figure2c(full: bool, figures: Path) -> Path:
    """The earlier version's Fig. 2(c, f): accuracy and ||dL/dh^(0)|| for different leaks."""
    steps = 2000 if full else 300
    curves: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for leak in (0.0, 0.2, 0.5, 1.0):
            curves[leak] = {}
            for model in ("rnn", "spectral"):
                out = Path(tmp) / f"{model}{leak}"
                train(TrainConfig(model=model, task="mnist", out=str(out), hidden=20, steps=steps, lr=1e-3,
                                  model_options={"leak": leak}, task_options={"pixels_per_step": 28},
                                  record_every=10, eval_every=max(steps // 15, 1), checkpoint_every=steps,
                                  eval_batches=4, progress=False, seed=0))
                curves[leak][model] = read_curves(out, "accuracy")
    write_curves(curves, 20, steps, "accuracy", figures / "fig2c_leak.json")
    return plot_learning_curves(curves, "accuracy", None, f"Earlier version's Fig. 2(c, f) at reduced size: "
                                f"row-by-row MNIST, n = 20, {steps} steps", figures / "fig2c_leak.png",
                                length_name="leak", log_scale=False)


def figure3(full: bool, figures: Path) -> Path:
    """Fig. 3: pixel MNIST at two sequence lengths and permuted MNIST. Quick: 196 and 392 steps (4 and 2
    pixels a step) and permuted at 196; full: the paper's 392 and 784, permuted at 784."""
    short, long, permuted = (392, 784, 784) if full else (196, 392, 196)
    panels = {f"{name} MNIST, {length} steps": (task, {"pixels_per_step": 784 // length})
              for name, task, length in (("pixel", "mnist", short), ("pixel", "mnist", long),
                                         ("permuted", "permuted-mnist", permuted))}
    curves, n, steps = learning_curves(panels, "accuracy", full)
    write_curves(curves, n, steps, "accuracy", figures / "fig3_mnist.json")
    title = f"Fig. 3 at reduced size: pixel and permuted MNIST (n = {n}, {steps} steps, seed 0; chance 0.1)"
    return plot_learning_curves(curves, "accuracy", 0.1, title, figures / "fig3_mnist.png", length_name="",
                                log_scale=False)


def figure5(full: bool, figures: Path) -> Path:
    """Fig. 5: MLP, ResNet and their SVD versions on flattened MNIST against depth."""
    depths, hidden, steps = ((30, 60, 100), 128, 2000) if full else ((4, 10, 20, 40), 64, 300)
    runs = fig5_runs(depths, hidden, steps)
    accuracy = {m: {d: r.accuracy for d, r in v.items()} for m, v in runs.items()}
    deepest = max(depths)
    (figures / "fig5_depth.json").write_text(json.dumps({
        "hidden": hidden, "steps": steps, "test_accuracy": accuracy,
        "log10_gain_at_init": {m: {d: r.log10_gain_at_init for d, r in v.items()} for m, v in runs.items()},
        "log10_gain_trained": {m: {d: r.log10_gain_trained for d, r in v.items()} for m, v in runs.items()}},
        indent=1))
    curves = {m: (v[deepest].steps, v[deepest].valid_accuracy) for m, v in runs.items()}
    title = (f"Fig. 5 at reduced size: flattened MNIST, width {hidden}, {steps} steps, leaky ReLU 0.2, seed 0"
             "; dashed: plain input and output layers")
    return plot_depth_sweep(accuracy, curves, deepest, title, figures / "fig5_depth.png")


def speed_figure(full: bool, figures: Path) -> list[Path]:
    """The Householder speed figure from the committed benchmark report (no training)."""
    return [plot_householder_benchmark(ROOT / "benchmarks" / "householder_cpu.json",
                                       figures / "householder_speed_cpu.png")]


GROUPS = {"speed": speed_figure, "models": model_figures,
          "fig1": lambda full, figures: [figure1(full, figures)],
          "fig2": lambda full, figures: [figure2(full, figures)],
          "fig2c": lambda full, figures: [figure2c(full, figures)],
          "fig3": lambda full, figures: [figure3(full, figures)],
          "fig5": lambda full, figures: [figure5(full, figures)]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the papers' sizes (GPU recommended)")
    parser.add_argument("--no-models", action="store_true", help="only the benchmark figure")
    parser.add_argument("--only", nargs="+", choices=tuple(GROUPS), help="only these figure groups")
    args = parser.parse_args()
    names = ["speed"] if args.no_models else (args.only or list(GROUPS))
    figures = ROOT / "figures"
    for name in names:
        clock = time.perf_counter()
        for path in GROUPS[name](args.full, figures):
            print(f"wrote {path.relative_to(ROOT)}")
        print(f"{name}: {time.perf_counter() - clock:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
