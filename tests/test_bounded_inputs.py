"""Bounded work on every input: counts, lengths and seeds are ranged at the edge, a grid too large is
refused before it is expanded, an array file cannot make a reader allocate more than it holds, a
corrupt archive or a complex matrix is one line, and a CUDA device this torch lacks is named."""

import time
import zipfile

import numpy as np
import pytest
import torch

from spectral_analysis.cli import main
from spectral_analysis.experiments import load_experiment

MODEL = "zoo:fig1-addition/spectral_length300_s0"


@pytest.mark.parametrize(("argv", "words"), [
    (["certify", MODEL, "--chunk-size", "0"], "--chunk-size: must be an integer in [1, 1000000], got '0'"),
    (["certify", MODEL, "--lr", "-1"], "--lr: must be a number in (0, 10], got '-1'"),
    (["certify", MODEL, "--epochs", "-1"], "--epochs: must be an integer in [0, 100000]"),
    (["certify", MODEL, "--mc-samples", "10" * 6], "--mc-samples: must be an integer in [1, 10000000]"),
    (["bound", MODEL, "--length", "1" + "0" * 400], "--length: must be an integer in [1, 1000000]"),
    (["--threads", "1000000000", "inspect", MODEL], "--threads: must be an integer in [1, 1024]"),
    (["run", "fig1-addition", "--seeds", "1000000000"], "--seeds: must be an integer in [1, 1000]"),
    (["analyze", MODEL, "--out", "x", "--seed", "-3"], "--seed: must be an integer in [0, "),
])
def test_numbers_are_ranged_at_the_edge(argv, words, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2 and words in capsys.readouterr().err


def test_a_grid_too_large_is_refused_before_it_is_expanded(tmp_path):
    axes = "\n".join(f'"task_options.x{i}" = {list(range(30))}' for i in range(4))  # 30^4 = 810,000
    path = tmp_path / "huge.toml"
    path.write_text(f"""
name = "huge"
source = "test"
description = "too large"
[base]
task = "addition"
[[variants]]
label = "rnn"
model = "rnn"
[axes]
{axes}
[scales.paper]
stated = "unused"
steps = 1
[scales.smoke]
steps = 1
""")
    started = time.perf_counter()
    with pytest.raises(ValueError, match="has 810000 trials, more than 100000"):
        load_experiment(path)
    assert time.perf_counter() - started < 5
    many = path.read_text().replace("[axes]\n" + axes, "").replace('stated = "unused"',
                                                                   'stated = "unused"\nseeds = 1000000000')
    path.write_text(many)
    with pytest.raises(ValueError, match=r"seeds must be an integer in \[1, 1000\]"):
        load_experiment(path)


def test_an_array_file_cannot_make_a_reader_allocate(tmp_path, capsys, monkeypatch):
    claims = tmp_path / "claims.npy"  # a header claiming 37 GiB over a few bytes of data
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 50000), }"
    header += " " * (118 - len(header)) + "\n"
    magic = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
    claims.write_bytes(magic + header.encode() + b"\0" * 64)
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"PK\x03\x04" + b"\0" * 40)
    for bad, why in ((claims, "cannot read inputs"), (corrupt, "cannot read inputs")):
        assert main(["bound", MODEL, "--inputs", str(bad), "--labels", str(bad)]) == 1
        assert why in capsys.readouterr().err
    from spectral_analysis.data import arrays

    monkeypatch.setattr(arrays, "MAX_ARRAY_BYTES", 2 ** 20)  # the 2 GiB limit, scaled to a quick test
    bomb = tmp_path / "bomb.npz"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive, \
            archive.open("inputs.npy", "w") as member:  # an .npz member that inflates
        np.lib.format.write_array_header_1_0(member, {"descr": "<f8", "fortran_order": False,
                                                      "shape": (1_000, 1_000)})
        member.write(bytes(8_000_000))
    assert bomb.stat().st_size < 2 ** 16
    assert main(["bound", MODEL, "--inputs", str(bomb), "--labels", str(bomb)]) == 1
    assert "inflates to" in capsys.readouterr().err


