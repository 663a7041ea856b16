"""A grid of training runs as the catalog declares it: :class:`Experiment` (its variants, axes and scales)
and :class:`Trial` (one resolved run), with the merge order of the catalog's layers.

The file format and the resolution order are described in :mod:`spectral_analysis.experiments.catalog`,
which reads the TOML files into these objects.
"""

from __future__ import annotations

import collections
import copy
import itertools
import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from spectral_analysis.data import task_options
from spectral_analysis.nn.registry import resolve_options
from spectral_analysis.train import TrainConfig
from spectral_analysis.vocabulary import MAX_SEEDS, MAX_TRIALS, SCALES

# TrainConfig fields a catalog may set; out, seed, device and progress belong to the runner.
CONFIG_FIELDS = tuple(
    f.name for f in fields(TrainConfig) if f.name not in ("out", "seed", "device", "progress")
)
MERGED_FIELDS = ("model_options", "task_options", "optimizer_options")
_SCALE_KEYS = ("seeds", "stated", "unstated", "budget", "keep_models")
VARIANT_WORDS = ("row", "reading")  # a variant's printed row and its reading in words, not config fields
EVERY_SEED = "every seed"  # the one value of a scale's keep_models
TRAINING_LENGTH = ("steps", "epochs", "max_steps")  # what a budget scale sets itself
_KEY_SAFE = re.compile(r"[^A-Za-z0-9.+-]+")


def configuration_key(trial_key: str) -> str:
    """The configuration a trial key names, its seed dropped: ``rnn_length100_s2`` -> ``rnn_length100``."""
    return trial_key.rsplit("_s", 1)[0]


@dataclass(frozen=True)
class Trial:
    """One training run of a grid: its key, its variant and axis values, and its TrainConfig fields."""

    experiment: str
    scale: str
    key: str
    variant: str
    axes: dict[str, Any]
    seed: int
    config: dict[str, Any]
    keep_model: bool = False  # its final model is kept in results/ whether or not it is the zoo's seed

    def train_config(self, out: str | Path, device: str = "cpu", progress: bool = False) -> TrainConfig:
        return TrainConfig(
            out=str(out), seed=self.seed, device=device, progress=progress, **copy.deepcopy(self.config)
        )


@dataclass(frozen=True)
class Experiment:
    """An experiment of the catalog (see the module docstring for the file format)."""

    name: str
    source: str
    description: str
    path: Path
    base: dict[str, Any]
    variants: list[dict[str, Any]]
    axes: dict[str, list[Any]]
    scales: dict[str, dict[str, Any]]
    figure: str | None = None
    notes: list[str] = field(default_factory=list)
    selects: str | None = None  # the experiment this validation grid chooses its axis's value for
    stand_in: str | None = None  # the dataset that stands in for the paper's, in words

    def seeds(self, scale: str) -> int:
        """The scale's seed count as written (a non-integer is refused by :meth:`trials`)."""
        return self.scales[scale].get("seeds", 1)

    @property
    def budget(self) -> str | None:
        """The stated CPU budget of the ``budget`` scale (``None``: the experiment has none)."""
        return self.scales.get("budget", {}).get("budget")

    def _scale_layers(self, scale: str, variant: dict[str, Any]) -> list[dict[str, Any]]:
        """The scale's fields and the variant's overrides of them, in merge order: a budget scale lies on
        the paper scale without the paper's training length."""
        def own(name: str) -> dict[str, Any]:
            return {k: v for k, v in self.scales[name].items() if k not in _SCALE_KEYS}

        if scale != "budget":
            return [own(scale), variant.get(scale, {})]
        paper = [{k: v for k, v in layer.items() if k not in TRAINING_LENGTH}
                 for layer in (own("paper"), variant.get("paper", {}))]
        return [*paper, own("budget"), variant.get("budget", {})]

    def trials(self, scale: str, seeds: int | None = None, only: dict[str, str] | None = None) -> list[Trial]:
        """Every trial of the grid at ``scale`` (``seeds`` overrides the scale's count; ``only`` keeps the
        trials whose variant label, seed or axis values match, compared as text; a comma-separated value
        matches any of its items)."""
        if scale not in self.scales:
            raise ValueError(f"experiment {self.name!r} has no scale {scale!r}; it has {sorted(self.scales)}")
        count = self.seeds(scale) if seeds is None else seeds
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SEEDS:
            raise ValueError(f"{self.path}: seeds must be an integer in [1, {MAX_SEEDS}], got {count!r}")
        names = list(self.axes)
        size = len(self.variants) * math.prod(len(self.axes[a]) for a in names) * count
        if size > MAX_TRIALS:
            raise ValueError(f"{self.path}: the grid at scale {scale!r} has {size} trials, more than "
                             f"{MAX_TRIALS}; split it or select with --only")
        trials = []
        for variant in self.variants:
            own = {k: v for k, v in variant.items() if k not in ("label", *VARIANT_WORDS, *SCALES)}
            for values in itertools.product(*(self.axes[a] for a in names)):
                axes = dict(zip(names, values, strict=True))
                try:
                    config = _merge({}, self.base, own, *self._scale_layers(scale, variant))
                except ValueError as error:
                    raise ValueError(f"{self.path}: variant {variant['label']!r}: {error}") from None
                for path, value in axes.items():
                    _set_dotted(config, path, value)
                suffix = "".join(f"_{_short(a)}{key_text(v)}" for a, v in axes.items())
                for seed in range(count):
                    trial = Trial(
                        self.name,
                        scale,
                        f"{variant['label']}{suffix}_s{seed}",
                        variant["label"],
                        {_short(a): v for a, v in axes.items()},
                        seed,
                        copy.deepcopy(config),
                        self.scales[scale].get("keep_models") == EVERY_SEED,
                    )
                    if only is None or _matches(trial, only):
                        trials.append(trial)
        keys = collections.Counter(t.key for t in trials)
        if clashes := sorted(k for k, n in keys.items() if n > 1):
            raise ValueError(f"experiment {self.name!r}: axis values that differ give the same trial name "
                             f"{clashes} (names keep only letters, digits, '.', '+' and '-')")
        for trial in trials:
            _validate(self, trial)
        return trials

    def selectors(self, scale: str) -> dict[str, list[str]]:
        """What ``trials(..., only=...)`` selects by at ``scale``: each key with its values, as text."""
        keys: dict[str, list[str]] = {"variant": [], "seed": []}
        for trial in self.trials(scale):
            keys["variant"].append(trial.variant)
            keys["seed"].append(str(trial.seed))
            for axis, value in trial.axes.items():
                keys.setdefault(axis, []).append(str(value))
        return {key: list(dict.fromkeys(values)) for key, values in keys.items()}


