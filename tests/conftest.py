"""Fixtures shared across test modules: results that take long to compute and that several modules read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# The fused Triton kernels (nn.fused_recurrence) run on the CPU through Triton's interpreter where there is
# no GPU. Triton reads the setting when a kernel is defined, so it is set before anything imports them.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from spectral_analysis.checks import CheckRecord  # noqa: E402
from spectral_analysis.symbolic import run_symbolic_checks  # noqa: E402

# Fixtures that cost seconds to tens of seconds once per module or session: a test that reads one is
# slow (left out of `make test-fast`) whichever test of its module happens to pay for it. Tests slow on
# their own carry @pytest.mark.slow (a second or more on the 2-core CPU, from `--durations`).
SLOW_FIXTURES = {
    "all_rows": "every paper check of check-paper --quick, about 50 s",
    "symbolic_rows": "every symbolic derivation, about 40 s",
    "records": "the figures' checks over results/ (about 15 s), or the symbolic derivations",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SLOW_FIXTURES.keys() & fixtures:
            item.add_marker(pytest.mark.slow)
        if "papers_text" in fixtures:  # the only tests that read anything outside the checkout (.ci/run)
            item.add_marker(pytest.mark.papers)


PAPERS_SETTING = "SPECTRAL_ANALYSIS_PAPERS"
DEFAULT_PAPERS = Path(__file__).resolve().parent.parent.parent / "shared" / "papers"


@pytest.fixture(scope="session")
def papers_text() -> str:
    """The papers' text, whitespace-normalized, from the folder ``SPECTRAL_ANALYSIS_PAPERS`` names (by
    default ``../shared/papers/`` beside the checkout). Where the default folder is absent (a fresh clone
    on its own), the tests that quote the papers skip and say which setting to give; where the setting
    is given and holds no paper, that is an error, so a run that sets it (CI) cannot skip them."""
    given = os.environ.get(PAPERS_SETTING)
    folder = Path(given) if given else DEFAULT_PAPERS
    texts = sorted(folder.glob("*.txt"))
    if not texts:
        if given:
            pytest.fail(f"{PAPERS_SETTING}={given} holds no paper text (*.txt)")
        pytest.skip(f"the papers' text is not at {DEFAULT_PAPERS}: set {PAPERS_SETTING} to the folder of "
                    "the papers' *.txt files to run this test")
    return " ".join(" ".join(p.read_text().split()) for p in texts)


@pytest.fixture(scope="session")
def symbolic_rows() -> list[tuple[str, CheckRecord]]:
    """Every symbolic check's ``(name, record)``, derived once per session (about 40 s on a 2-core CPU):
    ``test_symbolic`` judges the verdicts, ``test_paper_checks`` the quotes, as ``check-paper`` runs
    them in its ``symbolic`` group."""
    return run_symbolic_checks()