def test_a_complex_matrix_and_a_missing_cuda_are_one_line(tmp_path, capsys):
    np.save(tmp_path / "c.npy", np.eye(3) * (1 + 1j))
    assert main(["decompose", str(tmp_path / "c.npy")]) == 1
    assert "complex matrix" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main(["bound", MODEL, "--device", "cuda"]) == 1
        assert "sees no CUDA device" in capsys.readouterr().err


def test_certify_refuses_an_ascending_step_in_python():
    import spectral_analysis as sa

    with pytest.raises(ValueError, match="lr must be a positive number"):
        sa.certify(torch.nn.RNN(2, 3), torch.randn(4, 3, 2), torch.randint(0, 3, (4,)), lr=-1.0)


def test_fifos_where_files_belong_are_refused_not_waited_on(tmp_path):
    """A FIFO as a catalog file, as config.json on resume and as metrics.jsonl: one line each, at once
    (reading a FIFO with no writer would block forever)."""
    import os

    from spectral_analysis.train import TrainConfig, Trainer, train

    os.mkfifo(tmp_path / "fifo.toml")
    with pytest.raises(ValueError, match="experiment file .*fifo.toml is not a regular file"):
        load_experiment(tmp_path / "fifo.toml")
    config = TrainConfig(task="addition", model="rnn", hidden=4, steps=2, batch_size=8,
                         out=str(tmp_path / "run"), progress=False,
                         task_options={"length": 3, "train_size": 16, "valid_size": 8, "test_size": 8})
    train(config)
    for name in ("metrics.jsonl", "config.json"):
        real = tmp_path / "run" / name
        real.rename(tmp_path / f"{name}.kept")
        os.mkfifo(real)
        started = time.perf_counter()
        with pytest.raises(ValueError, match="is not a regular file"):
            Trainer(TrainConfig(**{**config.__dict__, "steps": 4}), resume=True)
        assert time.perf_counter() - started < 10
        real.unlink()
        (tmp_path / f"{name}.kept").rename(real)


def test_lemma3_on_weights_that_overflow_is_not_run_rather_than_violated():
    from spectral_analysis.analysis.network import eq17_network
    from spectral_analysis.analysis.perturbation import perturbation_check
    from spectral_analysis.nn import build_model

    model = build_model("rnn", 2, 6, 1, output_bias=True).double()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(3e38)  # finite, as float32's largest: the forward pass overflows
    with pytest.raises(ValueError, match="overflows float64 .* not computable, so the check is not run"):
        perturbation_check(eq17_network(model, False), torch.randn(3, 50, 2, dtype=torch.float64))


def test_a_single_sequence_with_one_label_is_read(tmp_path):
    from spectral_analysis.data.arrays import load_user_data

    np.save(tmp_path / "x.npy", np.zeros((1, 5, 2)))
    for name, labels in (("flat", np.array([3])), ("column", np.array([[3]]))):
        np.save(tmp_path / f"{name}.npy", labels)
        data = load_user_data(tmp_path / "x.npy", tmp_path / f"{name}.npy", input_size=2)
        assert data.labels.tolist() == [3]
    np.save(tmp_path / "two.npy", np.array([1, 2]))
    with pytest.raises(ValueError, match=r"labels must have shape \(1,\) for 1 sequences, got \(2,\)"):
        load_user_data(tmp_path / "x.npy", tmp_path / "two.npy", input_size=2)


def test_a_model_too_large_to_build_is_refused_before_it_is_built(capsys):
    from spectral_analysis.nn import build_model

    started = time.perf_counter()
    with pytest.raises(ValueError, match=r"has 1000003000000 weights, more than the 100000000 built"):
        build_model("rnn", 1, 10 ** 6, 1)
    with pytest.raises(ValueError, match=r"num_layers must be an integer in \[0, 1000\], got 300000"):
        build_model("lstm", 1, 8, 1, num_layers=300_000)
    assert main(["train", "--model", "gru", "--task", "addition", "--hidden", "200000", "--steps", "1",
                 "--out", "unused"]) == 1
    assert "more than the 100000000 built" in capsys.readouterr().err
    assert time.perf_counter() - started < 5
