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

import functools
import os
import tomllib
from pathlib import Path
from typing import Any

from spectral_analysis.atomic import read_text_file
from spectral_analysis.experiments.grid import EVERY_SEED, VARIANT_WORDS, Experiment, key_text
from spectral_analysis.io.zoo import PLAIN_NAME
from spectral_analysis.vocabulary import REQUIRED_SCALES, SCALES


def default_catalog_dir() -> Path:
    """``$SPECTRAL_ANALYSIS_EXPERIMENTS``, else the catalog shipped in the package (``catalog/``)."""
    env = os.environ.get("SPECTRAL_ANALYSIS_EXPERIMENTS")
    return Path(env) if env else Path(__file__).resolve().parents[1] / "catalog"


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
    if any(not isinstance(label, str) or key_text(label) != label for label in labels):
        raise ValueError(f"{path}: every variant needs a label of letters, digits, '.' and '-'; got {labels}")
    if len(set(labels)) != len(labels):
        raise ValueError(f"{path}: variant labels repeat: {labels}")
    for variant in variants:
        words = {k: variant[k] for k in VARIANT_WORDS if k in variant}
        if words and (len(words) != len(VARIANT_WORDS) or variant["row"] == variant["label"]
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
