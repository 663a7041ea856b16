"""Resuming a run: after an interruption, after SIGKILL at random moments (bit for bit), its guards,
and a second writer refused."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch
from train_fixtures import log_lines, small_config

from spectral_analysis.train import (
    TrainConfig,
    Trainer,
    load_checkpoint,
    train,
)


def test_resume_after_an_interruption_repeats_the_uninterrupted_run(tmp_path):
    full = train(small_config(tmp_path / "full"))

    def stop_at_13(step):
        if step == 13:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(small_config(tmp_path / "cut"), callback=stop_at_13)
    assert max(line["step"] for line in log_lines(tmp_path / "cut")) == 12  # past the step-10 checkpoint
    resumed = train(small_config(tmp_path / "cut"), resume=True)
    for phase in ("train", "valid", "test"):
        strip = {k: v for k, v in full[phase].items() if k != "time"}
        assert strip == {k: v for k, v in resumed[phase].items() if k != "time"}, phase
    a = load_checkpoint(tmp_path / "full" / "last.safetensors").tensors
    b = load_checkpoint(tmp_path / "cut" / "last.safetensors").tensors
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    steps = [(line["phase"], line["step"]) for line in log_lines(tmp_path / "cut")]
    assert steps == [(line["phase"], line["step"]) for line in log_lines(tmp_path / "full")]


def _interrupt_at_13(step: int) -> None:
    if step == 13:
        raise KeyboardInterrupt


def test_a_run_resumed_on_another_machine_splits_its_seconds_by_machine(tmp_path, monkeypatch):
    """A run parked on a GPU and finished on a CPU adds two speeds: its checkpoint says which seconds
    each machine trained, so no table labels the sum with one machine."""
    import spectral_analysis.train.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "machine_name", lambda device: "machine A")
    with pytest.raises(KeyboardInterrupt):
        train(small_config(tmp_path / "run"), callback=_interrupt_at_13)
    first = load_checkpoint(tmp_path / "run" / "last.safetensors").metadata
    assert first["seconds_by_machine"] == {"machine A": pytest.approx(first["elapsed"])}
    monkeypatch.setattr(trainer_module, "machine_name", lambda device: "machine B")
    train(small_config(tmp_path / "run"), resume=True)
    last = load_checkpoint(tmp_path / "run" / "last.safetensors").metadata
    split = last["seconds_by_machine"]
    assert list(split) == ["machine A", "machine B"] and split["machine A"] == first["seconds_by_machine"][
        "machine A"]
    assert split["machine B"] > 0 and sum(split.values()) == pytest.approx(last["elapsed"])


def test_seconds_from_a_checkpoint_without_the_split_stay_unattributed(tmp_path, monkeypatch):
    """A checkpoint written before the per-machine split does not say where its seconds ran: a resume
    keeps them under ``not recorded`` rather than crediting them to the machine that resumes."""
    import spectral_analysis.train.trainer as trainer_module

    write = trainer_module.save_checkpoint
    monkeypatch.setattr(trainer_module, "save_checkpoint", lambda path, model, meta, extra: write(
        path, model, {k: v for k, v in meta.items() if k != "seconds_by_machine"}, extra))
    with pytest.raises(KeyboardInterrupt):
        train(small_config(tmp_path / "run"), callback=_interrupt_at_13)
    before = load_checkpoint(tmp_path / "run" / "last.safetensors").metadata
    assert "seconds_by_machine" not in before
    monkeypatch.setattr(trainer_module, "save_checkpoint", write)
    train(small_config(tmp_path / "run"), resume=True)
    split = load_checkpoint(tmp_path / "run" / "last.safetensors").metadata["seconds_by_machine"]
    assert split[trainer_module.UNRECORDED_MACHINE] == before["elapsed"] and len(split) == 2


@pytest.mark.slow
def test_killed_process_resumes_to_the_same_final_metrics(tmp_path):
    """A real SIGKILL mid-run (after the first checkpoint), then --resume from the command line."""
    args = ["train", "--model", "spectral", "--task", "addition", "--length", "40", "--train-size", "512",
            "--valid-size", "64", "--test-size", "64", "--hidden", "24", "--m1", "6", "--m2", "6",
            "--batch-size", "32", "--steps", "400", "--checkpoint-every", "20", "--eval-every", "100",
            "--no-progress", "--json"]
    cmd = [sys.executable, "-m", "spectral_analysis.cli", *args]
    full = json.loads(subprocess.run([*cmd, "--out", str(tmp_path / "full")], capture_output=True,
                                     text=True, check=True, timeout=300).stdout)
    proc = subprocess.Popen([*cmd, "--out", str(tmp_path / "killed")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    first = tmp_path / "killed" / "checkpoints" / "step-000040.safetensors"
    deadline = time.time() + 120
    while not first.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    resumed = json.loads(subprocess.run([*cmd, "--out", str(tmp_path / "killed"), "--resume"],
                                        capture_output=True, text=True, check=True, timeout=300).stdout)
    for phase in ("valid", "test"):
        assert {k: v for k, v in full[phase].items() if k != "time"} == \
               {k: v for k, v in resumed[phase].items() if k != "time"}


KILL_TRIALS = 6


@pytest.mark.slow
def test_kill_9_at_random_moments_then_resume_is_bit_identical(tmp_path):
    """SIGKILL at seeded random moments in the 4 s after the run directory appears, one in each of
    KILL_TRIALS equal slices of it (before the first checkpoint, mid-run, near the end on this machine:
    the run takes about 4 s from there), then --resume until done: every logged row survives and the
    final weights equal an uninterrupted run's."""
    args = ["--threads", "1", "train", "--model", "rnn", "--task", "addition", "--length", "30",
            "--train-size", "256", "--valid-size", "32", "--test-size", "32", "--hidden", "16",
            "--batch-size", "16", "--steps", "300", "--checkpoint-every", "10", "--eval-every", "50",
            "--record-every", "5", "--no-progress", "--json"]
    cmd = [sys.executable, "-m", "spectral_analysis.cli", *args]
    subprocess.run([*cmd, "--out", str(tmp_path / "full")], capture_output=True, check=True, timeout=300)
    reference = load_checkpoint(tmp_path / "full" / "last.safetensors").model.state_dict()
    reference_rows = log_lines(tmp_path / "full")
    rng = random.Random(0)
    for trial in range(KILL_TRIALS):
        out = tmp_path / f"killed{trial}"
        proc = subprocess.Popen([*cmd, "--out", str(out)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        # time the kill from the moment the run directory exists: a kill during the interpreter's start
        # leaves nothing on disk, and --resume rightly answers "nothing to resume" to a missing directory
        deadline = time.time() + 120
        while not out.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(4.0 * (trial + rng.random()) / KILL_TRIALS)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        done = subprocess.run([*cmd, "--out", str(out), "--resume"], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, (trial, done.stderr[-500:])
        state = load_checkpoint(out / "last.safetensors").model.state_dict()
        assert all(torch.equal(state[k], reference[k]) for k in reference), f"trial {trial}"
        rows = log_lines(out)
        assert [(r["phase"], r["step"]) for r in rows] == [(r["phase"], r["step"]) for r in reference_rows]


def test_resume_and_overwrite_guards(tmp_path):
    out = tmp_path / "run"
    train(small_config(out, steps=5))
    with pytest.raises(ValueError, match="already holds a run"):
        train(small_config(out, steps=5))
    with pytest.raises(ValueError, match="cannot resume: lr"):
        train(small_config(out, steps=10, lr=0.1), resume=True)
    with pytest.raises(ValueError, match="nothing to resume"):
        train(small_config(tmp_path / "empty", steps=5), resume=True)
    longer = train(small_config(out, steps=10), resume=True)  # more steps is allowed
    assert longer["test"]["step"] == 10
    out.rename(tmp_path / "moved")  # config.json still names the old folder: the same run all the same
    moved = train(small_config(tmp_path / "moved", steps=12), resume=True)
    assert moved["test"]["step"] == 12


def test_a_second_writer_is_refused_and_a_torn_log_line_is_repaired(tmp_path, caplog):

    config = TrainConfig(model="rnn", task="addition", out=str(tmp_path / "run"), hidden=4, steps=4,
                         task_options={"length": 5, "train_size": 40, "valid_size": 8, "test_size": 8},
                         batch_size=8, record_every=1, eval_every=2, checkpoint_every=2, progress=False)
    first = Trainer(config)
    with pytest.raises(ValueError, match=rf"is locked: another process \(pid {os.getpid()}\)"):
        Trainer(config)
    first.run()
    log = tmp_path / "run" / "metrics.jsonl"
    rows = log.read_text()
    log.write_text(rows + '{"step": 5, "pha')  # what a kill during a write leaves
    with caplog.at_level("WARNING", logger="spectral_analysis"):
        resumed = train(config, resume=True)
    assert "dropped a torn last line" in caplog.text
    assert resumed and log.read_text().endswith("\n") and '"step": 5' not in log.read_text()
    log.write_text('{"step": "two", "phase": "train"}\n')
    with pytest.raises(ValueError, match="line 1: field step"):
        train(config, resume=True)


def test_a_shorter_run_is_the_longer_runs_beginning(tmp_path):
    """What lets a budget scale's runs stand for the paper runs' first steps (paper.kept's
    judged_on_first_steps): the same configuration trained for 2 epochs or for 4 (with a cap past them)
    has the same weights, optimizer state and records at the end of epoch 2, the per-epoch decay and the
    evaluations included."""
    common = dict(steps=None, lr_decay=0.5, checkpoint_every=10)
    train(small_config(tmp_path / "short", epochs=2, **common))
    train(small_config(tmp_path / "long", epochs=4, max_steps=80, **common))
    short = load_checkpoint(tmp_path / "short" / "last.safetensors")
    long = load_checkpoint(tmp_path / "long" / "checkpoints" / "step-000020.safetensors")
    assert short.metadata["step"] == long.metadata["step"] == 20
    assert short.tensors.keys() == long.tensors.keys()
    assert all(torch.equal(short.tensors[k], long.tensors[k]) for k in short.tensors)

    def records(out, phase):
        return [{k: v for k, v in line.items() if k != "time"} for line in log_lines(out)
                if line["phase"] == phase and line["step"] <= 20]

    assert records(tmp_path / "short", "train") == records(tmp_path / "long", "train")
    long_valid = records(tmp_path / "long", "valid")  # the short run evaluates at its last step too
    assert [r for r in records(tmp_path / "short", "valid") if r["step"] < 20] == long_valid != []
