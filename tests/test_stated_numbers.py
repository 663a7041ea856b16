"""Every reproduced number in the README and the docs is written by the generator, once: the pages'
generated blocks are what ``results/`` gives today, and no prose outside them states a result by hand."""

import re
import shutil
from pathlib import Path

import pytest

from spectral_analysis.plotting.reproduction import write_reproduction

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- ([\w=@.-]+):begin -->.*?<!-- \1:end -->", re.S)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
NUMBER = r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?"
# How a result reads when typed into prose: a mean [min, max] over seeds, a list of per-seed values, or a
# metric of a trained model followed by its value.
HAND_WRITTEN = {
    "a mean [min, max] over seeds": re.compile(rf"{NUMBER}%? \[{NUMBER}, {NUMBER}\]"),
    "per-seed values": re.compile(r"\b\d\.\d{3,}(?:, \d\.\d{3,}){2,}"),
    "a trained model's metric": re.compile(
        rf"\b(?:test|validation|valid|training|train) (?:accuracy|MSE|mse|cross[ -]entropy|NLL|BPC|"
        rf"perplexity|error|loss)(?: of| at| was| is| reached)? (?:about |only )?{NUMBER}\b(?! ?x\b)"),
    "a certificate's value": re.compile(rf"\bcertificate (?:is|of) {NUMBER}\b"),
}
# Measured by hand and kept only in the page, each for a stated reason (none is a result of the papers'
# experiments, which all come from results/ through the generator).
NOT_REPRODUCTIONS = {
    ("docs/howto/train.md", "valid MSE 0.157"): "how long the how-to's runs take to learn: no paper's result",
    ("docs/howto/train.md", "test MSE 0.0188"): "the same",
    ("docs/howto/train.md", "valid cross-entropy 0.162"): "the same",
    ("docs/howto/train.md", "test cross-entropy 0.146"): "the same",
    ("docs/howto/train.md", "valid accuracy 49.4"): "the same",
    ("docs/concepts/bounds.md", "test error 0.023"): "a feed-forward sanity run of certify against other "
                                                     "papers' certificates, run by hand",
    ("docs/concepts/bounds.md", "certificate is 0.519"): "the same",
    ("docs/concepts/bounds.md", "training error 0.202"): "the same",
    ("docs/concepts/bounds.md", "certificate is 0.195"): "the same",
    ("docs/concepts/bounds.md", "training error 0.031"): "the same",
    ("docs/concepts/bounds.md", "test error 0.030"): "the same",
}
# the written pages: the generated tables under docs/figures and docs/paper_checks (links into figures/ and
# paper_checks/) are what the generator writes, not pages that could state a number by hand
GENERATED = ("figures", "paper_checks")
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md")
                                     if p.relative_to(ROOT / "docs").parts[0] not in GENERATED)]


def _prose(page: Path) -> str:
    """The page less its generated blocks and code blocks."""
    return FENCE.sub("", BLOCK.sub("", page.read_text()))


def _hand_written(text: str, page: str) -> list[tuple[str, str]]:
    found = []
    for kind, pattern in HAND_WRITTEN.items():
        found += [(kind, m.group(0)) for m in pattern.finditer(text)
                  if (page, m.group(0)) not in NOT_REPRODUCTIONS]
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_no_page_states_a_result_by_hand(page):
    name = page.relative_to(ROOT).as_posix()
    found = _hand_written(_prose(page), name)
    assert not found, f"{name} states results by hand; generate them into a marked block instead: {found}"


def test_the_detector_finds_each_way_a_result_is_typed():
    typed = ("Test accuracy 85.9% [83.6, 87.6] over the seeds 0.876, 0.866, 0.836, test MSE 0.0171 at "
             "L = 300, and the certificate is 0.144.")
    kinds = [kind for kind, _ in _hand_written(typed, "docs/x.md")]
    assert kinds == list(HAND_WRITTEN)
    # what the detector leaves alone: settings, thresholds, ratios and the generated blocks
    settings = ("lr in {0.1, 0.01, 0.001}, within 0.05 of it, 1.5x the MLP's; "
                "<!-- demo:begin -->\ntest MSE 0.1746\n<!-- demo:end -->")
    assert not _hand_written(_prose_of(settings), "docs/x.md")
    assert _hand_written("RNN test MSE 0.1746", "docs/x.md")


def _prose_of(text: str) -> str:
    return FENCE.sub("", BLOCK.sub("", text))


@pytest.mark.slow
def test_every_generated_block_is_what_the_results_give_today(tmp_path):
    """Regenerate every page's blocks into a copy: a hand edit inside a block, or results that moved
    since the last ``spectral-analysis figures --readme``, leaves the copy different."""
    copies = []
    for page in PAGES:
        # check-paper writes the discrepancy list (tests/test_paper_checks.py holds it); figures, the rest
        names = {m.group(1) for m in BLOCK.finditer(page.read_text())} - {"discrepancies"}
        if names:
            copy = tmp_path / page.relative_to(ROOT).as_posix().replace("/", "__")
            shutil.copyfile(page, copy)
            copies.append((page, copy))
    assert len(copies) >= 5  # README, the Figures page, analyze, experiments, bounds
    out = tmp_path / "figures"
    out.mkdir()
    for table in ("bounds_table_fig2r.csv", "bounds_table_pixel.csv"):  # kept bounds-table outputs
        shutil.copyfile(ROOT / "figures" / table, out / table)
    write_reproduction(ROOT / "results", out, [copy for _, copy in copies])
    stale = [str(page.relative_to(ROOT)) for page, copy in copies if copy.read_text() != page.read_text()]
    assert not stale, f"regenerate: spectral-analysis figures --readme PAGE for {stale}"
