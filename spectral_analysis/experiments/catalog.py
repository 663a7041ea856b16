"""The experiments catalog: one TOML file per experiment of the papers, each a grid of training runs.

A file declares ``name``, ``source`` (the paper and figure or table), ``description``, a ``[base]``
table of :class:`~spectral_analysis.train.TrainConfig` fields shared by every trial, a list of
``[[variants]]`` (a ``label`` and the fields that differ: the model, its options, its size), optional
``[axes]`` (a dotted ``TrainConfig`` field, e.g. ``"task_options.length"``, and its values) and one
``[scales.<scale>]`` table per scale, ``paper`` and ``smoke``: ``seeds``, ``stated`` (the paper's own
words for its sizes), ``unstated`` (what the paper leaves out and what was chosen) and the fields that
make the sizes of that scale. A variant may carry its own ``[variants.<scale>]`` overrides. A variant that
trains a row the paper prints under another label, by another reading of its recipe than the paper states
(the field's recipe, the released code's settings), names that row in ``row`` and the reading in words in
``reading``, the two together (:func:`printed_row`): the tables compare it with that row's
printed number and say by which reading. A scale whose
networks are analyzed seed by seed (certificates of each seed's network) says ``keep_models = "every
seed"``: ``results/`` then keeps every seed's final model, not only the zoo seed's
(:func:`~spectral_analysis.experiments.results.zoo_seed`).

A validation grid names in ``selects`` the experiment it chooses a setting for (a value a paper says
it cross-validated): its one axis is that setting, and the value with the best validation metric is the
one its variants use in the selected experiment (:func:`~spectral_analysis.experiments.reading.selection`
reads it). Like the paper's own validation, it may keep fewer seeds than a grid a verdict is drawn from.

An experiment that runs on another dataset than the paper's, because the paper's does not ship, says so
in ``stand_in`` (e.g. "music21's 371 Bach chorales in place of the paper's JSB Chorales"): its paper
scale is then the paper's sizes on that dataset, not the paper's experiment, and no verdict on the
paper's claim is drawn from it (:func:`~spectral_analysis.paper.kept.gate`).

An experiment whose paper scale needs a GPU may add ``[scales.budget]``: the paper's sizes trained for a
stated CPU budget. It names the budget in ``budget`` (e.g. "4 of the paper's 20 epochs, on the CPU")
and gives the training length (``steps`` or ``epochs``); every other field comes from the paper scale
(the paper's ``steps``, ``epochs`` and ``max_steps`` do not carry over), then its own overrides.

A trial's configuration is resolved in this order, later winning, with ``model_options`` and
``task_options`` merged key by key: base, variant, scale, the variant's scale overrides, the axis
values, the seed. Its key, ``<label>[_<axis><value>...]_s<seed>``, names its run directory and its
kept results (``zoo:<experiment>/<key>``).
"""

from __future__ import annotations

import collections
import copy
import functools
import itertools
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from spectral_analysis.atomic import read_text_file
from spectral_analysis.data import task_options
from spectral_analysis.io.zoo import PLAIN_NAME
from spectral_analysis.nn.registry import resolve_options
from spectral_analysis.train import TrainConfig
from spectral_analysis.vocabulary import MAX_SEEDS, MAX_TRIALS, REQUIRED_SCALES, SCALES

# TrainConfig fields a catalog may set; out, seed, device and progress belong to the runner.
CONFIG_FIELDS = tuple(
    f.name for f in fields(TrainConfig) if f.name not in ("out", "seed", "device", "progress")
)
MERGED_FIELDS = ("model_options", "task_options", "optimizer_options")
_SCALE_KEYS = ("seeds", "stated", "unstated", "budget", "keep_models")
_VARIANT_WORDS = ("row", "reading")  # a variant's printed row and its reading in words, not config fields
EVERY_SEED = "every seed"  # the one value of a scale's keep_models
TRAINING_LENGTH = ("steps", "epochs", "max_steps")  # what a budget scale sets itself
_KEY_SAFE = re.compile(r"[^A-Za-z0-9.+-]+")


def default_catalog_dir() -> Path:
    """``$SPECTRAL_ANALYSIS_EXPERIMENTS``, else the catalog shipped in the package (``catalog/``)."""
    env = os.environ.get("SPECTRAL_ANALYSIS_EXPERIMENTS")
    return Path(env) if env else Path(__file__).resolve().parents[1] / "catalog"



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
            own = {k: v for k, v in variant.items() if k not in ("label", *_VARIANT_WORDS, *SCALES)}
            for values in itertools.product(*(self.axes[a] for a in names)):
                axes = dict(zip(names, values, strict=True))
                try:
                    config = _merge({}, self.base, own, *self._scale_layers(scale, variant))
                except ValueError as error:
                    raise ValueError(f"{self.path}: variant {variant['label']!r}: {error}") from None
                for path, value in axes.items():
                    _set_dotted(config, path, value)
                suffix = "".join(f"_{_short(a)}{_key_text(v)}" for a, v in axes.items())
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
    suffix = "".join(f"_{_short(path)}{_key_text(value)}" for path, value in values.items())
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


def _key_text(value: Any) -> str:
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


