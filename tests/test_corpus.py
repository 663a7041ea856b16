"""Every malformed input of the corpus gets its clean one-line error: no traceback, no hang, no exit 0
with non-finite numbers, no file written outside the output directory, no code executed."""

import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectral_analysis.cli import main

sys.path.insert(0, str(Path(__file__).parent / "corpus"))
from make_corpus import MARKER, _valid_checkpoint, cases  # noqa: E402

with tempfile.TemporaryDirectory() as listing_root:
    LISTING = cases(Path(listing_root))  # the names to parametrize over; each test uses its own copy


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("corpus")
    return {"root": root, "cases": {case.name: case for case in cases(root)}}


def test_the_corpus_is_large_enough():
    assert len(LISTING) >= 150


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if "out" not in p.relative_to(root).parts}


@pytest.mark.parametrize("name", [case.name for case in LISTING])
def test_malformed_input_gets_a_clean_error(name, corpus, capsys):
    case, root = corpus["cases"][name], corpus["root"]
    before = _files(root)
    started = time.perf_counter()
    try:
        code = main(list(case.argv))
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    seconds = time.perf_counter() - started
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == case.code, (code, captured.err[-300:])
    assert "Traceback" not in captured.err and err, captured.err
    assert case.fragment in err[-1], err[-1]
    assert seconds < 10, f"took {seconds:.1f} s"
    assert not (root / MARKER).exists(), "a hostile file ran code"
    new = _files(root) - before
    assert not new, f"files written outside the output directory: {sorted(map(str, new))[:3]}"


FUZZ_EXAMPLES = 300


@settings(max_examples=FUZZ_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@pytest.mark.slow
def test_fuzzed_checkpoints_load_or_get_the_one_line_error(data, tmp_path_factory):
    """Random bytes, and random byte flips / truncations of a valid checkpoint: the readers return a
    model or raise their ValueError, never anything else."""
    from spectral_analysis.io import load
    from spectral_analysis.train import load_checkpoint

    root = tmp_path_factory.mktemp("fuzz")
    valid = _valid_checkpoint(root).read_bytes()
    kind = data.draw(st.sampled_from(["random", "flip", "truncate"]))
    if kind == "random":
        blob = data.draw(st.binary(max_size=2048))
    elif kind == "flip":
        blob = bytearray(valid)
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(blob) - 1))
            blob[i] = data.draw(st.integers(0, 255))
        blob = bytes(blob)
    else:
        blob = valid[: data.draw(st.integers(0, len(valid) - 1))]
    path = root / "fuzzed.safetensors"
    path.write_bytes(blob)
    for reader in (load_checkpoint, load):
        try:
            reader(path)
        except ValueError as error:
            assert str(error) and "\n" not in str(error).strip()


def test_the_docs_state_the_corpus_size():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "reliability.md").read_text()
    assert f"{len(LISTING)} malformed" in readme and f"**{len(LISTING)} clean one-line errors" in readme


@pytest.mark.slow
def test_the_corpus_runs_under_a_4_gib_memory_limit():
    """Every case again in a process whose address space is capped at 4 GiB: an input that made a reader
    allocate past it would fail there (MemoryError or a kill) instead of passing on a large machine."""
    import resource
    import subprocess

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 * 1024 ** 3, 4 * 1024 ** 3))

    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                           "-k", "malformed_input", str(Path(__file__))], capture_output=True, text=True,
                          timeout=600, preexec_fn=capped, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stdout[-2000:]
    assert f"{len(LISTING)} passed" in done.stdout
