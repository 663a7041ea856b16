"""What the analyzers analyze: one view ("subject") of a recurrent model, whatever it came from.

:func:`load` takes a toolkit checkpoint, a ``zoo:`` name, a PyTorch ``state_dict`` file (``torch.save``,
read with ``weights_only=True`` so no code runs, or safetensors) or an in-memory ``nn.Module``, and
returns a :class:`Subject`: the model as one of the toolkit's recurrent classes (so it has the one
transition interface: dense W, step function, step Jacobian), where it came from, and every
assumption the import made. ``nn.RNN`` (tanh / relu, any ``num_layers``, with or without biases),
``nn.GRU`` and ``nn.LSTM`` import with an optional ``nn.Linear`` head; an ``nn.RNN`` whose
``weight_hh_l*`` carry :func:`~spectral_analysis.nn.svd_parametrize` imports as a Spectral-RNN.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file
from torch import Tensor, nn
from torch.nn.utils import parametrize

from spectral_analysis.io.importers import SubjectError, import_state_dict, recurrent_prefix
from spectral_analysis.io.zoo import ZOO_PREFIX, resolve_checkpoint
from spectral_analysis.nn import RecurrentModel, SVDParametrization
from spectral_analysis.train.checkpoint import load_checkpoint
from spectral_analysis.vocabulary import ARCHITECTURES


@dataclass
class Subject:
    """A recurrent model as the analyzers see it, with its provenance."""

    model: RecurrentModel
    source: str
    convention: str  # "toolkit checkpoint" | "torch.save state_dict" | "safetensors state_dict" | "nn.Module"
    architecture: str  # the toolkit model name, or rnn_tanh / rnn_relu / gru / lstm for imports
    assumptions: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)  # a toolkit checkpoint's metadata ({} for imports)

    @property
    def imported(self) -> bool:
        return self.convention != "toolkit checkpoint"

    @property
    def model_config(self) -> dict[str, Any]:
        return getattr(self.model, "config", {})

    def describe(self) -> dict[str, Any]:
        """What every analyzer's JSON reports about its subject."""
        return {"source": self.source, "convention": self.convention, "architecture": self.architecture,
                "assumptions": list(self.assumptions)}


def as_subject(source: Subject | str | Path | nn.Module) -> Subject:
    """What an analyzer takes: a :class:`Subject` as it is, anything else through :func:`load`."""
    return source if isinstance(source, Subject) else load(source)


def as_recurrent_model(source: Subject | str | Path | nn.Module) -> RecurrentModel:
    """The toolkit recurrent model behind a subject, a module (a user's ``nn.RNN`` / ``nn.GRU`` /
    ``nn.LSTM``, alone or with a head) or a file, for the analyzers of the recurrence."""
    if isinstance(source, RecurrentModel):
        return source
    return as_subject(source).model


def load(source: str | Path | nn.Module, arch: str | None = None, head_prefix: str | None = None,
         device: str | torch.device = "cpu", allow_nonfinite: bool = False,
         feedforward: bool = False) -> Subject:
    """The :class:`Subject` behind a path, a ``zoo:`` name or a module (see the module docstring).

    ``arch`` forces ``rnn_tanh|rnn_relu|gru|lstm`` (a state_dict does not record nn.RNN's
    non-linearity: tanh is assumed); ``head_prefix`` names the read-out (e.g. ``"fc"``);
    ``allow_nonfinite`` reads a model with NaN/inf weights (refused by default); ``feedforward`` also
    accepts a toolkit checkpoint of a feed-forward net (for the analyzers that take any classifier).
    """
    if arch is not None and arch not in ARCHITECTURES:
        raise SubjectError(f"--arch (arch=) must be one of {ARCHITECTURES}, got {arch!r}")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise SubjectError(f"--device (device=) {device}: this torch sees no CUDA device "
                           "(torch.cuda.is_available() is False); use cpu")
    if isinstance(source, nn.Module):
        subject = _from_module(source, arch, head_prefix)
        subject.model.to(device)
        return subject
    text = str(source)
    path = _model_file(text)
    if _is_toolkit_checkpoint(path):
        checkpoint = load_checkpoint(path, device, allow_nonfinite)
        if not (feedforward or isinstance(checkpoint.model, RecurrentModel)):
            raise SubjectError(f"{path} holds a {type(checkpoint.model).__name__}, not a recurrent model")
        name = checkpoint.metadata["model"]["name"]
        return Subject(checkpoint.model, text, "toolkit checkpoint", name, [], checkpoint.metadata)
    state, convention, recorded = _read_state_dict(path)
    _check_imported(state, path, allow_nonfinite)
    model, architecture, assumptions = import_state_dict(state, arch, head_prefix, None, recorded)
    return Subject(model.to(device), text, convention, architecture, assumptions)


def load_weights(source: str | Path, allow_nonfinite: bool = False) -> nn.Module | dict[str, Tensor]:
    """A model file's weights as they are, for the readers that need no architecture (per-matrix
    spectra): a toolkit checkpoint's (or ``zoo:`` entry's) model, else the file's state dict under its
    own keys, nothing imported or assumed (an MLP's or a convolution's file as well as a recurrent one's).

    ```python
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "mlp.pt"
    >>> torch.save(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).state_dict(), path)
    >>> sorted(load_weights(path))
    ['0.bias', '0.weight', '2.bias', '2.weight']

    ```
    """
    text = str(source)
    path = _model_file(text)
    if _is_toolkit_checkpoint(path):
        return load_checkpoint(path, "cpu", allow_nonfinite).model
    state, _, _ = _read_state_dict(path)
    _check_imported(state, path, allow_nonfinite)
    return state


