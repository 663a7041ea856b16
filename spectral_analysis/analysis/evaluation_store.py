"""The finished stages of one certificate's evaluation, kept in a folder so that an interrupted run resumes
where it stopped: rerun the same command with the same folder (``certify --state DIR``).

A certificate at the papers' scale (pixel MNIST, T = 784) is hours on a CPU: the learned prior, Q's fit,
and Monte Carlo over tens of thousands of sampled networks, for the 0-1 certificate and again at each noise
scale of the derandomized one. Each stage, and each Monte Carlo pass (its integer counts and the seeded
generator's state), is written atomically as safetensors (no code runs on loading) as soon as it finishes.
A resumed run continues the same random streams, so it gives the same record as an uninterrupted one.
Each stage also records the seconds of work up to it (across every call that built the folder), so a
resumed evaluation's time is the time of the work it kept plus its own (:meth:`EvaluationStore.seconds`);
the work a killed call did after its last kept stage, done again, is counted once.

The folder is bound to what it evaluates: a fingerprint of the subject's weights, the data and every
option that changes the result. A folder written for another evaluation is refused, naming what differs.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import Tensor

from spectral_analysis.atomic import atomic_target, atomic_write_text, read_text_file

FINGERPRINT = "evaluation.json"


def digest(tensors: dict[str, Tensor] | list[Tensor]) -> str:
    """A SHA-256 of tensors' names, shapes, dtypes and bytes (a list: in order).

    ```python
    >>> digest([torch.zeros(2)]) == digest([torch.zeros(2)]) != digest([torch.ones(2)])
    True

    ```
    """
    items = tensors.items() if isinstance(tensors, dict) else enumerate(tensors)
    hasher = hashlib.sha256()
    for name, value in items:
        value = value.detach().cpu().contiguous()
        hasher.update(f"{name}:{tuple(value.shape)}:{value.dtype}".encode())
        hasher.update(value.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
    return hasher.hexdigest()


class EvaluationStore:
    """Stages of one evaluation in ``folder`` (nothing is kept when ``folder`` is None).

    ```python
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> store = EvaluationStore(folder, {"seed": 0})
    >>> store.keep("posterior", {"log_s": torch.zeros(3)})
    >>> EvaluationStore(folder, {"seed": 0}).stage("posterior")["log_s"].tolist()
    [0.0, 0.0, 0.0]

    >>> EvaluationStore(folder, {"seed": 0}).seconds() >= 0
    True

    ```
    """

    def __init__(self, folder: str | Path | None, fingerprint: dict[str, Any]) -> None:
        self.folder = None if folder is None else Path(folder)
        self.resumed: list[str] = []  # the stages read back, in order
        self.untimed: list[str] = []  # kept stages that recorded no seconds (folders of older versions)
        self._kept_seconds = 0.0  # the work up to the latest kept stage, over every call
        self._since = time.perf_counter()  # when this call's work after that stage began
        if self.folder is None:
            return
        if self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"{self.folder}: the evaluation's state folder is a file, not a folder")
        recorded = self.folder / FINGERPRINT
        wanted = json.loads(json.dumps(fingerprint))  # as it reads back
        if recorded.is_file():
            try:
                kept = json.loads(read_text_file(recorded, "an evaluation's fingerprint"))
            except json.JSONDecodeError as error:
                raise ValueError(f"{recorded}: not a readable fingerprint ({error.msg})") from None
            differs = sorted(k for k in set(kept) | set(wanted) if kept.get(k) != wanted.get(k))
            if differs:
                raise ValueError(f"{self.folder} holds the state of another evaluation (it differs in "
                                 f"{', '.join(differs)}): give another --state folder, or remove this one")
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_text(recorded, json.dumps(wanted, indent=2, sort_keys=True))
        for path in sorted(self.folder.glob("*.safetensors")):
            with safe_open(str(path), "pt") as kept_stage:
                seconds = (kept_stage.metadata() or {}).get("seconds")
            if seconds is None:
                self.untimed.append(path.stem)
            else:
                self._kept_seconds = max(self._kept_seconds, float(seconds))

    def _path(self, stage: str) -> Path:
        if not stage.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"a stage name is letters, digits, '-' and '_', got {stage!r}")
        return self.folder / f"{stage}.safetensors"

    def stage(self, stage: str) -> dict[str, Tensor] | None:
        """The tensors kept for ``stage``, or None when it has not finished (or nothing is kept)."""
        if self.folder is None or not self._path(stage).is_file():
            return None
        self.resumed.append(stage)
        return load_file(self._path(stage))

    def keep(self, stage: str, tensors: dict[str, Tensor]) -> None:
        """Write ``stage``'s tensors (atomically: a run killed mid-write leaves the previous state)."""
        if self.folder is None:
            return
        self._kept_seconds, self._since = self.seconds(), time.perf_counter()
        with atomic_target(self._path(stage)) as tmp:
            save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(tmp),
                      metadata={"seconds": repr(self._kept_seconds)})

    def seconds(self) -> float:
        """Seconds of work on this evaluation: up to its latest kept stage, over every call that added
        to the folder, plus this call's since then (without a folder: this call's)."""
        return self._kept_seconds + time.perf_counter() - self._since