def _table(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ValueError(f"{path}: [{key}] must be a table, got {type(value).__name__}")
    return value


def load_experiment(path: str | Path) -> Experiment:
    """Read and check one catalog file; ``ValueError`` naming the file and the problem otherwise. A file
    read before with the same text gives the same (frozen) experiment without resolving its grid again."""
    path = Path(path)
    return _parsed_experiment(path, read_text_file(path, "experiment file", limit=2 ** 20))


@functools.lru_cache(maxsize=256)
def _parsed_experiment(path: Path, text: str) -> Experiment:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"cannot read experiment file {path}: {error}") from None
    for key in ("name", "source", "description"):
        if not isinstance(data.get(key), str):
            raise ValueError(f"{path}: {key!r} must be a string")
    if not PLAIN_NAME.fullmatch(data["name"]):
        raise ValueError(f"{path}: the experiment name {data['name']!r} must be a plain name (letters, "
                         "digits and _ . = + -): it names folders under --out and --results")
    variants = data.get("variants")
    if not isinstance(variants, list) or not variants:
        raise ValueError(f"{path}: needs at least one [[variants]] entry")
    labels = [v.get("label") for v in variants]
    if any(not isinstance(label, str) or _key_text(label) != label for label in labels):
        raise ValueError(f"{path}: every variant needs a label of letters, digits, '.' and '-'; got {labels}")
    if len(set(labels)) != len(labels):
        raise ValueError(f"{path}: variant labels repeat: {labels}")
    for variant in variants:
        words = {k: variant[k] for k in _VARIANT_WORDS if k in variant}
        if words and (len(words) != len(_VARIANT_WORDS) or variant["row"] == variant["label"]
                      or not all(isinstance(w, str) and w.strip() for w in words.values())):
            raise ValueError(f"{path}: variant {variant['label']!r}: 'row' (the printed row it trains, not "
                             "its own label) and 'reading' (the other reading it trains that row by, in "
                             f"words) come together, as non-empty text; got {words}")
    axes = _table(data, "axes", path)
    for name, values in axes.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"{path}: axis {name!r} needs a non-empty list of values")
    scales = _table(data, "scales", path)
    missing = [s for s in REQUIRED_SCALES if s not in scales]
    if missing:
        raise ValueError(f"{path}: scale(s) {missing} missing; every experiment declares "
                         f"{list(REQUIRED_SCALES)}")
    unknown = [s for s in scales if s not in SCALES]
    if unknown:
        raise ValueError(f"{path}: unknown scale(s) {unknown}; the scales are {list(SCALES)}")
    if not isinstance(scales["paper"].get("stated"), str):
        raise ValueError(f"{path}: [scales.paper] needs 'stated', the paper's words for its sizes")
    selects = data.get("selects")
    if selects is not None and (not isinstance(selects, str) or len(axes) != 1):
        raise ValueError(f"{path}: 'selects' names one experiment, and its grid has one axis (the setting "
                         f"it validates); got selects = {selects!r} with axes {list(axes)}")
    stand_in = data.get("stand_in")
    if stand_in is not None and (not isinstance(stand_in, str) or not stand_in.strip()):
        raise ValueError(f"{path}: 'stand_in' says in words which dataset stands in for the paper's; "
                         f"got {stand_in!r}")
    kept = {name: table["keep_models"] for name, table in scales.items() if "keep_models" in table}
    if any(value != EVERY_SEED for value in kept.values()):
        raise ValueError(f"{path}: keep_models = {EVERY_SEED!r} keeps every seed's model; got {kept}")
    budget = scales.get("budget")
    if budget is not None and (not isinstance(budget.get("budget"), str)
                               or not any(k in budget for k in ("steps", "epochs"))):
        raise ValueError(f"{path}: [scales.budget] needs 'budget' (what the CPU budget is, in words) and "
                         "its own 'steps' or 'epochs'")
    experiment = Experiment(
        data["name"],
        data["source"],
        data["description"],
        path,
        _table(data, "base", path),
        variants,
        axes,
        scales,
        data.get("figure"),
        list(data.get("notes", [])),
        selects,
        stand_in,
    )
    for scale in scales:
        experiment.trials(scale)  # resolves and validates every trial of the grid
    return experiment


def load_catalog(directory: str | Path | None = None) -> dict[str, Experiment]:
    """Every ``*.toml`` of the catalog directory, by experiment name."""
    root = Path(directory) if directory else default_catalog_dir()
    if not root.is_dir():
        raise ValueError(f"experiments catalog not found: {root} is not a directory")
    catalog: dict[str, Experiment] = {}
    for path in sorted(root.glob("*.toml")):
        experiment = load_experiment(path)
        if experiment.name in catalog:
            raise ValueError(
                f"experiment {experiment.name!r} is declared twice ({catalog[experiment.name].path}, {path})"
            )
        catalog[experiment.name] = experiment
    unknown = {e.name: e.selects for e in catalog.values() if e.selects and e.selects not in catalog}
    if unknown:
        raise ValueError(f"validation grid(s) select experiments the catalog lacks: {unknown}")
    return catalog


def printed_row(experiment: str, label: str) -> tuple[str, str | None]:
    """The row of the paper's table that the variant ``label`` of ``experiment`` trains, and the reading of
    the recipe it trains it by, in words (``None``: as the paper states it). A variant or experiment the
    catalog does not declare (a kept row of a variant since removed) is its own row.

    ```python
    >>> printed_row("table2-lstm-field", "lstm-field")[0]
    'lstm'
    >>> printed_row("table3-ptb", "lstm-1x128")
    ('lstm-1x128', None)

    ```
    """
    catalog = load_catalog()
    variants = catalog[experiment].variants if experiment in catalog else []
    variant = next((v for v in variants if v["label"] == label), {})
    return variant.get("row", label), variant.get("reading")


def find_experiment(name: str, directory: str | Path | None = None) -> Experiment:
    catalog = load_catalog(directory)
    if name not in catalog:
        raise ValueError(f"unknown experiment {name!r}; the catalog has {sorted(catalog)}")
    return catalog[name]
