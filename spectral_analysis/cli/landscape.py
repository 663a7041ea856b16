"""``spectral-analysis landscape``: the linear-RNN claims of the earlier version (Claim 1, Theorem 5,
Corollary 1), measured and judged."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from spectral_analysis.cli.common import add_output_arguments, emit, real, show_progress
from spectral_analysis.vocabulary import LANDSCAPE_DEFAULTS


def cmd_landscape(args: argparse.Namespace) -> int:
    from spectral_analysis.paper.landscape import LandscapeConfig, landscape_markdown, landscape_report
    from spectral_analysis.plotting.landscape import plot_landscape

    config = LandscapeConfig(hidden=args.hidden, length=args.length, outputs=args.outputs, starts=args.starts,
                             seed=args.seed, e=args.e, high=args.high, iterations=args.iterations,
                             samples=args.samples)
    report = landscape_report(config, progress=show_progress(args))
    markdown = landscape_markdown(report)
    if args.out is not None:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "landscape.json").write_text(json.dumps(report, indent=1))
        (out / "landscape.md").write_text(markdown + "\n")
        figures = plot_landscape(report, out)
        report["out"] = str(out)
        report["figures"] = [str(f) for f in figures]
        names = ", ".join(f.name for f in figures)
        markdown += f"\n\nwritten to {out}: landscape.json, landscape.md, {names}"
    emit(args, report, lambda _: markdown)
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    defaults = argparse.Namespace(**LANDSCAPE_DEFAULTS)
    landscape = sub.add_parser("landscape", help="linear-RNN population risk: Claim 1, Theorem 5 and "
                               "Corollary 1 of the earlier version, with verdicts")
    landscape.add_argument("--hidden", type=int, default=defaults.hidden, help="n, the hidden size")
    landscape.add_argument("--length", type=int, default=defaults.length, help="t, the sequence length")
    landscape.add_argument("--outputs", type=int, default=None, help="n_y (default: n)")
    landscape.add_argument("--starts", type=int, default=defaults.starts,
                           help="random starts per search and per descent")
    landscape.add_argument("--seed", type=int, default=defaults.seed)
    landscape.add_argument("--e", type=real, default=defaults.e,
                           help="Theorem 5's lower bound on sigma_min(W)")
    landscape.add_argument("--high", type=real, default=defaults.high,
                           help="upper end of the singular-value range (teacher, starts, Eq. 8)")
    landscape.add_argument("--iterations", type=int, default=defaults.iterations,
                           help="gradient-descent iterations per run")
    landscape.add_argument("--samples", type=int, default=defaults.samples,
                           help="random W for the inequality of Theorem 5's proof")
    landscape.add_argument("--out", default=None,
                           help="directory for landscape.json, landscape.md and figures")
    add_output_arguments(landscape)
    landscape.set_defaults(func=cmd_landscape)
