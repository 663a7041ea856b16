"""The results tree is a boundary: zoo names, trial folders, model files and experiment names resolve
inside it, symlinks out of it are refused, and ``--results`` must be a folder."""

import os
import shutil
from pathlib import Path

import pytest
from experiment_fixtures import TINY

from spectral_analysis.cli import main
from spectral_analysis.experiments import load_experiment
from spectral_analysis.io.zoo import resolve_checkpoint, trial_results_dir, zoo_entries

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / "results" / "zoo-addition" / "paper" / "spectral_s0"


def test_a_zoo_name_that_climbs_out_of_the_tree_is_refused(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    planted = tmp_path / "planted" / "paper" / "x"  # two levels above a trial folder of results/
    planted.mkdir(parents=True)
    shutil.copyfile(KEPT / "model.safetensors", planted / "model.safetensors")
    for name in ("zoo:../../planted", "zoo:../planted/x", "zoo:a/../b"):
        with pytest.raises(ValueError, match="is not a plain name"):
            resolve_checkpoint(name, results)
    with pytest.raises(ValueError, match="trial name '..' is not a plain name"):
        trial_results_dir(results, "fig1-addition", "paper", "..")


def test_a_symlink_out_of_the_tree_is_no_zoo_entry_and_is_refused_by_name(tmp_path):
    results = tmp_path / "results"
    (results / "exp" / "paper").mkdir(parents=True)
    outside = tmp_path / "outside"
    shutil.copytree(KEPT, outside)
    os.symlink(outside, results / "exp" / "paper" / "spectral_s0")
    assert zoo_entries(results) == []
    with pytest.raises(ValueError, match="leads out of the results tree"):
        resolve_checkpoint("zoo:exp/paper/spectral_s0", results)
    inside = results / "exp" / "paper" / "kept_s0"
    shutil.copytree(KEPT, inside)  # a real folder inside the tree is an entry
    assert [e["name"] for e in zoo_entries(results)] == ["zoo:exp/paper/kept_s0"]


def test_an_experiment_name_with_a_path_in_it_is_refused_and_results_must_be_a_folder(tmp_path, capsys):
    path = tmp_path / "escape.toml"
    path.write_text(TINY.replace('name = "tiny"', 'name = "../../escaped"'))
    with pytest.raises(ValueError, match="the experiment name '../../escaped' must be a plain name"):
        load_experiment(path)
    not_a_folder = tmp_path / "results.txt"
    not_a_folder.write_text("x")
    assert main(["zoo", "--results", str(not_a_folder)]) == 1
    assert "is not a directory" in capsys.readouterr().err
