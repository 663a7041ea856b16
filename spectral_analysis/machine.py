"""The name of the machine a computation ran on, as results, estimates and checkpoints record it."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch


def machine_name(device: str) -> str:
    """The CPU model and core count, or the CUDA device's name.

    Example: ``machine_name("cpu")`` gives ``"Intel(R) Xeon(R) Processor, 2 cores"`` on this project's
    machines.
    """
    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (CUDA)"
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        model = names[0] if names else model
    return f"{model}, {os.cpu_count()} cores"
