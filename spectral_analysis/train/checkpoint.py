"""Checkpoints: one ``.safetensors`` file, tensors plus JSON metadata; loading runs no code.

Layout: tensors ``model/<name>`` (the model's state dict), ``optimizer/<i>/<key>`` and
``carry/<i>`` (training state for ``--resume``); safetensors metadata ``spectral_analysis`` (the
JSON below) and ``sha256`` (a digest of every tensor's name, dtype, shape and bytes, so a
tampered or damaged file is caught, since safetensors itself checks no content).

The JSON holds ``format`` (:data:`FORMAT`), ``format_version``, ``package_version``, ``model``
(``name``, sizes, ``options``: the arguments of ``build_model``), ``task`` (``name``,
``options``, ``kind``, ``length`` T, ``data_bound`` B, ``train_size`` m), ``step``, ``metrics``
and ``train`` (the training configuration). Writes are atomic: a temporary file in the same
directory, then ``os.replace``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import Tensor, nn

from spectral_analysis import __version__
from spectral_analysis.atomic import atomic_target
from spectral_analysis.nn import build_model
from spectral_analysis.train.schema import validate_metadata

FORMAT = "spectral-analysis-checkpoint"
FORMAT_VERSION = 2  # 2: the digest covers the metadata too; version 1 files (tensors only) still load
READABLE_VERSIONS = (1, 2)
WEIGHT_DTYPES = (torch.float32, torch.float64)
_PICKLE_MAGIC = (b"\x80", b"PK\x03\x04")  # pickle protocol >= 2, torch.save's zip archive


_SAFETENSORS_HEADER_LIMIT = 100_000_000  # safetensors refuses a JSON header longer than this


def _safetensors_prefix(head: bytes) -> bool:
    """Whether the first 9 bytes read as safetensors' own: a little-endian u64 header length within the
    format's limit, then the JSON header's ``{``. A header length whose low byte is 0x80 starts the file
    like a pickle, so this is asked before a damaged file is called one."""
    return (len(head) == 9 and head[8:9] == b"{"
            and int.from_bytes(head[:8], "little") <= _SAFETENSORS_HEADER_LIMIT)


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the file and the problem."""


@dataclass
class Checkpoint:
    model: nn.Module
    metadata: dict[str, Any]
    tensors: dict[str, Tensor]


def tensor_digest(tensors: dict[str, Tensor], metadata: str | None = None) -> str:
    """SHA-256 of every tensor's name, dtype, shape and bytes, and of the metadata JSON when given."""
    digest = hashlib.sha256()
    if metadata is not None:
        digest.update(metadata.encode())
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def save_checkpoint(path: str | Path, model: nn.Module, metadata: dict[str, Any],
                    extra: dict[str, Tensor] | None = None) -> None:
    """Write ``model``'s state and ``extra`` tensors with ``metadata`` atomically to ``path``."""
    path = Path(path)
    tensors = {f"model/{k}": v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    tensors.update({k: v.detach().contiguous().cpu() for k, v in (extra or {}).items()})
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "package_version": __version__,
            "model": model.config, **metadata}
    text = json.dumps(meta)
    header = {"spectral_analysis": text, "sha256": tensor_digest(tensors, text)}
    with atomic_target(path) as tmp:
        save_file(tensors, str(tmp), metadata=header)


def read_checkpoint(path: str | Path) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """Metadata and tensors of a checkpoint file, validated; :class:`CheckpointError` otherwise."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} is not a regular file (a FIFO, a device or a folder)"
                              if path.exists() else f"checkpoint not found: {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open has no iterator)
    except (SafetensorError, OSError, ValueError, RuntimeError) as error:
        with open(path, "rb") as f:
            head = f.read(9)
        if head.startswith(_PICKLE_MAGIC) and not _safetensors_prefix(head):
            raise CheckpointError(f"{path} is a pickle / torch.save file, not a safetensors checkpoint; "
                                  "it is not loaded because unpickling can run code (the analyzers read "
                                  "a PyTorch state_dict's weights alone: spectral-analysis analyze FILE, "
                                  "or spectra FILE for any network's)") from None
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CheckpointError(f"{path} is not a readable safetensors file (truncated or corrupt): "
                              f"{message}") from None
    if "spectral_analysis" not in header:
        raise CheckpointError(f"{path} is a safetensors file but not a spectral-analysis checkpoint "
                              "(no 'spectral_analysis' metadata)")
    try:
        meta = json.loads(header["spectral_analysis"])
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{path}: checkpoint metadata is not valid JSON ({error})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: metadata does not describe a {FORMAT}")
    if meta.get("format_version") not in READABLE_VERSIONS:
        raise CheckpointError(f"{path}: checkpoint format version {meta.get('format_version')!r} is not "
                              f"supported (this version reads {READABLE_VERSIONS})")
    covered = header["spectral_analysis"] if meta["format_version"] >= 2 else None
    if header.get("sha256") != tensor_digest(tensors, covered):
        what = "tensor or metadata" if covered is not None else "tensor"
        raise CheckpointError(f"{path}: {what} checksum mismatch, the file was modified or damaged")
    try:
        validate_metadata(meta)
    except ValueError as error:
        raise CheckpointError(f"{path}: {error}") from None
    return meta, tensors


def check_weights(state: dict[str, Tensor], expected: dict[str, Tensor], path: str | Path,
                  allow_nonfinite: bool = False) -> None:
    """Floating model tensors must be float32/float64 and (unless allowed) finite, integer buffers (a
    uRNN's permutation) of the model's own dtype: a one-line error otherwise."""
    for name, value in state.items():
        want = expected.get(name)
        if want is not None and not want.is_floating_point():
            if value.dtype != want.dtype:
                raise CheckpointError(f"{path}: buffer {name!r} is {value.dtype}, the model needs "
                                      f"{want.dtype}")
            continue
        if value.dtype not in WEIGHT_DTYPES:
            raise CheckpointError(f"{path}: weight {name!r} is {value.dtype}; the toolkit reads float32 or "
                                  "float64 weights (convert the model before saving)")
        if not allow_nonfinite and not bool(torch.isfinite(value).all()):
            bad = int((~torch.isfinite(value)).sum())
            raise CheckpointError(f"{path}: weight {name!r} has {bad} non-finite entries (NaN or inf): a "
                                  "diverged model (`spectral-analysis weights --allow-nonfinite` exports it "
                                  "anyway)")


def check_sizes(meta: dict[str, Any], state: dict[str, Tensor], path: str | Path) -> None:
    """The model the metadata describes, checked against the file's own tensors before it is built:
    its sizes and layer count against their shapes, then its weights, counted on the ``meta`` device
    (no memory), against theirs; a few KB of edited metadata cannot make a reader allocate gigabytes."""
    config = meta.get("model") or {}
    largest = max((d for t in state.values() for d in t.shape), default=0)
    for field in ("input_size", "hidden_size", "output_size"):
        if isinstance(config.get(field), int) and config[field] > largest:
            raise CheckpointError(f"{path}: the metadata's {field} {config[field]} is larger than any "
                                  f"dimension of the file's weights ({largest})")
    layers = (config.get("options") or {}).get("num_layers", 1)
    if isinstance(layers, int) and layers > len(state):
        raise CheckpointError(f"{path}: the metadata's num_layers {layers} is more than the file's "
                              f"{len(state)} weight tensors")
    with torch.device("meta"):
        skeleton = build_from_metadata(meta, path)
    described = sum(t.numel() for t in skeleton.state_dict().values())
    held = sum(t.numel() for t in state.values())
    if described > 4 * held + 4096:  # an older file may lack a few tensors its loader fills in; not this many
        raise CheckpointError(f"{path}: the metadata describes a model of {described} weights, the file "
                              f"holds {held}")


def build_from_metadata(meta: dict[str, Any], path: str | Path) -> nn.Module:
    config = meta.get("model")
    try:
        return build_model(config["name"], config["input_size"], config["hidden_size"],
                           config["output_size"], **config["options"])
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: the model in the metadata cannot be built: {error}") from None


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu",
                    allow_nonfinite: bool = False) -> Checkpoint:
    """Rebuild the model of a checkpoint from its metadata and load its tensors (no code runs). The model
    comes back in eval mode (no dropout): what analyzers read; ``.train()`` it to train on."""
    meta, tensors = read_checkpoint(path)
    state = {k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}
    check_sizes(meta, state, path)
    model = build_from_metadata(meta, path)
    check_weights(state, model.state_dict(), path, allow_nonfinite)
    dtypes = {v.dtype for v in state.values() if v.is_floating_point()}
    if len(dtypes) == 1:  # a model trained in float64 comes back in float64
        model = model.to(dtypes.pop())
    try:  # load_state_dict's own hooks translate the tensor names of older files
        result = model.load_state_dict(state, strict=False)
    except RuntimeError as error:
        mismatch = next((line.strip() for line in str(error).splitlines() if "size mismatch" in line),
                        str(error).splitlines()[0])
        raise CheckpointError(f"{path}: tensors do not fit the model in the metadata: {mismatch}") from None
    if result.missing_keys or result.unexpected_keys:
        raise CheckpointError(f"{path}: tensors do not match the model in the metadata "
                              f"(missing {sorted(result.missing_keys)[:3]}, "
                              f"unexpected {sorted(result.unexpected_keys)[:3]})")
    return Checkpoint(model.to(device).eval(), meta, tensors)
