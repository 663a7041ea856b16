"""KRU's Fig. 6 at reduced scale: the soft unitary constraint's amplitude against the spectral norm and
spectral radius of W (and the validation loss).

Complex KRU (2 x 2 factors) trained on the addition task once per amplitude (the trainer's
``--penalty``, weighting ``sum_f ||W_f^H W_f - I||_F^2``), same seed and data for every run. The paper
used polyphonic music and TIMIT; the addition task stands in, so only the trend is comparable.

    python scripts/kru_amplitude.py [--hidden 16] [--steps 400] [--out figures]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402
import torch  # noqa: E402

from spectral_analysis.train import TrainConfig, load_checkpoint, train  # noqa: E402

AMPLITUDES = [1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]


def run(amplitude: float, args: argparse.Namespace, out: Path) -> dict:
    config = TrainConfig(model="kru", task="addition", out=str(out), hidden=args.hidden,
                         model_options={"complex": True}, task_options={"length": args.length},
                         lr=args.lr, steps=args.steps, penalty=amplitude, seed=args.seed,
                         eval_every=args.steps, checkpoint_every=args.steps, progress=False)
    summary = train(config)
    transition = load_checkpoint(out / "last.safetensors").model.transitions[0]
    W = transition.complex_matrix().detach().to(torch.complex128)
    return {"amplitude": amplitude, "spectral_norm": float(torch.linalg.matrix_norm(W, ord=2)),
            "spectral_radius": float(torch.linalg.eigvals(W).abs().max()),
            "valid_mse": summary["valid"]["mse"] if "valid" in summary else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=16, help="complex units N (a power of two)")
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "figures"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, amplitude in enumerate(AMPLITUDES):
            rows.append(run(amplitude, args, Path(tmp) / f"run{k}"))
            print(json.dumps(rows[-1]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"what": "KRU Fig. 6 (reduced): amplitude vs spectral norm/radius", "task": "addition",
              "hidden_complex_units": args.hidden, "length": args.length, "steps": args.steps, "lr": args.lr,
              "seed": args.seed, "runs": rows}
    (out / "kru_amplitude.json").write_text(json.dumps(report, indent=1))
    sns.set_theme(style="whitegrid", context="notebook")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    amps = [r["amplitude"] for r in rows]
    axes[0].semilogx(amps, [r["spectral_norm"] for r in rows], "o-", label="spectral norm ||W||_2")
    axes[0].semilogx(amps, [r["spectral_radius"] for r in rows], "s--", label="spectral radius rho(W)")
    axes[0].axhline(1.0, color="black", lw=0.8)
    axes[0].set_xlabel("amplitude of the soft unitary constraint")
    axes[0].set_ylabel("value (unitary W: 1)")
    axes[0].legend(fontsize=8)
    axes[1].semilogx(amps, [r["valid_mse"] for r in rows], "o-")
    axes[1].axhline(0.167, color="black", lw=0.8, ls=":", label="baseline 0.167 (predict 1)")
    axes[1].legend(fontsize=8)
    axes[1].set_xlabel("amplitude of the soft unitary constraint")
    axes[1].set_ylabel("validation MSE (addition)")
    fig.suptitle(f"KRU, complex 2 x 2 factors, N = {args.hidden}, addition T = {args.length}, "
                 f"{args.steps} steps", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "kru_amplitude.png", dpi=110)
    print(f"wrote {out / 'kru_amplitude.png'} and {out / 'kru_amplitude.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
