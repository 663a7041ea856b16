"""The toolkit's common check record: one claim of a paper, the verdict and the evidence.

Every face that judges a claim (``landscape``, the symbolic checks, ``paper_checks/``) reports a JSON
object ``{"checks": [record, ...]}`` with records ``{source, claim, verdict, evidence, numbers}``:

- ``source``: where the claim is printed, e.g. ``"earlier version, Theorem 5"``;
- ``claim``: the claim in the paper's words or a faithful paraphrase; ``quote``: the paper's own
  words it rests on, verbatim (fragments joined by ``[...]``; a test finds each in the papers' text,
  read from ``SPECTRAL_ANALYSIS_PAPERS``);
- ``verdict``: ``holds`` (measured and agrees), ``differs`` (the printed formula or number is not what
  the measurement gives, though the claim's conclusion may survive), ``fails`` (a counterexample to
  the claim itself), ``inconclusive`` (a comparison whose seeds overlap: neither the claimed winner's
  worst seed beats the other's best, nor the reverse), ``unverified`` (the measurement cannot settle
  it, e.g. results below the paper's scale);
- ``scale`` and ``seeds``: for experimental claims, the scale of the kept results the verdict was
  drawn from (``paper``, ``budget`` or ``smoke``) and how many seeds; ``plateaued`` and ``stale``
  (``"k/n"``): how many of the grid's trials trained to a plateau, and how many no longer stand for the
  catalog's current entry (``None`` when none); ``None`` for the others;
- ``evidence``: one or two sentences with the measured numbers; ``numbers``: the same, machine-readable;
- ``derived`` and ``printed``: for formula checks, the expression derived from the definition and the
  one the paper prints (strings; ``None`` where the claim is not a formula).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

VERDICTS = ("holds", "differs", "fails", "inconclusive", "unverified")
QUOTE_GAP = "[...]"

# The earlier version's Section 6 (paper 000), quoted by both the symbolic and the numeric checks.
CLAIM1_RISK_QUOTE = (r"Claim 1. With linear recurrent neural networks, the population risk [...] "
                     r"= \|(YW - A)\Sigma^{1/2}\|_F^2 + C,$$")
CLAIM1_GRADIENT_QUOTE = (r"$$\nabla_W R[W] = (YW - A)\Sigma \left(I_d |2W| 3W^2| \cdots "
                         r"|tW^{t-1}\right)^{\top}$$")


@dataclass
class CheckRecord:
    """One verdict on one claim (see the module docstring for the fields)."""

    source: str
    claim: str
    verdict: str
    evidence: str
    numbers: dict[str, Any] = field(default_factory=dict)
    derived: str | None = None
    printed: str | None = None
    quote: str | None = None
    scale: str | None = None
    seeds: int | None = None
    plateaued: str | None = None  # "k/n": the grid's done trials that trained to a plateau
    stale: str | None = None  # "k/n": the grid's kept trials that the catalog's current entry would retrain

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def guarded(source: str, claim: str, quote: str | None,
            check: Callable[[], CheckRecord | list[CheckRecord]]) -> list[CheckRecord]:
    """``check()``'s records; if it raises, one ``fails`` record with the error as its evidence (a check
    that crashes on the paper's own construction is evidence against it, and never stops the run)."""
    try:
        result = check()
    except Exception as error:  # noqa: BLE001 -- any error is the evidence
        message = str(error).splitlines()[0] if str(error) else ""
        return [CheckRecord(source, claim, "fails", f"the check raised {type(error).__name__}: {message}",
                            {"error": type(error).__name__}, quote=quote)]
    return result if isinstance(result, list) else [result]


def verdict_tally(records: list[CheckRecord]) -> str:
    """``"44 holds, 19 differs, ..."``: how many records have each verdict."""
    return ", ".join(f"{sum(r.verdict == v for r in records)} {v}" for v in VERDICTS)


def checks_markdown(records: list[CheckRecord]) -> str:
    """A Markdown table: source, claim, verdict, evidence."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| source | claim | verdict | evidence |", "|---|---|---|---|"]
    lines += [f"| {cell(r.source)} | {cell(r.claim)} | **{r.verdict}** | {cell(r.evidence)} |"
              for r in records]
    return "\n".join(lines)


DISCREPANCY_VERDICTS = ("differs", "fails", "inconclusive")
BEGIN, END = "<!-- discrepancies:begin -->", "<!-- discrepancies:end -->"


def discrepancy_markdown(records: list[CheckRecord]) -> str:
    """One bullet per record whose verdict is not ``holds``/``unverified``: source, verdict, claim, the
    paper's words and the evidence (what the README's discrepancy list is generated from)."""
    lines = []
    for r in records:
        if r.verdict in DISCREPANCY_VERDICTS:
            quote = f' The paper: "{r.quote}".' if r.quote else ""
            lines.append(f"- **{r.source}** ({r.verdict}): {r.claim}.{quote} Evidence: {r.evidence}.")
    return "\n".join(lines)


def replace_marked_block(text: str, name: str, body: str) -> str:
    """``text`` with what lies between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` replaced."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text or end not in text:
        raise ValueError(f"no {begin} ... {end} block to regenerate")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def replace_discrepancies(text: str, records: list[CheckRecord]) -> str:
    """``text`` with the block between the discrepancy markers regenerated from ``records``."""
    return replace_marked_block(text, "discrepancies", discrepancy_markdown(records))


def select_checks(registry: dict[str, Any], only: list[str] | None, what: str) -> list[str]:
    """The names to run: ``only`` (validated against ``registry``) or all of them in order."""
    names = only if only else list(registry)
    unknown = [name for name in names if name not in registry]
    if unknown:
        raise ValueError(f"unknown {what}(s) {unknown}; choose from {list(registry)}")
    return names
