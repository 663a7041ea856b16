"""The ``run`` command's Tune options as Tune objects: ``--search`` as Tune search domains and
``--tune-callback`` as Tune logger callbacks."""

from __future__ import annotations

import importlib
import json
from typing import Any

from spectral_analysis.cli.common import CommandError

SEARCH_DOMAINS = ("loguniform", "uniform", "randint", "choice")


def search_domains(specs: list[str]) -> dict[str, Any]:
    """``--search PATH=DOMAIN:ARGS`` as Tune domains: ``lr=loguniform:1e-4:1e-2``, ``hidden=choice:64,128``,
    ``model_options.r=uniform:0.01:0.1``, ``hidden=randint:32:129``."""
    from ray import tune

    domains = {}
    for spec in specs:
        path, _, text = spec.partition("=")
        kind, _, rest = text.partition(":")
        if not path or kind not in SEARCH_DOMAINS or not rest:
            raise CommandError(f"--search {spec!r}: expected PATH=DOMAIN:ARGS with DOMAIN one of "
                               f"{', '.join(SEARCH_DOMAINS)} (lr=loguniform:1e-4:1e-2, hidden=choice:64,128)")
        try:
            if kind == "choice":
                domains[path] = tune.choice([json.loads(v) if v[:1].isdigit() or v[:1] == "-" else v
                                             for v in rest.split(",")])
            else:
                low, high = (float(v) if kind != "randint" else int(v) for v in rest.split(":"))
                domains[path] = getattr(tune, kind)(low, high)
        except ValueError as error:
            raise CommandError(f"--search {spec!r}: {error}") from None
    return domains


# Tune's logger integrations by the name --tune-callback takes, with the package each needs
TUNE_LOGGERS = {
    "wandb": ("ray.air.integrations.wandb:WandbLoggerCallback", "wandb"),
    "mlflow": ("ray.air.integrations.mlflow:MLflowLoggerCallback", "mlflow"),
    "comet": ("ray.air.integrations.comet:CometLoggerCallback", "comet_ml"),
    "aim": ("ray.tune.logger.aim:AimLoggerCallback", "aim"),
}


def _option_value(text: str) -> Any:
    """A KEY=VALUE option's value: JSON where it parses (numbers, true, lists), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def tune_callbacks(specs: list[str]) -> list[Any]:
    """``--tune-callback LOGGER[:KEY=VALUE,...]`` as Tune callbacks: ``mlflow:experiment_name=rnn``,
    ``wandb:project=spectral``, ``package.module:Class[:KEY=VALUE,...]`` (any ``ray.tune.Callback``)."""
    from ray import tune

    made = []
    for spec in specs:
        name, _, rest = spec.partition(":")
        if name in TUNE_LOGGERS:
            target, package = TUNE_LOGGERS[name]
        else:  # package.module:Class[:options]
            class_name, _, rest = rest.partition(":")
            target, package = f"{name}:{class_name}", None
        module_name, _, class_name = target.partition(":")
        options = {}
        for pair in filter(None, rest.split(",")):
            key, equals, value = pair.partition("=")
            if not equals or not key.isidentifier():
                raise CommandError(f"--tune-callback {spec!r}: options are KEY=VALUE pairs separated by "
                                   f"commas, got {pair!r}")
            options[key] = _option_value(value)
        if not module_name or not class_name.isidentifier():
            raise CommandError(f"--tune-callback {spec!r}: expected one of {', '.join(TUNE_LOGGERS)} or "
                               "package.module:Class, then :KEY=VALUE,... options")
        try:
            if package is not None:
                importlib.import_module(package)
            made.append(getattr(importlib.import_module(module_name), class_name)(**options))
        except ImportError as error:
            raise CommandError(f"--tune-callback {spec!r} needs {package or module_name} installed "
                               f"({error})") from None
        except (AttributeError, TypeError, ValueError) as error:
            raise CommandError(f"--tune-callback {spec!r}: {error}") from None
        if not isinstance(made[-1], tune.Callback):
            raise CommandError(f"--tune-callback {spec!r}: {target} is not a ray.tune.Callback")
    return made
