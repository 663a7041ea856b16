"""An example for every command, shown at the end of its ``--help`` (``tests/test_cli_help.py`` parses
each one, so an option renamed here fails there)."""

from __future__ import annotations

ZOO_RNN = "zoo:fig1-addition/spectral_length300_s0"

EXAMPLES: dict[str, tuple[str, ...]] = {
    "svd-demo": ("spectral-analysis svd-demo --size 8",),
    "decompose": ("spectral-analysis decompose W.npy --m1 4 --m2 4 --out factors.npz",),
    "params": ("spectral-analysis params --model spectral --inputs 1 --hidden 128 --outputs 1 --m1 16 "
               "--m2 16 --format md",),
    "demo": ("spectral-analysis demo",
             "spectral-analysis demo --steps 200 --out runs/quick-demo"),
    "train": ("spectral-analysis train --model spectral --task addition --length 100 --steps 2000 "
              "--out runs/spectral",
              "spectral-analysis train --resume --out runs/spectral --steps 4000"),
    "inspect": (f"spectral-analysis inspect {ZOO_RNN}",),
    "weights": ("spectral-analysis weights rnn1.pt --arch rnn_relu --out weights.npz",),
    "bound": ("spectral-analysis bound rnn1.pt --arch rnn_relu --inputs X.npy --labels y.npy --margin 0.5",
              f"spectral-analysis bound {ZOO_RNN} --length 300"),
    "certify": ("spectral-analysis certify rnn1.pt --arch rnn_relu --inputs X.npy --labels y.npy "
                "--prior learned",),
    "bounds-table": ("spectral-analysis bounds-table --experiment zoo-addition --format md",),
    "spectra": ("spectral-analysis spectra lstm.pt --format csv",
                f"spectral-analysis spectra {ZOO_RNN}"),
    "analyze": ("spectral-analysis analyze rnn1.pt --arch rnn_relu --inputs X.npy --labels y.npy "
                "--out report/",),
    "experiments": ("spectral-analysis experiments --format md",
                    "spectral-analysis experiments --estimate table2-mnist --device cuda"),
    "run": ("spectral-analysis run fig1-addition --scale smoke --workers 2",
            "spectral-analysis run fig1-addition --scale smoke --scheduler asha --grace-period 2",
            "spectral-analysis run fig1-addition --scale smoke --search lr=loguniform:1e-4:1e-2 --samples 4",
            "spectral-analysis run table2-mnist@budget kru-copy --scale paper --time-budget 3600",
            "spectral-analysis run fig1-addition --max-failures 2 --tune-callback mlflow:experiment_name=f1"),
    "calibrate": ("spectral-analysis calibrate table2-mnist --steps 300",
                  "spectral-analysis calibrate fig1-addition --scale smoke --steps 60 --format csv"),
    "stop": ("spectral-analysis stop --out runs",),
    "park": ("spectral-analysis park fig1-addition --scale paper --out runs",),
    "zoo": ("spectral-analysis zoo --experiment fig1-addition --format csv",
            "spectral-analysis zoo --check"),
    "figures": ("spectral-analysis figures --experiment fig1-addition --out figures",),
    "landscape": ("spectral-analysis landscape --hidden 2 --length 3 --out landscape/",),
    "verify-symbolic": ("spectral-analysis verify-symbolic --only householder-gradients --md report.md",),
    "check-paper": ("spectral-analysis check-paper --quick --format md",),
}


def epilog(command: str) -> str:
    """The examples block of ``command``'s help."""
    return "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[command])