def _model_file(text: str) -> Path:
    """The file a path or a ``zoo:`` name points at, refused unless it is a regular file."""
    path = resolve_checkpoint(text) if text.startswith(ZOO_PREFIX) else Path(text)
    if not path.is_file():
        raise SubjectError(f"model file {path} is not a regular file (a FIFO, a device or a folder)"
                           if path.exists() else f"model file not found: {path}")
    return path


def _check_imported(state: dict[str, Tensor], path: Path, allow_nonfinite: bool) -> None:
    for name, value in state.items():
        if not value.is_floating_point():
            continue  # integer entries are no weights of the cells imported here (listed as ignored)
        if value.dtype not in (torch.float32, torch.float64):
            raise SubjectError(f"{path}: {name!r} is {value.dtype}; the toolkit reads float32 or float64 "
                               "weights")
        if not allow_nonfinite and not bool(torch.isfinite(value).all()):
            raise SubjectError(f"{path}: {name!r} has non-finite entries (NaN or inf); --allow-nonfinite "
                               "(allow_nonfinite=True) reads it anyway")


def _is_toolkit_checkpoint(path: Path) -> bool:
    try:
        with safe_open(str(path), framework="pt") as f:
            return "spectral_analysis" in (f.metadata() or {})
    except (SafetensorError, OSError, ValueError, RuntimeError):
        return False


def _recorded_activation(loaded: dict) -> str | None:
    """An nn.RNN's non-linearity where the file records it: a Lightning checkpoint's ``hyper_parameters``
    (``nonlinearity``, at its top level or one level down)."""
    hyper = loaded.get("hyper_parameters") or loaded.get("hparams")
    if not isinstance(hyper, dict):
        return None
    levels = [hyper, *(inner for inner in hyper.values() if isinstance(inner, dict))]
    found = {level["nonlinearity"] for level in levels if isinstance(level.get("nonlinearity"), str)}
    if len(found) == 1 and (value := found.pop()) in ("tanh", "relu"):
        return value
    return None


def _read_state_dict(path: Path) -> tuple[dict[str, Tensor], str, str | None]:
    """Tensors of a safetensors file or a ``torch.save`` file read with ``weights_only=True``, and an
    nn.RNN's non-linearity where the file records it."""
    try:
        return load_file(str(path)), "safetensors state_dict", None
    except (SafetensorError, OSError, ValueError, RuntimeError):
        pass
    with open(path, "rb") as f:
        head = f.read(4)
    if not head.startswith((b"\x80", b"PK\x03\x04")):  # a pickle (protocol >= 2) or torch.save's zip
        raise SubjectError(f"{path} is neither a safetensors nor a torch.save file")
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = next((line for line in lines if "unsupported" in line.lower()), lines[0] if lines else "")
        raise SubjectError(f"{path} needs more than weights to load ({reason.rstrip('.')}); refused "
                           "because unpickling objects can run code: save model.state_dict()") from None
    except (RuntimeError, EOFError, OSError, ValueError, SafetensorError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise SubjectError(f"{path} is neither a safetensors nor a torch.save file ({message})") from None
    recorded = _recorded_activation(loaded) if isinstance(loaded, dict) else None
    if isinstance(loaded, dict):
        for key in ("state_dict", "model_state_dict", "model"):
            if isinstance(loaded.get(key), dict) and all(isinstance(v, Tensor) for v in loaded[key].values()):
                loaded = loaded[key]
                break
    if not (isinstance(loaded, dict) and loaded and all(isinstance(v, Tensor) for v in loaded.values())):
        raise SubjectError(f"{path} holds a {type(loaded).__name__}, not a state_dict of tensors")
    return dict(loaded), "torch.save state_dict", recorded


def _from_module(module: nn.Module, arch: str | None, head_prefix: str | None) -> Subject:
    if isinstance(module, RecurrentModel):
        name = getattr(module, "config", {}).get("name", type(module).__name__)
        return Subject(module, f"<in-memory {type(module).__name__}>", "nn.Module", name)
    dense, spectral = {}, {}
    for owner_name, owner in module.named_modules():
        if not parametrize.is_parametrized(owner):
            continue
        for tensor_name, plist in owner.parametrizations.items():
            key = f"{owner_name}.{tensor_name}" if owner_name else tensor_name
            dense[key] = getattr(owner, tensor_name).detach()
            if isinstance(plist[0], SVDParametrization):
                spectral[key] = (plist[0], plist.original0.detach(), plist.original1.detach(),
                                 plist.original2.detach())
    state = {k: v for k, v in module.state_dict().items() if ".parametrizations." not in f".{k}"}
    state.update(dense)
    rnns = {f"{name}." if name else "": m.nonlinearity for name, m in module.named_modules()
            if isinstance(m, nn.RNN)}
    prefix = recurrent_prefix(state)
    if arch is None and prefix in rnns:  # a module, unlike a state_dict, knows its non-linearity
        arch = f"rnn_{rnns[prefix]}"
    model, architecture, assumptions = import_state_dict(state, arch, head_prefix, spectral)
    return Subject(model, f"<in-memory {type(module).__name__}>", "nn.Module", architecture, assumptions)
