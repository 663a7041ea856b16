"""Atomic writes: whole or not at all, with the permissions of a plain open()."""

import os
import stat

import pytest

from spectral_analysis.atomic import atomic_target, atomic_write_text
from spectral_analysis.experiments.results import write_summary
from spectral_analysis.nn import build_model
from spectral_analysis.train import save_checkpoint


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_written_files_get_the_umask_permissions_not_tempfiles_0600(tmp_path, umask_022):
    atomic_write_text(tmp_path / "a" / "b.txt", "x")
    model = build_model("rnn", 2, 4, 1)
    save_checkpoint(tmp_path / "c.safetensors", model, {"step": 1})
    (tmp_path / "r" / "e" / "paper" / "t_s0").mkdir(parents=True)
    (tmp_path / "r" / "e" / "paper" / "t_s0" / "result.json").write_text(
        '{"trial": "t_s0", "status": "done", "config": {}, "metric": "mse"}')
    write_summary(tmp_path / "r", "e", "paper")
    summaries = tmp_path / "r" / "e" / "paper"
    for path in (tmp_path / "a" / "b.txt", tmp_path / "c.safetensors",
                 summaries / "summary.json", summaries / "summary.csv"):
        assert _mode(path) == 0o644, path


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "kept.txt"
    atomic_write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_target(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["kept.txt"]
