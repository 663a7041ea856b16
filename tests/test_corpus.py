"""Every malformed input of the corpus gets its clean one-line error: no traceback, no hang, no exit 0
with non-finite numbers, no file written outside the output directory, no code executed."""

import json
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


def _mutated(data, valid: bytes) -> bytes:
    """Random bytes, or ``valid`` with random byte flips or cut short."""
    kind = data.draw(st.sampled_from(["random", "flip", "truncate"]))
    if kind == "random":
        return data.draw(st.binary(max_size=2048))
    if kind == "truncate":
        return valid[: data.draw(st.integers(0, len(valid) - 1))]
    blob = bytearray(valid)
    for _ in range(data.draw(st.integers(1, 8))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    return bytes(blob)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@pytest.mark.slow
def test_fuzzed_catalog_entries_and_kept_rows_read_or_get_the_one_line_error(data, tmp_path_factory):
    """The catalog reader and the results readers on random bytes and mutations of a valid catalog entry
    and a valid kept row: an experiment or a row, or their ValueError, never anything else."""
    from second_pass import TINY_CATALOG

    from spectral_analysis.experiments import load_experiment
    from spectral_analysis.io.zoo import read_kept_row, zoo_entries

    root = tmp_path_factory.mktemp("fuzz-readers")
    entry = root / "tiny.toml"
    entry.write_bytes(_mutated(data, TINY_CATALOG.encode()))
    try:
        load_experiment(entry)
    except ValueError as error:
        assert str(error) and "\n" not in str(error).strip()
    trial = root / "results" / "exp" / "paper" / "t_s0"
    trial.mkdir(parents=True)
    (trial / "model.safetensors").write_bytes(b"")
    valid_row = json.dumps({"status": "done", "metric": "mse", "test_metrics": {"mse": 0.1}, "seed": 0})
    (trial / "result.json").write_bytes(_mutated(data, valid_row.encode()))
    for read in (lambda: read_kept_row(trial / "result.json"), lambda: zoo_entries(root / "results")):
        try:
            read()
        except ValueError as error:
            assert str(error) and "\n" not in str(error).strip()
