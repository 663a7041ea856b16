"""What a run keeps beside its model: the run directory's lock, the resume check against its
``config.json``, and the training state a checkpoint carries (optimizer moments, the hidden state a
streamed task carries across batches) as named tensors, so that a checkpoint loads without pickle."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

import torch
from torch import Tensor

from spectral_analysis.atomic import exclusive_lock, read_text_file
from spectral_analysis.train.config import RESUMABLE_CHANGES, TrainConfig, field_default


def lock_run_directory(out: Path) -> IO[str]:
    """An exclusive lock on ``out/.lock`` held while this process trains into ``out`` (released when the
    returned file is closed or the process ends); a second writer gets one line naming the holder."""
    busy = f"{out} is locked: another process (pid {{pid}}) is training into it"
    return exclusive_lock(out / ".lock", busy)


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> dict[str, Tensor]:
    return {f"optimizer/{i}/{key}": value for i, state in optimizer.state_dict()["state"].items()
            for key, value in state.items() if isinstance(value, Tensor)}


def restore_optimizer(optimizer: torch.optim.Optimizer, tensors: dict[str, Tensor]) -> None:
    state: dict[int, dict[str, Tensor]] = {}
    for name, value in tensors.items():
        if name.startswith("optimizer/"):
            _, index, key = name.split("/", 2)
            state.setdefault(int(index), {})[key] = value
    optimizer.load_state_dict({"state": state, "param_groups": optimizer.state_dict()["param_groups"]})


def carry_tensors(carry) -> dict[str, Tensor]:
    if carry is None:
        return {}
    parts = carry if isinstance(carry, tuple) else (carry,)
    return {f"carry/{i}": t for i, t in enumerate(parts)}


def restore_carry(tensors: dict[str, Tensor], device: torch.device):
    parts = [tensors[f"carry/{i}"].to(device) for i in range(2) if f"carry/{i}" in tensors]
    if not parts:
        return None
    return tuple(parts) if len(parts) == 2 else parts[0]


def resume_conflicts(config: TrainConfig, parked_copy: str | Path | None = None) -> list[str]:
    """What keeps the run in ``config.out`` (or its ``parked_copy`` elsewhere) from being resumed with
    ``config``: the fields that changed (beyond :data:`RESUMABLE_CHANGES`), each as "key was X in this
    run, now Y"; ``ValueError`` when its ``config.json`` is unreadable or holds no training configuration.
    ``out`` is never compared: a run moved or copied to another folder (or parked on another machine) is
    the same run."""
    run_dir = Path(config.out if parked_copy is None else parked_copy)
    config_file = run_dir / "config.json"
    try:
        stored = json.loads(read_text_file(config_file, "run configuration", limit=2 ** 24))
    except (ValueError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot resume: {config_file} is unreadable ({error})") from None
    if not isinstance(stored, dict) or not isinstance(stored.get("train"), dict):
        raise ValueError(f"cannot resume: {config_file} holds no training configuration (no 'train' object)")
    return _changed(config, stored["train"], "in this run")


def checkpoint_conflicts(config: TrainConfig, recorded: dict[str, Any]) -> list[str]:
    """What ``config`` changed against the configuration a checkpoint recorded when it was written (its
    metadata's ``train``), beyond :data:`RESUMABLE_CHANGES`: an edited ``config.json`` that agrees with
    the command but not with the weights it would continue."""
    return _changed(config, recorded, "when the checkpoint was written")


def _changed(config: TrainConfig, stored: dict[str, Any], where: str) -> list[str]:
    conflicts = []
    for key, value in asdict(config).items():
        if key == "out" or key in RESUMABLE_CHANGES:
            continue
        before = stored[key] if key in stored else field_default(key)
        if json.loads(json.dumps(before)) != json.loads(json.dumps(value)):  # a tuple reads as a list
            conflicts.append(f"{key} was {before!r} {where}, now {value!r}")
    return conflicts
