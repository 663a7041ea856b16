"""``spectral-analysis weights``, ``bound`` and ``analyze``: the analyzers on a checkpoint."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectral_analysis.cli.common import (
    SEED,
    CommandError,
    add_output_arguments,
    auto_or,
    checkpoint_arg,
    count,
    emit,
    positive_real,
    probability,
    real,
    show_progress,
)
from spectral_analysis.vocabulary import ARCHITECTURES, DEFAULT_DELTA, MEANS, OBJECTIVES, PRIORS

if TYPE_CHECKING:
    from spectral_analysis.data.arrays import UserData
    from spectral_analysis.io import Subject


def subject_and_data(args: argparse.Namespace, feedforward: bool = False) -> tuple[Subject, UserData | None]:
    """The model named on the command line and the user's sequences, if given (``feedforward``: a
    feed-forward toolkit checkpoint is accepted too)."""
    from spectral_analysis.data.arrays import load_user_data
    from spectral_analysis.io import load

    subject = load(args.checkpoint, arch=args.arch, head_prefix=args.head_prefix, device=args.device,
                   allow_nonfinite=getattr(args, "allow_nonfinite", False), feedforward=feedforward)
    if args.labels is not None and args.inputs is None:
        raise CommandError("--labels needs --inputs (the sequences they label)")
    data = None
    if args.inputs is not None:
        data = load_user_data(args.inputs, args.labels, subject.model.input_size)
    return subject, data


def cmd_weights(args: argparse.Namespace) -> int:
    import numpy as np

    from spectral_analysis.analysis.bound_report import weights_arrays

    subject, _ = subject_and_data(args)
    arrays = weights_arrays(subject)
    out = Path(args.out)
    if out.suffix != ".npz":
        raise CommandError(f"--out must name a .npz file, got {args.out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, W=arrays["W"], M=arrays["M"], Y=arrays["Y"],
             constant_input=np.array(arrays["constant_input"]), output_unit=np.array(arrays["output_unit"]))
    payload = {"out": str(out), "W": list(arrays["W"].shape), "M": list(arrays["M"].shape),
               "Y": list(arrays["Y"].shape), "activation": arrays["activation"],
               "constant_input": arrays["constant_input"], "output_unit": arrays["output_unit"]}

    def text(p: dict) -> str:
        return (f"wrote {p['out']}: W {tuple(p['W'])}, M {tuple(p['M'])}, Y {tuple(p['Y'])} (float64, "
                f"Eq. 17 with biases absorbed: constant input {p['constant_input']}, output unit "
                f"{p['output_unit']}; activation {p['activation']})")

    emit(args, payload, text)
    return 0


def bound_text(p: dict[str, Any]) -> str:
    lines = [f"{p['model']} on {p['task']}: T = {p['T']}, h = {p['h']} (n = {p['n']}, n_i = {p['n_i']}, "
             f"n_y = {p['n_y']}), B = {p['B']:.6g} ({p['B_source']}), gamma = {p['gamma']:.6g} "
             f"({p['gamma_source']})",
             "log10 of each factor of G(w) (Theorem 5):"]
    subject = p.get("subject") or {}
    if subject.get("assumptions"):
        lines[1:1] = [f"imported ({subject['convention']}, {subject['architecture']}): "
                      + "; ".join(subject["assumptions"])]
    lines += [f"  {name:<36} {value:>12.4f}" for name, value in p["factors"].items()]
    lines.append(f"  {'log10 G(w)':<36} {p['log10_G']:>12.4f}")
    if p["corollary1"]:
        lines.append(f"Corollary 1 (||W|| <= {p['W_norm_bound']:.6g}): "
                     f"log10 G = {p['corollary1']['log10_G']:.4f}")
    if p["explicit"]:
        e = p["explicit"]
        bound = "none" if p["bound"] is None else f"{p['bound']:.6g}"
        lines += [f"margin loss on {p['data']}: {p['margin_loss']:.4f} (error rate {p['error_rate']:.4f}); "
                  f"training margin loss at gamma = {p['bound_gamma']:.4g}: {p['train_margin_loss']:.4f} "
                  f"(m = {p['m']})",
                  f"explicit bound (A.6, delta = {p['delta']}): L_0 <= {bound} [{e['regime']}; "
                  f"log10 complexity "
                  f"{'-' if e['log10_complexity'] is None else format(e['log10_complexity'], '.4f')}]"
                  f"{' -- vacuous (> 1)' if p['vacuous'] else ''}"]
    return "\n".join(lines)


def cmd_bound(args: argparse.Namespace) -> int:
    from spectral_analysis.analysis.bound_report import bound_report
    from spectral_analysis.analysis.report import json_ready

    subject, data = subject_and_data(args)
    report = bound_report(subject, data=args.data, margin=args.margin, quantile=args.margin_quantile,
                          delta=args.delta, data_bound=args.data_bound, length=args.length,
                          samples=args.samples, seed=args.seed, user_data=data,
                          progress=show_progress(args))
    emit(args, json_ready(report), bound_text)
    return 0


def cmd_certify(args: argparse.Namespace) -> int:
    import torch

    from spectral_analysis.analysis.certify import CLASS_TASKS, certify, error_rate
    from spectral_analysis.analysis.checkpoint_data import checkpoint_task, held_out_split
    from spectral_analysis.analysis.report import json_ready

    subject, data = subject_and_data(args, feedforward=True)
    if data is not None:
        subject.model.check_input(data.inputs[:1].to(next(subject.model.parameters())))
        task = data.as_task(subject.model.output_size)
    else:
        task = checkpoint_task(subject.metadata)
    if task.kind not in CLASS_TASKS:
        raise CommandError(f"a certificate of the 0-1 error needs one class per sequence (or per flat "
                           f"example); task {task.name!r} is {task.kind}")
    # a toolkit checkpoint's validation split is held out: it never trained on it, at most chose its end
    held_out, selections = held_out_split(subject.metadata, task) if data is None else (None, 1)
    progress = show_progress(args)
    record, posterior = certify(subject, task.train.inputs, task.train.targets, delta=args.delta,
                                delta_prime=args.delta_prime, mc_samples=args.mc_samples, epochs=args.epochs,
                                seed=args.seed, chunk_size=args.chunk_size, objective=args.objective,
                                prior=args.prior, mean=args.mean, held_out=held_out,
                                selections=selections, prior_fraction=args.prior_fraction,
                                prior_epochs=args.prior_epochs, lr=args.lr, init_std=args.init_std,
                                delta_held=args.delta_held, progress=progress, state=args.state)
    if data is None:  # reported beside the certificates, never used by them
        x, y = task.test.inputs.float(), task.test.targets
        generator = torch.Generator().manual_seed(args.seed)
        weights = dict(subject.model.named_parameters())
        record["checkpoint_test_error"] = error_rate(subject.model, weights, x, y)
        record["mean_test_error"] = error_rate(subject.model, posterior.mu, x, y)
        record["stochastic_test_error"] = sum(error_rate(subject.model, posterior.sample(generator), x, y)
                                              for _ in range(10)) / 10
    emit(args, json_ready(record), certificate_text, lambda p: [p])
    return 0


def certificate_text(p: dict) -> str:
    """``certify``'s record in words: what is certified first, then each certificate and its object."""
    from spectral_analysis.analysis.derandomize import GAMMA_GRID, HELD_CHUNK

    confidence = 1 - p["delta"] - p["delta_prime"]
    lines = [f"certified: {p['certifies']}",
             f"  0-1 error of Q <= {p['certified_error']:.4f} (confidence {confidence:.3f}; Q's training "
             f"error {p['mc_error']:.4f} over {p['mc_samples']} sampled networks, KL {p['kl']:.1f}, "
             f"m = {p['m']}, prior {p['prior']}, variance {p['prior_variance']:.3g})",
             f"  Q's fit started at s = {p['init_std']:.3g}"
             + (" (the noise probe)" if p.get("noise_probe") else " (--init-std)")]
    if p.get("state") and p["state"]["resumed"]:
        untimed = p["state"].get("untimed")
        lines.append(f"  resumed from {p['state']['folder']}: {', '.join(p['state']['resumed'])} read back; "
                     f"{p['seconds']:.0f} s of work in all"
                     + (f" (without {', '.join(untimed)}, kept before stages recorded their time)"
                        if untimed else ""))
    seen = f"the checkpoint itself: training error {p['checkpoint_train_error']:.4f}"
    if "checkpoint_test_error" in p:
        seen += (f", test error {p['checkpoint_test_error']:.4f}; Q's test error "
                 f"{p['stochastic_test_error']:.4f} (10 samples), its mean's {p['mean_test_error']:.4f}")
    lines.append("  " + seen)
    d = p["deterministic"]
    if d is None:
        lines.append("  the checkpoint itself is not certified: that needs sequences it never trained on "
                     "(a toolkit checkpoint's validation split, unless its schedule read it) and Q "
                     "centred on it")
        return "\n".join(lines)
    held = (f"<= {d['held_out_bound']:.4f} from {d['held_out_n']} held-out sequences alone (error "
            f"{d['held_out_error']:.4f}, among {d['selections']} checkpoint(s) they chose from)")
    if d["derandomized_bound"] is None:
        lines.append(f"  the checkpoint itself, certified: 0-1 error {held}; not derandomized (its "
                     f"perturbation term needs at least {HELD_CHUNK} held-out sequences Q did not read)")
        return "\n".join(lines)
    lines.append(f"  Q with its noise times {d['scaled_q_noise_scale']:g} (the same mean), certified: 0-1 "
                 f"error <= {d['scaled_q_bound']:.4f} (its margin-{GAMMA_GRID[0] / 2:g} loss, the tightest "
                 f"scale of the derandomization's grid; confidence {d['derandomized_confidence']:.3f})")
    vacuous = " (vacuous)" if d["derandomized_bound"] >= 1 else ""
    lines.append(f"  the checkpoint itself, certified: 0-1 error <= {d['derandomized_bound']:.4f}{vacuous} "
                 f"derandomized through margins (gamma {d['derandomized_gamma']:g}, Q's noise times "
                 f"{d['derandomized_noise_scale']:g}: its margin term "
                 f"{d['q_margin_bound']:.4f} + perturbation term {d['perturbation_bound']:.4f}; "
                 f"confidence {d['derandomized_confidence']:.3f}); {held}")
    return "\n".join(lines)


