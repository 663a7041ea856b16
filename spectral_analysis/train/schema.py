"""One schema for what the toolkit reads back: checkpoint metadata and ``metrics.jsonl`` rows.

Validated with pydantic on every read, so a file with a wrong type, a missing key, a size <= 0 or a
non-finite bound is refused with one line naming the file, the field and the value, instead of a
traceback (or a silently wrong answer) later. Unknown extra keys are kept (newer writers may add
some); the fields below are the ones the readers use.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spectral_analysis.data.base import TASK_KINDS
from spectral_analysis.nn import MODEL_NAMES

MAX_LENGTH = 10**6  # longer sequences than any task here: a larger T in a file is damage, not data
MAX_SIZE = 10**7

Size = Annotated[int, Field(ge=1, le=MAX_SIZE, strict=True)]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class ModelMetadata(_Lenient):
    name: str
    input_size: Size
    hidden_size: Size
    output_size: Size
    options: dict[str, Any]

    @field_validator("name")
    @classmethod
    def known_model(cls, name: str) -> str:
        if name not in MODEL_NAMES:
            raise ValueError(f"unknown model {name!r}; expected one of {MODEL_NAMES}")
        return name


class TaskMetadata(_Lenient):
    name: str
    options: dict[str, Any] = Field(default_factory=dict)
    kind: str | None = None
    length: Annotated[int, Field(ge=1, le=MAX_LENGTH, strict=True)] | None = None
    data_bound: float | None = None
    train_size: Annotated[int, Field(ge=1, strict=True)] | None = None

    @field_validator("kind")
    @classmethod
    def known_kind(cls, kind: str | None) -> str | None:
        if kind is not None and kind not in TASK_KINDS:
            raise ValueError(f"unknown task kind {kind!r}; expected one of {TASK_KINDS}")
        return kind

    @field_validator("data_bound")
    @classmethod
    def positive_bound(cls, bound: float | None) -> float | None:
        if bound is not None and not (math.isfinite(bound) and bound > 0):
            raise ValueError(f"the data bound must be a finite number > 0, got {bound}")
        return bound


class CheckpointMetadata(_Lenient):
    format: str
    format_version: int
    model: ModelMetadata
    task: TaskMetadata | None = None
    step: Annotated[int, Field(ge=0, strict=True)] | None = None
    elapsed: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    metrics: dict[str, dict[str, Any]] = Field(default_factory=dict)
    train: dict[str, Any] = Field(default_factory=dict)


class LogRow(_Lenient):
    """One line of ``metrics.jsonl``."""

    step: Annotated[int, Field(ge=0, strict=True)]
    phase: str
    elapsed: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None


def first_error(error: ValidationError) -> str:
    """``field.path: message (got value)`` of the first problem pydantic found."""
    problem = error.errors()[0]
    where = ".".join(str(part) for part in problem["loc"]) or "(top level)"
    message = problem["msg"].removeprefix("Value error, ")
    got = repr(problem.get("input"))
    got = got if len(got) <= 60 else got[:57] + "..."
    return f"field {where}: {message} (got {got})"


def validate_metadata(meta: Any) -> dict[str, Any]:
    """The metadata, checked against :class:`CheckpointMetadata`; ``ValueError`` naming the field."""
    try:
        CheckpointMetadata.model_validate(meta)
    except ValidationError as error:
        raise ValueError(f"checkpoint metadata {first_error(error)}") from None
    return meta


def validate_log_row(row: Any, line: int) -> dict[str, Any]:
    """A ``metrics.jsonl`` row, checked against :class:`LogRow`; ``ValueError`` naming the line."""
    try:
        LogRow.model_validate(row)
    except ValidationError as error:
        raise ValueError(f"line {line}: {first_error(error)}") from None
    return row
