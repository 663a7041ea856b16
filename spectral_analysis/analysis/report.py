"""One report for a checkpoint: bound, Lemma 3 check, state norms, Jacobians, gradient flow, Lyapunov,
trajectories.

All lists over t run t = 0 .. T. In the JSON, ``null`` stands for a value that is not finite
(``-inf``: a Jacobian product or Lyapunov exponent of a singular map, e.g. dead relu units).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spectral_analysis.analysis.bound_report import bound_report
from spectral_analysis.analysis.checkpoint_data import checkpoint_task, sample_batch
from spectral_analysis.analysis.jacobians import (
    hidden_gradient_norms,
    jacobian_products,
    lyapunov_exponents,
    state_norms,
    state_trajectory,
    transition_norm_bound,
)
from spectral_analysis.analysis.network import eq17_network
from spectral_analysis.analysis.perturbation import perturbation_check
from spectral_analysis.analysis.trajectories import read_trajectory
from spectral_analysis.data.arrays import UserData
from spectral_analysis.data.objectives import loss_and_metrics
from spectral_analysis.io import Subject


def json_ready(value: Any) -> Any:
    """Plain JSON values: arrays to lists, non-finite floats to ``None``."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_ready(value.tolist())
    if isinstance(value, np.generic):
        return json_ready(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


def run_directory(checkpoint_path: str | Path) -> Path | None:
    """The run directory beside a checkpoint (``RUN/last.safetensors`` or ``RUN/checkpoints/step-N``)."""
    path = Path(checkpoint_path).resolve()
    for candidate in (path.parent, path.parent.parent):
        if (candidate / "metrics.jsonl").is_file():
            return candidate
    return None


def _bound_or_reason(subject: Subject, classification: bool, seed: int,
                     user_data: UserData | None) -> dict[str, Any]:
    """The bound with training margins where the task has classes and they allow the default quantile;
    otherwise G(w) alone (gamma = 1), with the reason the margins were left out."""
    note = None
    if classification:
        try:
            return bound_report(subject, data="train", seed=seed, user_data=user_data)
        except ValueError as error:
            note = f"no margins: {error}"
    unlabelled = None if user_data is None else UserData(user_data.inputs, None, user_data.source)
    try:
        report = bound_report(subject, seed=seed, user_data=unlabelled)
    except ValueError as error:
        return {"skipped": str(error)}
    return {**report, "note": note} if note else report


def _model_summary(subject: Subject) -> dict[str, Any]:
    model = subject.model
    summary = {"name": subject.architecture, "input_size": model.input_size, "hidden_size": model.hidden_size,
               "output_size": model.output_size, "num_layers": model.num_layers}
    return subject.metadata.get("model", summary)


def analyze_subject(subject: Subject, samples: int = 8, trials: int = 20, seed: int = 0, burn_in: int = 0,
                    user_data: UserData | None = None, progress: bool = False) -> dict[str, Any]:
    """Everything the ``analyze`` command writes (see the module docstring), on the task the subject was
    trained on or on the user's sequences (``user_data``; the first ``samples`` of them)."""
    model = subject.model
    if not 1 <= samples <= 10_000:
        raise ValueError(f"the number of samples must lie in [1, 10000] (each keeps T d x d Jacobians), "
                         f"got {samples}")
    if not 1 <= trials <= 10_000:
        raise ValueError(f"Lemma 3's trials must lie in [1, 10000], got {trials}")
    if user_data is not None:
        user_data.check_model(model.input_size, model.output_size)
        name, length, symbolic = "user data", user_data.length, False
        kind = "classification-last" if user_data.labels is not None else None
        x = user_data.inputs[:samples]
        y = None if user_data.labels is None else user_data.labels[:samples]
        recall = loss_steps = None
    else:
        task = checkpoint_task(subject.metadata)
        name, length, symbolic, kind = task.name, task.length, task.symbolic, task.kind
        recall, loss_steps = task.recall_steps, task.loss_steps
        x, y = sample_batch(task, task.test, samples, seed)
    report: dict[str, Any] = {"checkpoint": subject.source, "subject": subject.describe(),
                              "model": _model_summary(subject), "task": name, "T": length,
                              "samples": int(x.shape[0])}
    report["bound"] = _bound_or_reason(subject, kind == "classification-last", seed, user_data)
    model64 = copy.deepcopy(model).to(torch.float64)
    device = next(model64.parameters()).device
    x, y = x.to(device), (None if y is None else y.to(device))
    x64 = x.to(torch.float64) if x.is_floating_point() else x
    try:
        net = eq17_network(model, symbolic)
        report["perturbation"] = perturbation_check(net, x, trials=trials, seed=seed).as_dict()
    except ValueError as error:
        report["perturbation"] = {"skipped": str(error)}
    states64 = state_trajectory(model64, x64)  # one forward pass serves norms, Jacobians and exponents
    norms64 = state_norms(model64, x64, states=states64)  # float64: a float32 overflow stays measurable
    report["state_norm_max"] = norms64.max(axis=0)
    report["state_norm_median"] = np.median(norms64, axis=0)
    products = jacobian_products(model64, x64, progress=progress, states=states64)
    T = x.shape[1]
    bound = transition_norm_bound(model64, T)
    report["jacobian_log10_norms"] = products.log10_norms.mean(axis=0)  # log of the geometric mean
    with np.errstate(over="ignore"):  # beyond float64: inf, written as null
        report["jacobian_norms"] = 10.0 ** report["jacobian_log10_norms"]
    report["jacobian_log10_condition"] = products.log10_condition_numbers.mean(axis=0)
    report["jacobian_log10_singular_values"] = products.log10_singular_values[0]  # sample 0, (T+1, d)
    report["jacobian_log10_bound"] = bound
    report["jacobian_bound_holds"] = (None if bound is None else
                                      bool(np.all(products.log10_norms <= bound + 1e-9)))

    def loss_fn(outputs: torch.Tensor) -> torch.Tensor:
        return loss_and_metrics(kind, outputs, y, recall, loss_steps)[0]

    report["grad_norms"] = None if y is None else hidden_gradient_norms(model64, x64, loss_fn)
    exponents = lyapunov_exponents(model64, x64, burn_in=burn_in, progress=progress, states=states64)
    report["lyapunov_exponents"] = exponents.mean(axis=0)
    run = None if subject.imported else run_directory(subject.source)
    report["trajectory"] = None
    if run is not None:
        try:
            report["trajectory"] = read_trajectory(run).rows()
        except ValueError as error:
            report["trajectory"] = {"skipped": str(error)}
    return json_ready(report)


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def report_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown (what ``report.md`` holds)."""
    model = report["model"]
    lines = [f"# Analysis of `{report['checkpoint']}`", "",
             f"{model['name']} (n = {model['hidden_size']}, n_i = {model['input_size']}, "
             f"n_y = {model['output_size']}) on {report['task']}, T = {report['T']}, "
             f"{report['samples']} test sequences.", ""]
    subject = report.get("subject")
    if subject and subject["assumptions"]:
        lines += [f"Imported from a {subject['convention']} as {subject['architecture']}; assumptions:", ""]
        lines += [f"- {a}" for a in subject["assumptions"]] + [""]
    lines += ["## Generalization bound (ICML Theorem 5)", ""]
    bound = report["bound"]
    if "skipped" in bound:
        lines.append(f"Not computed: {bound['skipped']}")
    else:
        if bound.get("note"):
            lines += [bound["note"], ""]
        lines += [f"h = {bound['h']}, B = {_fmt(bound['B'])} ({bound['B_source']}), "
                  f"gamma = {_fmt(bound['gamma'])} ({bound['gamma_source']}).", "",
                  "| factor | log10 |", "|---|---|"]
        lines += [f"| {name.replace('|', chr(92) + '|')} | {_fmt(value)} |"
                  for name, value in bound["factors"].items()]
        lines.append(f"| **G(w)** | **{_fmt(bound['log10_G'])}** |")
        if bound.get("corollary1"):
            lines += ["", f"Corollary 1 (||W|| <= {_fmt(bound['W_norm_bound'])}): "
                          f"log10 G = {_fmt(bound['corollary1']['log10_G'])}."]
        if bound.get("explicit"):
            explicit = bound["explicit"]
            lines += ["", f"Margin loss {_fmt(bound['margin_loss'])} on {bound['data']} (error rate "
                          f"{_fmt(bound['error_rate'])}); explicit bound on the test error: "
                          f"{_fmt(bound['bound'])} ({explicit['regime']}, log10 of the complexity term "
                          f"{_fmt(explicit['log10_complexity'])}"
                          f"{', vacuous' if bound['vacuous'] else ''})."]
    perturbation = report["perturbation"]
    lines += ["", "## Perturbation lemma (Lemma 3)", ""]
    if "skipped" in perturbation:
        lines.append(f"Not run: {perturbation['skipped']}")
    else:
        lines.append(f"{perturbation['trials']} random perturbations at the largest allowed norms: worst "
                     f"measured / bound {_fmt(perturbation['hidden_slack_max'])} for h^(T), "
                     f"{_fmt(perturbation['output_slack_max'])} for the output; "
                     f"{'holds' if perturbation['holds'] else 'VIOLATED: ' + str(perturbation['violations'])}"
                     ".")
    norms = report["jacobian_log10_norms"]
    T = len(norms) - 1
    lines += ["", "## Jacobian products and gradient flow", "",
              "| t | largest norm of h(t) | log10 norm of dh(T)/dh(t) | log10 cond | (T-t) log10 norm W | "
              "norm of dL/dh(t) |", "|---|---|---|---|---|---|"]
    bound_line, grads, sizes = report["jacobian_log10_bound"], report["grad_norms"], report["state_norm_max"]
    for t in sorted({0, T // 4, T // 2, 3 * T // 4, T}):
        lines.append(f"| {t} | {_fmt(sizes[t])} | {_fmt(norms[t])} | "
                     f"{_fmt(report['jacobian_log10_condition'][t])} | "
                     f"{_fmt(bound_line[t]) if bound_line else '-'} | {_fmt(grads[t]) if grads else '-'} |")
    largest = max(range(T + 1), key=lambda t: math.inf if sizes[t] is None else sizes[t])
    lines += ["", f"The state (h, and an LSTM's cells) is largest at t = {largest}: "
                  f"{_fmt(sizes[largest]) if sizes[largest] is not None else 'overflowed float64'} "
                  f"over the samples (median {_fmt(report['state_norm_median'][largest])})."]
    if report["jacobian_bound_holds"] is not None:
        lines += ["", f"KRU Eq. 3 bound ||J(t)|| <= ||W||^(T-t): "
                      f"{'holds' if report['jacobian_bound_holds'] else 'VIOLATED'} for every t and sample."]
    exponents = report["lyapunov_exponents"]
    lines += ["", "## Lyapunov exponents", "",
              f"Largest {_fmt(exponents[0])}, smallest {_fmt(exponents[-1])} (natural log per step; "
              f"'-' is -inf), {sum(1 for e in exponents if e is not None and e > 0)} positive of "
              f"{len(exponents)}."]
    trajectory = report["trajectory"]
    lines += ["", "## Training trajectory", ""]
    if not trajectory:
        lines.append("No run directory beside the checkpoint.")
    elif isinstance(trajectory, dict):
        lines.append(f"Not read: {trajectory['skipped']}")
    else:
        first, last = trajectory[0], trajectory[-1]
        lines.append(f"{len(trajectory)} recorded steps; spectral margin {_fmt(first['spectral_margin'])} -> "
                     f"{_fmt(last['spectral_margin'])}, ||dL/dh(0)|| {_fmt(first['grad_h0_norm'])} -> "
                     f"{_fmt(last['grad_h0_norm'])}, condition number {_fmt(first['condition_number'])} -> "
                     f"{_fmt(last['condition_number'])}.")
        peaks = [row for row in trajectory if math.isfinite(row["grad_norm_peak"])]
        if peaks:
            top = max(peaks, key=lambda row: row["grad_norm_peak"])
            lines.append(f"Largest gradient norm over all parameters {_fmt(top['grad_norm_peak'])}, in the "
                         f"steps up to {top['step']} (median per record "
                         f"{_fmt(float(np.median([row['grad_norm_peak'] for row in peaks])))}).")
    return "\n".join(lines) + "\n"