def cmd_bounds_table(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from spectral_analysis.analysis.bounds_table import COLUMNS, bounds_row, classification_entries
    from spectral_analysis.analysis.report import json_ready
    from spectral_analysis.tables import render

    names = list(args.checkpoints) or classification_entries(args.experiment)
    if not names:
        raise CommandError("no checkpoints: name some, or keep paper-scale results of a classification task")
    progress = show_progress(args)
    priors = () if args.certify is None else tuple(args.certify) or ("init",)
    rows = [bounds_row(name, priors, args.mc_samples, args.epochs, args.objective, state=args.state,
                       device=args.device)
            for name in tqdm(names, desc="checkpoints", disable=not progress)]
    if args.out:
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    if args.figure:
        from spectral_analysis.plotting.bounds_figure import bounds_figure_title, plot_bounds_against_error
        from spectral_analysis.plotting.paper_figures import save_figure

        save_figure(plot_bounds_against_error(rows, bounds_figure_title(rows)), args.figure)

    emit(args, json_ready({"rows": rows}), lambda p: render(p["rows"], "md", COLUMNS), lambda p: p["rows"])
    return 0


def cmd_spectra(args: argparse.Namespace) -> int:
    from spectral_analysis.analysis.spectra import spectral_table
    from spectral_analysis.tables import render

    rows = spectral_table(args.checkpoint).to_dict("records")
    columns = ("name", "gate", "N", "M", "sigma_max", "sigma_min", "condition_number", "stable_rank",
               "spectral_margin", "alpha")
    emit(args, {"source": args.checkpoint, "matrices": rows},
         lambda p: render(p["matrices"], "md", columns), lambda p: p["matrices"])
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from spectral_analysis.analysis.report import report_markdown
    from spectral_analysis.plotting.analysis_report import write_analysis

    subject, data = subject_and_data(args)
    report, figures = write_analysis(subject, args.out, args.samples, args.trials, args.seed, args.burn_in,
                                     data, progress=show_progress(args))
    payload = {**report, "out": str(args.out), "figures": [str(f) for f in figures]}

    def text(p: dict) -> str:
        return report_markdown(p) + f"\nwritten to {p['out']}: report.json, report.md, " + ", ".join(
            Path(f).name for f in p["figures"])

    emit(args, payload, text)
    return 0


CHECKPOINT_HELP = ("a toolkit checkpoint, zoo:<experiment>/<trial>, or a PyTorch nn.RNN/GRU/LSTM state_dict "
                   "(torch.save or safetensors)")


def add_subject_arguments(parser: argparse.ArgumentParser, nonfinite: bool = False) -> None:
    """The model and data options every analyzer shares; ``nonfinite``: the analyzer can read a model
    whose weights hold NaN or inf (``weights`` exports them; the others need singular values)."""
    parser.add_argument("checkpoint", type=checkpoint_arg, help=CHECKPOINT_HELP)
    parser.add_argument("--arch", choices=ARCHITECTURES, default=None,
                        help="force a PyTorch state_dict's architecture (default: inferred; nn.RNN: tanh)")
    parser.add_argument("--head-prefix", default=None, help="the read-out nn.Linear's key prefix, e.g. fc")
    parser.add_argument("--inputs", default=None, help="your own sequences (N, T, n_i): .npy, .npz or .csv")
    parser.add_argument("--labels", default=None, help="their classes (N,): .npy, .npz or .csv")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    if nonfinite:
        parser.add_argument("--allow-nonfinite", action="store_true",
                            help="read a model whose weights hold NaN or inf (refused by default)")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    weights = sub.add_parser("weights", help="dense W, M, Y of a checkpoint as the bound uses them (.npz)")
    add_subject_arguments(weights, nonfinite=True)
    weights.add_argument("--out", required=True, help="output .npz file")
    add_output_arguments(weights)
    weights.set_defaults(func=cmd_weights)

    bound = sub.add_parser("bound", help="the PAC-Bayes bound G(w) of Theorem 5 and the explicit A.6 bound")
    add_subject_arguments(bound)
    bound.add_argument("--data", choices=("train", "test"), default=None,
                       help="compute margins on this split (classification tasks); the bound uses train")
    gamma = bound.add_mutually_exclusive_group()
    gamma.add_argument("--margin", type=real, default=None, help="the margin gamma")
    gamma.add_argument("--margin-quantile", type=real, default=None,
                       help="gamma = this quantile of the training margins (default 0.1 with --data)")
    bound.add_argument("--delta", type=real, default=DEFAULT_DELTA,
                       help="confidence 1 - delta (default 0.05)")
    bound.add_argument("--data-bound", type=real, default=None, help="B, the bound on ||x_t|| (before the "
                       "constant input of the bias is added)")
    bound.add_argument("--length", type=count(1, 10 ** 6), default=None,
                       help="T (default: the trained length)")
    bound.add_argument("--samples", type=count(1, 10 ** 9), default=None,
                       help="use a random subset of this many samples")
    bound.add_argument("--seed", type=SEED, default=0)
    add_output_arguments(bound)
    bound.set_defaults(func=cmd_bound)

    cert = sub.add_parser("certify",
                          help="a non-vacuous PAC-Bayes certificate of the 0-1 error (Dziugaite-Roy)")
    add_subject_arguments(cert)
    cert.add_argument("--delta", type=probability, default=0.025,
                      help="confidence of the PAC-Bayes-kl bound")
    cert.add_argument("--delta-prime", type=probability, default=0.01,
                      help="confidence of the Monte Carlo bound")
    cert.add_argument("--mc-samples", type=count(1, 10 ** 7), default=20000,
                      help="sampled networks for Q's error, each "
                      "scoring one chunk of the training set (default 20000)")
    cert.add_argument("--chunk-size", type=count(1, 10 ** 6), default=50,
                      help="training examples per sampled network")
    cert.add_argument("--epochs", type=count(0, 10 ** 5), default=20, help="epochs of posterior optimization")
    cert.add_argument("--objective", choices=OBJECTIVES, default="quadratic",
                      help="PAC-Bayes training objective (default quadratic, Pérez-Ortiz et al.)")
    cert.add_argument("--mean", choices=MEANS, default="checkpoint",
                      help="checkpoint: Q is centred on the checkpoint's weights, only its variances fitted "
                      "(default); fitted: Q's mean is fitted from there too")
    cert.add_argument("--lr", type=positive_real(10.0), default=1e-4,
                      help="with --mean fitted: Adam learning rate of the posterior mean")
    cert.add_argument("--init-std", type=auto_or(positive_real(10.0)), default="auto",
                      help="the posterior's initial standard deviation; auto (default): the largest on a "
                      "grid at which sampled networks err little more than the checkpoint on the training "
                      "sequences (the noise probe)")
    cert.add_argument("--prior", choices=PRIORS, default="init", help="init: the seed's initialization "
                      "(data-independent); learned: trained on half the checkpoint's validation split (held "
                      "out: it never trained on it), or with --inputs on a part of the training set")
    cert.add_argument("--prior-fraction", type=probability, default=0.5,
                      help="with --prior learned and --inputs: the part of the training set the prior learns "
                      "from")
    cert.add_argument("--delta-held", type=probability, default=0.01,
                      help="confidence of the held-out terms of the checkpoint's own certificates")
    cert.add_argument("--prior-epochs", type=count(0, 10 ** 5), default=20,
                      help="with --prior learned: its epochs")
    cert.add_argument("--seed", type=SEED, default=0)
    cert.add_argument("--state", default=None, metavar="DIR",
                      help="keep each finished stage (prior, Q, every Monte Carlo pass) in DIR; the same "
                      "command with the same DIR resumes an interrupted evaluation")
    add_output_arguments(cert)
    cert.set_defaults(func=cmd_certify)

    table = sub.add_parser("bounds-table",
                           help="every bound beside the measured errors, one row per checkpoint")
    table.add_argument("checkpoints", nargs="*", type=checkpoint_arg, help="checkpoints (default: the zoo's "
                       "paper-scale classification checkpoints)")
    table.add_argument("--experiment", action="append", default=None, help="only the zoo entries of these")
    table.add_argument("--certify", nargs="*", choices=PRIORS, default=None, metavar="PRIOR",
                       help="also compute the PAC-Bayes certificates with these priors (init, learned; "
                       "no value: init); about a minute each for a small model")
    table.add_argument("--objective", choices=OBJECTIVES, default="quadratic",
                       help="the certificates' objective")
    table.add_argument("--mc-samples", type=count(1, 10 ** 7), default=20000)
    table.add_argument("--epochs", type=count(0, 10 ** 5), default=20)
    table.add_argument("--state", default=None, metavar="DIR",
                       help="keep each certificate's finished stages under DIR/EXPERIMENT/SCALE/TRIAL/PRIOR "
                       "(what certify --state keeps); the same command resumes them")
    table.add_argument("--device", default="cpu", help="where the certificates train and sample their "
                       "networks: cpu or cuda (default cpu; the other bounds are computed on the CPU)")
    table.add_argument("--out", default=None, help="also write the rows to this CSV file")
    table.add_argument("--figure", default=None, help="also draw the bounds against the test error (PNG)")
    add_output_arguments(table)
    table.set_defaults(func=cmd_bounds_table)

    spectra = sub.add_parser("spectra", help="per-matrix spectra of every weight matrix, recurrent ones "
                             "included: norms, stable rank, condition, spectral margin, power-law alpha")
    spectra.add_argument("checkpoint", type=checkpoint_arg,
                         help="a toolkit checkpoint, zoo:<experiment>/<trial>, or any PyTorch state_dict "
                         "(torch.save or safetensors), read under its own keys: no architecture needed")
    add_output_arguments(spectra)
    spectra.set_defaults(func=cmd_spectra)

    analyze = sub.add_parser("analyze", help="bound, Lemma 3, state norms, Jacobians, Lyapunov exponents, "
                                             "trajectories")
    add_subject_arguments(analyze)
    analyze.add_argument("--out", required=True, help="directory for report.json, report.md and figures")
    analyze.add_argument("--samples", type=count(1, 10 ** 4), default=8,
                         help="test sequences for Jacobians (default 8)")
    analyze.add_argument("--trials", type=count(1, 10 ** 4), default=20,
                         help="random perturbations for Lemma 3")
    analyze.add_argument("--burn-in", type=count(0, 10 ** 6), default=0,
                         help="steps before Lyapunov sums start")
    analyze.add_argument("--seed", type=SEED, default=0)
    add_output_arguments(analyze)
    analyze.set_defaults(func=cmd_analyze)
