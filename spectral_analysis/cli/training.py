"""``spectral-analysis train``, ``inspect`` and ``demo`` (training RNN and Spectral-RNN on addition)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from spectral_analysis.cli.common import (
    CommandError,
    add_output_arguments,
    checkpoint_arg,
    emit,
    output_format,
    real,
    show_progress,
)
from spectral_analysis.vocabulary import OPTIMIZER_NAMES, PTB_LEVELS, SEQUENCE_LOSSES, TASK_NAMES

TASK_FLAGS: dict[str, dict[str, Any]] = {
    "length": {"type": int, "help": "sequence length T (addition, copy) or window (ptb)"},
    "dataset": {"help": "UCR dataset name (ucr task), e.g. ArrowHead, GunPoint, Coffee"},
    "data_dir": {"help": "read the task's data from your own directory (MNIST IDX files, UCR, ptb.*.txt)"},
    "level": {"choices": PTB_LEVELS, "help": "ptb: words (default, ICML Table 3) or characters (KRU's)"},
    "train_size": {"type": int, "help": "training examples (synthetic tasks; MNIST: keep the first ones)"},
    "valid_size": {"type": int, "help": "validation examples (synthetic tasks)"},
    "test_size": {"type": int, "help": "test examples (synthetic tasks)"},
    "pixels_per_step": {"type": int, "help": "MNIST pixels per step: 1 (784 steps) or 2 (392 steps)"},
    "input_size": {"type": int, "help": "UCR values per step n_i (default: Appendix C's rule)"},
    "data_seed": {"option": "seed", "type": int,
                  "help": "data seed: synthetic sets, the MNIST permutation, the UCR validation split"},
}


def _task_options(args: argparse.Namespace) -> dict[str, Any]:
    options = {}
    for flag, spec in TASK_FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            options[spec.get("option", flag)] = value
    return options


def config_from_file(path: str, out: str | None, device: str | None):  # noqa: ANN201 (a TrainConfig)
    """The training configuration a run wrote (``RUN/config.json``), with ``out`` and ``device`` replaced
    where given; a clear error for a file that is not one."""
    import json

    from spectral_analysis.atomic import read_text_file
    from spectral_analysis.train import TrainConfig

    try:
        section = json.loads(read_text_file(path, "run configuration", limit=2 ** 24))["train"]
        config = TrainConfig(**section)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CommandError(f"{path} is not a run's config.json (its 'train' section): {error}") from None
    if out is not None:
        config.out = out
    if device is not None:
        config.device = device
    return config


def cmd_train(args: argparse.Namespace) -> int:
    from spectral_analysis.cli.models import model_options
    from spectral_analysis.train import TrainConfig, train

    progress = not args.no_progress and show_progress(args)
    if args.config is not None:
        if args.model is not None or args.task is not None:
            raise CommandError("--config takes the run's own model and task: drop --model and --task")
        config = config_from_file(args.config, args.out, args.device)
        config.progress, config.tensorboard = progress, args.tensorboard or config.tensorboard
        config.test_with_valid = args.test_with_valid or config.test_with_valid
        config.max_steps = config.max_steps if args.max_steps is None else args.max_steps
        if args.plateau_min_delta is not None:
            config.plateau_min_delta = args.plateau_min_delta
    else:
        if args.model is None or args.task is None or args.out is None:
            raise CommandError("train needs --model, --task and --out (or --config RUN/config.json)")
        config = TrainConfig(
            model=args.model, task=args.task, out=args.out, hidden=args.hidden,
            model_options=model_options(args), task_options=_task_options(args), optimizer=args.optimizer,
            lr=args.lr, lr_decay=args.lr_decay, lr_cut=args.lr_cut, batch_size=args.batch_size,
            steps=args.steps, epochs=args.epochs, max_steps=args.max_steps,
            plateau_min_delta=args.plateau_min_delta or 0.0, clip=args.clip, clip_value=args.clip_value,
            sequence_loss=args.sequence_loss, penalty=args.penalty, freeze=args.freeze or [], seed=args.seed,
            device=args.device or "auto", record_every=args.record_every, eval_every=args.eval_every,
            checkpoint_every=args.checkpoint_every, eval_batches=args.eval_batches, progress=progress,
            tensorboard=args.tensorboard, test_with_valid=args.test_with_valid)
    if config.steps is None and config.epochs is None:
        config.steps = 1000
    summary = train(config, resume=args.resume)
    args.out = config.out
    payload = {"out": str(Path(args.out)), "checkpoint": str(Path(args.out) / "last.safetensors"),
               **{phase: {k: v for k, v in line.items() if k != "singular_values"}
                  for phase, line in summary.items()}}

    def text(p: dict) -> str:
        lines = [f"run written to {p['out']} (checkpoint {p['checkpoint']})"]
        for phase in ("train", "valid", "test"):
            if phase in p:
                values = ", ".join(f"{k}={v:.4g}" for k, v in p[phase].items()
                                   if isinstance(v, float) and k != "time")
                lines.append(f"  {phase:<5} step {p[phase]['step']}: {values}")
        return "\n".join(lines)

    emit(args, payload, text)
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from spectral_analysis.io import resolve_checkpoint
    from spectral_analysis.train import load_checkpoint, weight_singular_values

    checkpoint = load_checkpoint(resolve_checkpoint(args.checkpoint))
    meta, tensors, model = checkpoint.metadata, checkpoint.tensors, checkpoint.model
    svals = [s.tolist() for s in weight_singular_values(model)]
    task = meta.get("task", {})
    payload = {"checkpoint": args.checkpoint, "model": meta["model"], "task": task.get("name"),
               "task_options": task.get("options"), "T": task.get("length"), "B": task.get("data_bound"),
               "m": task.get("train_size"), "step": meta.get("step"), "metrics": meta.get("metrics", {}),
               "package_version": meta.get("package_version"), "parameters": model.parameter_counts(),
               "singular_values": svals, "tensors": len(tensors)}

    def text(p: dict) -> str:
        model_line = ", ".join(f"{k}={v}" for k, v in p["model"]["options"].items())
        lines = [f"{p['checkpoint']}: {p['model']['name']} (n_i={p['model']['input_size']}, "
                 f"n={p['model']['hidden_size']}, n_y={p['model']['output_size']}; {model_line})",
                 f"  task {p['task']} {p['task_options']}: T={p['T']}, B={p['B']:.4g}, m={p['m']}",
                 f"  step {p['step']}, {p['parameters']['total']:,d} parameters, "
                 f"package {p['package_version']}"]
        for phase, line in p["metrics"].items():
            values = ", ".join(f"{k}={v:.4g}" for k, v in line.items()
                               if isinstance(v, float) and k not in ("time",))
            lines.append(f"  {phase}: {values}")
        for i, s in enumerate(p["singular_values"]):
            lines.append(f"  singular values of matrix {i}: max {max(s):.6g}, min {min(s):.6g} "
                         f"({len(s)} values)")
        return "\n".join(lines)

    emit(args, payload, text)
    return 0


DEMO_BOUND_LENGTHS = (30, 100, 300)


def _demo_bounds(checkpoint_path: Path) -> dict[str, Any]:
    """log10 G(w) of the trained weights at T = 30, 100, 300 (gamma = 1, B from the checkpoint)."""
    from spectral_analysis.analysis import bound_report
    from spectral_analysis.io import load

    subject = load(checkpoint_path)
    reports = {T: bound_report(subject, length=T) for T in DEMO_BOUND_LENGTHS}
    return {"log10_G": {str(T): r["log10_G"] for T, r in reports.items()},
            "corollary1_log10_G": {str(T): r["corollary1"]["log10_G"] for T, r in reports.items()
                                   if r["corollary1"]},
            "W_norm": reports[DEMO_BOUND_LENGTHS[0]]["norms"]["W"]}


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: RNN and Spectral-RNN on the addition task, side by side, on this machine, then
    the analyzers on both checkpoints and their bounds G(w) at T = 30, 100, 300."""
    from spectral_analysis.io import load
    from spectral_analysis.plotting.analysis_report import write_analysis
    from spectral_analysis.train import TrainConfig, train

    root = Path(args.out) / time.strftime("demo-%Y%m%d-%H%M%S")
    runs = {}
    for model, options in (("rnn", {}), ("spectral", {"m1": 16, "m2": 16, "r": 0.01})):
        config = TrainConfig(model=model, task="addition", out=str(root / model), hidden=128,
                             model_options=options, task_options={"length": args.length},
                             steps=args.steps, eval_every=max(1, args.steps // 4), record_every=25,
                             checkpoint_every=max(1, args.steps // 4),
                             progress=show_progress(args) and output_format(args) == "text")
        summary = train(config)
        runs[model] = {"out": str(root / model), "test_mse": summary["test"]["mse"],
                       "valid_mse": summary["valid"]["mse"],
                       "spectral_margin": summary["train"]["spectral_margin"],
                       "grad_h0_norm": summary["train"]["grad_h0_norm"],
                       "train_seconds": summary["test"]["time"]}
        checkpoint = root / model / "last.safetensors"
        write_analysis(load(str(checkpoint)), root / model / "analysis")
        runs[model].update(_demo_bounds(checkpoint))
        runs[model]["analysis"] = str(root / model / "analysis")
    payload = {"task": "addition", "length": args.length, "steps": args.steps, "baseline_mse": 2.0 / 12.0,
               "runs": runs}
    if args.record:
        import json

        import torch

        from spectral_analysis.atomic import atomic_write_text
        from spectral_analysis.machine import machine_name

        record = {**payload, "machine": machine_name("cpu"), "torch": torch.__version__,
                  "date": time.strftime("%Y-%m-%d")}
        Path(args.record).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.record, json.dumps(record, indent=2) + "\n")

    def text(p: dict) -> str:
        lines = [f"addition task, T = {p['length']}, {p['steps']} steps each; always predicting 1 "
                 f"scores MSE {p['baseline_mse']:.3f}"]
        for model, r in p["runs"].items():
            verdict = "beats" if r["test_mse"] < p["baseline_mse"] else "does not beat"
            lines.append(f"  {model:<9} test MSE {r['test_mse']:.4f} ({verdict} the baseline), spectral "
                         f"margin {r['spectral_margin']:.3g}, ||dL/dh0|| {r['grad_h0_norm']:.3g}, "
                         f"{r['train_seconds']:.0f} s")
            lines.append(f"            run: {r['out']} (metrics.jsonl, last.safetensors); analysis: "
                         f"{r['analysis']}")
        lengths = list(next(iter(p["runs"].values()))["log10_G"])
        lines.append("log10 G(w) of Theorem 5 for the trained weights at sequence length T (gamma = 1, "
                     "B from the data):")
        lines.append(f"  {'model':<9} {'||W||':>7} " + " ".join(f"{'T=' + T:>9}" for T in lengths))
        for model, r in p["runs"].items():
            lines.append(f"  {model:<9} {r['W_norm']:>7.4f} "
                         + " ".join(f"{r['log10_G'][T]:>9.2f}" for T in lengths))
            if r["corollary1_log10_G"]:
                lines.append(f"  {'  Cor. 1':<9} {'':>7} "
                             + " ".join(f"{r['corollary1_log10_G'][T]:>9.2f}" for T in lengths))
        lines.append("  next: spectral-analysis bound|analyze <run>/last.safetensors")
        return "\n".join(lines)

    emit(args, payload, text)
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from spectral_analysis.cli.models import add_model_flags

    demo = sub.add_parser("demo", help="train RNN and Spectral-RNN on the addition task (the main job)")
    demo.add_argument("--length", type=int, default=100, help="sequence length T (default 100)")
    demo.add_argument("--steps", type=int, default=2000, help="training steps per model (default 2000)")
    demo.add_argument("--out", default="runs", help="runs go to OUT/demo-<time>/{rnn,spectral}")
    demo.add_argument("--record", default=None, metavar="FILE", help="also write the numbers, with the "
                      "machine and date, to FILE (results/demo/demo.json is the run the docs quote)")
    add_output_arguments(demo)
    demo.set_defaults(func=cmd_demo)

    tr = sub.add_parser("train", help="train a model on a task, writing checkpoints and metrics")
    tr.add_argument("--config", default=None, help="rerun a run from its own RUN/config.json (with --out, or "
                    "--resume in place); the model, task and training flags then come from the file")
    add_model_flags(tr, required=False)
    tr.add_argument("--task", default=None, choices=TASK_NAMES)
    for flag, spec in TASK_FLAGS.items():
        spec = {k: v for k, v in spec.items() if k != "option"}
        tr.add_argument("--" + flag.replace("_", "-"), dest=flag, default=None, **spec)
    tr.add_argument("--hidden", type=int, default=128, help="hidden size n (default 128)")
    tr.add_argument("--optimizer", choices=OPTIMIZER_NAMES, default="adam")
    tr.add_argument("--lr", type=real, default=1e-3)
    tr.add_argument("--lr-decay", type=real, default=1.0, help="learning rate factor per epoch")
    tr.add_argument("--lr-cut", type=real, default=1.0,
                    help="learning rate factor after each epoch without validation improvement (KRU's PTB)")
    tr.add_argument("--batch-size", type=int, default=50)
    budget = tr.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, default=None, help="optimizer steps (default 1000)")
    budget.add_argument("--epochs", type=int, default=None)
    tr.add_argument("--max-steps", type=int, default=None, help="train on past --steps/--epochs until the "
                    "validation metric plateaus (no improvement over the last 20%% of the steps), at most "
                    "this many steps; with --config --resume it extends a finished run")
    tr.add_argument("--plateau-min-delta", type=real, default=None, help="with --max-steps: a validation "
                    "gain counts as an improvement only when larger than this (default 0: any gain)")
    clipping = tr.add_mutually_exclusive_group()
    clipping.add_argument("--clip", type=real, default=None, help="clip the gradient norm to this value")
    clipping.add_argument("--clip-value", type=real, default=None, help="clip each gradient entry to "
                          "[-v, v] (as the uRNN authors' scripts clip their baselines at 1)")
    tr.add_argument("--sequence-loss", choices=SEQUENCE_LOSSES, default="mean", help="a sequence task's "
                    "objective: the cross entropy's mean over steps and batch (default), or its sum over the "
                    "steps averaged over the batch (Zaremba et al. 2014; lr and --clip then act on the sum)")
    tr.add_argument("--penalty", type=real, default=0.0, help="weight of ||sigma - sigma*||^2 (map none)")
    tr.add_argument("--freeze", action="append", metavar="PATTERN", help="keep the parameters whose names "
                    "match PATTERN (fnmatch, e.g. 'transitions.*') at their initial values; repeatable")
    tr.add_argument("--seed", type=int, default=0, help="model init seed (and batch order)")
    tr.add_argument("--device", default=None, help="auto (default), cpu or cuda")
    tr.add_argument("--record-every", type=int, default=10)
    tr.add_argument("--eval-every", type=int, default=100)
    tr.add_argument("--checkpoint-every", type=int, default=100)
    tr.add_argument("--eval-batches", type=int, default=None, help="limit validation to this many batches")
    tr.add_argument("--test-with-valid", action="store_true", help="also score the test set at each "
                    "validation (a test curve; kept runs report the test metric where validation was best)")
    tr.add_argument("--resume", action="store_true", help="continue the run in --out from last.safetensors")
    tr.add_argument("--no-progress", action="store_true", help="no progress bar")
    tr.add_argument("--tensorboard", action="store_true", help="also write TensorBoard event files into "
                    "OUT/tensorboard (tensorboard --logdir OUT)")
    tr.add_argument("--out", default=None, help="run directory")
    add_output_arguments(tr)
    tr.set_defaults(func=cmd_train)

    ins = sub.add_parser("inspect", help="what a checkpoint holds")
    ins.add_argument("checkpoint", type=checkpoint_arg, help="a checkpoint file or zoo:<experiment>/<trial>")
    add_output_arguments(ins)
    ins.set_defaults(func=cmd_inspect)
