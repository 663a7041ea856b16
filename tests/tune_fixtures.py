"""Tune callbacks the sweep tests hand to a sweep: one that records what Tune receives (given through
`run --tune-callback tune_fixtures:EvaluationRecorder:path=...`), one that loses a trial's worker."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from ray import tune


class EvaluationRecorder(tune.Callback):
    """Appends each result Tune receives to ``path`` as a JSON line (trial, step, score, final or not)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        line = {"trial": trial.config["spec"]["trial"]["key"], "step": result.get("step"),
                "score": result.get("valid_score"), "final": "trial_status" in result}
        with self.path.open("a") as log:
            log.write(json.dumps(line) + "\n")


class LoseWorkerOnce(tune.Callback):
    """At the second evaluation of a trial of ``experiment`` Tune receives, kill its worker (SIGKILL) and
    delete its run directory, as the loss of a node with a local disk would; the step it was lost at goes
    to ``record``. (Killed at its first evaluation, the trial restarted afresh in a trial run: Tune had not
    registered that result's checkpoint yet. By the second, the first one's is registered.)"""

    def __init__(self, experiment: str, record: Path) -> None:
        self.experiment, self.record, self.seen = experiment, record, 0

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        spec = trial.config["spec"]
        if spec["trial"]["experiment"] != self.experiment or "trial_status" in result:
            return
        self.seen += 1
        if self.seen != 2:
            return
        os.kill(result["pid"], signal.SIGKILL)
        status = Path(f"/proc/{result['pid']}/status")
        deadline = time.time() + 30
        while time.time() < deadline:  # gone, or a zombie its parent has not reaped yet
            try:
                if "\nState:\tZ" in status.read_text():
                    break
            except OSError:
                break
            time.sleep(0.01)
        shutil.rmtree(spec["run_dir"])
        self.record.write_text(str(result["step"]))