def sampled_trial(trial: Trial, sample: dict[str, Any]) -> Trial:
    """``trial`` with the values a search drew (``{"lr": 0.0123, "model_options.r": 0.05}``) set in its
    configuration and named in its key before the seed (``rnn_length100_lr0.0123_s0``); a float is kept
    to 4 significant digits, so that the key names the configuration exactly.

    ```python
    >>> config = {"model": "rnn", "task": "addition", "steps": 10, "lr": 1e-3}
    >>> trial = Trial("x", "smoke", "rnn_s0", "rnn", {}, 0, config)
    >>> drawn = sampled_trial(trial, {"lr": 0.0123456})
    >>> drawn.key, drawn.config["lr"], drawn.axes
    ('rnn_lr0.01235_s0', 0.01235, {'lr': 0.01235})

    ```
    """
    values = {path: float(f"{v:.4g}") if isinstance(v, float) else v for path, v in sample.items()}
    config = copy.deepcopy(trial.config)
    for path, value in values.items():
        head = path.partition(".")[0]
        if head not in CONFIG_FIELDS or ("." in path and head not in MERGED_FIELDS):
            raise ValueError(f"a search over {path!r}: expected a training field "
                             f"({', '.join(CONFIG_FIELDS)}) or one of {', '.join(MERGED_FIELDS)} with a "
                             "dotted option")
        _set_dotted(config, path, value)
    stem, seed = trial.key.rsplit("_s", 1)
    suffix = "".join(f"_{_short(path)}{key_text(value)}" for path, value in values.items())
    drawn = Trial(trial.experiment, trial.scale, f"{stem}{suffix}_s{seed}", trial.variant,
                  {**trial.axes, **{_short(p): v for p, v in values.items()}}, trial.seed, config)
    try:
        drawn.train_config("unused").validate()
        resolve_options(config["model"], config.get("model_options", {}))
    except ValueError as error:
        raise ValueError(f"trial {drawn.key}: {error}") from None
    return drawn


def _short(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def key_text(value: Any) -> str:
    return _KEY_SAFE.sub("-", str(value).lower() if isinstance(value, bool) else str(value)).strip("-")


def _matches(trial: Trial, only: dict[str, str]) -> bool:
    for key, wanted in only.items():
        if key in ("variant", "model_label", "label"):
            have = trial.variant
        elif key == "seed":
            have = trial.seed
        elif key in trial.axes:
            have = trial.axes[key]
        else:
            return False
        if str(have) not in wanted.split(","):
            return False
    return True


def _merge(target: dict[str, Any], *layers: dict[str, Any]) -> dict[str, Any]:
    for layer in layers:
        for key, value in layer.items():
            if key in MERGED_FIELDS:
                if not isinstance(value, dict):
                    raise ValueError(f"{key} must be a table (e.g. {{ length = 5 }}), got {value!r}")
                target[key] = {**target.get(key, {}), **copy.deepcopy(value)}
            else:
                target[key] = copy.deepcopy(value)
    return target


def _set_dotted(config: dict[str, Any], path: str, value: Any) -> None:
    head, _, rest = path.partition(".")
    if rest:
        config.setdefault(head, {})[rest] = value
    else:
        config[head] = value


def _validate(experiment: Experiment, trial: Trial) -> None:
    where = f"{experiment.path}: trial {trial.key}"
    unknown = sorted(set(trial.config) - set(CONFIG_FIELDS))
    if unknown:
        raise ValueError(
            f"{where}: unknown training field(s) {unknown}; expected some of {list(CONFIG_FIELDS)}"
        )
    for name in ("model", "task"):
        if name not in trial.config:
            raise ValueError(f"{where}: no {name!r} given")
    try:
        trial.train_config("unused").validate()
        resolve_options(trial.config["model"], trial.config.get("model_options", {}))
        unknown = sorted(set(trial.config.get("task_options", {})) - set(task_options(trial.config["task"])))
        if unknown:
            raise ValueError(f"task {trial.config['task']!r} does not take option(s) {unknown}")
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
