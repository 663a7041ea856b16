"""Trainer, recorders, checkpoints and resume."""

import copy
import json
import os
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from train_fixtures import log_lines, small_config

from spectral_analysis.cli import main
from spectral_analysis.data.objectives import loss_and_metrics
from spectral_analysis.train import (
    CheckpointError,
    TrainConfig,
    Trainer,
    load_checkpoint,
    train,
)


def test_run_directory_records_and_checkpoints(tmp_path):
    out = tmp_path / "run"
    summary = train(small_config(out))
    assert (out / "config.json").is_file() and (out / "last.safetensors").is_file()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        f"step-{s:06d}.safetensors" for s in (5, 10, 15, 20, 24)]
    lines = log_lines(out)
    train_lines = [line for line in lines if line["phase"] == "train"]
    assert [line["step"] for line in train_lines] == [4, 8, 12, 16, 20, 24]
    for line in train_lines:
        assert {"loss", "mse", "spectral_margin", "singular_values", "grad_h0_norm", "time"} <= set(line)
        assert 0 <= line["spectral_margin"] <= 0.05 + 1e-6 and line["grad_h0_norm"] > 0
    assert [line["step"] for line in lines if line["phase"] == "valid"] == [8, 16, 24]
    assert summary["test"]["step"] == 24
    checkpoint = load_checkpoint(out / "last.safetensors")
    meta = checkpoint.metadata
    assert meta["step"] == 24 and meta["task"]["length"] == 12 and meta["task"]["train_size"] == 160
    assert meta["task"]["data_bound"] == pytest.approx(
        float(Trainer(small_config(tmp_path / "other")).task.train.inputs.norm(dim=-1).max()))
    assert meta["model"]["options"]["m1"] == 4 and meta["package_version"]
    svals = checkpoint.model.singular_values().tolist()
    assert svals == pytest.approx(train_lines[-1]["singular_values"][0], abs=1e-6)


def test_an_evaluations_reader_finds_last_checkpoint_at_its_step_and_the_numbered_ones_unchanged(tmp_path):
    """What a Tune trial checkpoints at an evaluation is ``last.safetensors``: written at that step even
    between ``checkpoint_every`` steps, while ``checkpoints/`` keeps its own cadence."""
    out = tmp_path / "run"
    seen = []

    def reader(line):
        seen.append((line["step"], load_checkpoint(out / "last.safetensors").metadata["step"]))

    Trainer(small_config(out)).run(on_evaluation=reader)
    assert seen == [(8, 8), (16, 16), (24, 24)]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        f"step-{s:06d}.safetensors" for s in (5, 10, 15, 20, 24)]


def test_grad_h0_norm_is_the_gradient_at_the_first_cell(tmp_path):
    trainer = Trainer(small_config(tmp_path / "run", steps=1, record_every=1))
    model = copy.deepcopy(trainer.model)
    x, y, _ = trainer.batches.get(0)
    h0 = torch.zeros(1, x.shape[0], 12, requires_grad=True)
    loss, _ = loss_and_metrics("regression-last", model.run(x, h0).outputs, y)
    loss.backward()
    summary = trainer.run()
    assert summary["train"]["grad_h0_norm"] == pytest.approx(float(h0.grad.norm()), rel=1e-5)


def test_grad_norm_is_the_objectives_gradient_norm_and_its_peak_covers_the_unrecorded_steps(tmp_path):
    """``grad_norm`` is ||d(loss + penalty)/dparameters|| at the recorded step (by hand, before
    clipping); ``grad_norm_peak`` of a run recording every 3 steps is the largest of the every-step run's
    norms over those 3 steps, also across a resume between records."""
    config = small_config(tmp_path / "hand", steps=1, record_every=1, penalty=0.1, clip=1e-6)
    trainer = Trainer(config)
    model = copy.deepcopy(trainer.model)
    x, y, _ = trainer.batches.get(0)
    loss, _ = loss_and_metrics("regression-last", model.run(x).outputs, y)
    (loss + 0.1 * model.spectral_penalty()).backward()
    norm = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).norm()
    line = trainer.run()["train"]
    assert line["grad_norm"] == pytest.approx(float(norm), rel=1e-5) and float(norm) > 1e-3
    assert line["grad_norm_peak"] == line["grad_norm"]

    train(small_config(tmp_path / "every", steps=9, record_every=1))
    every = [line["grad_norm"] for line in log_lines(tmp_path / "every") if line["phase"] == "train"]
    assert len(every) == 9 and len(set(every)) == 9
    # stopped right after the peak of a 3-step window whose peak is not its last step: the resumed run's
    # line for that window has the right peak only if the checkpoint carried it
    start = next(j for j in (0, 3, 6) if max(every[j:j + 3]) != every[j + 2])
    stop_at = start + every[start:start + 3].index(max(every[start:start + 3])) + 1
    sparse = tmp_path / "sparse"
    Trainer(small_config(sparse, steps=9, record_every=3, checkpoint_every=1)).run(
        stop=lambda s: s >= stop_at)
    Trainer(small_config(sparse, steps=9, record_every=3, checkpoint_every=1), resume=True).run()
    peaks = [(line["step"], line["grad_norm_peak"], line["grad_norm"])
             for line in log_lines(sparse) if line["phase"] == "train"]
    assert [step for step, _, _ in peaks] == [3, 6, 9]
    for step, peak, at_step in peaks:
        assert peak == pytest.approx(max(every[step - 3:step]), rel=1e-6)
        assert at_step == pytest.approx(every[step - 1], rel=1e-6)


def test_a_learned_start_state_is_measured_and_trained_on_recording_steps(tmp_path):
    """The uRNN's h_0 is a parameter: a recording step reports ||dL/dh0|| and still updates it."""
    trainer = Trainer(small_config(tmp_path / "run", model="urnn", model_options={}, steps=1, record_every=1))
    model = copy.deepcopy(trainer.model)
    x, y, _ = trainer.batches.get(0)
    h0 = model.start_state(x.shape[0]).clone()
    h0.retain_grad()
    loss, _ = loss_and_metrics("regression-last", model.run(x, h0).outputs, y)
    loss.backward()
    before = trainer.model.start_states.detach().clone()
    summary = trainer.run()
    assert summary["train"]["grad_h0_norm"] == pytest.approx(float(h0.grad.norm()), rel=1e-5)
    assert not torch.equal(trainer.model.start_states.detach(), before)


def test_epochs_without_improvement_counts_the_epoch_ends_that_do_not_beat_every_earlier_one():
    from spectral_analysis.train.plateau import epochs_without_improvement

    valid = [{"step": s, "mse": v} for s, v in ((8, 0.1), (10, 0.5), (16, 0.01), (20, 0.4), (24, 0.3),
                                                (30, 0.4), (40, 0.2))]
    # epoch ends 10, 20, 30, 40: 0.5 (first), 0.4 (better), 0.4 (a tie: no improvement), 0.2 (better)
    assert epochs_without_improvement(valid, "mse", 10, until=40) == 1
    assert epochs_without_improvement(valid, "mse", 10, until=29) == 0
    assert epochs_without_improvement(valid, "accuracy", 10, until=40) == 0  # no such metric: no cut
    higher = [{"step": s, "accuracy": v} for s, v in ((10, 0.5), (20, 0.4), (30, 0.6))]
    assert epochs_without_improvement(higher, "accuracy", 10, until=30) == 1


def test_lr_cut_multiplies_the_rate_after_an_epoch_without_improvement_and_resumes_exactly(tmp_path):
    """KRU's PTB schedule: a validation line at each epoch's end (10 steps here) and the rate times lr_cut
    after each that does not improve; with a rate too small to move the weights, step 20 ties step 10."""
    still = Trainer(small_config(tmp_path / "still", lr=1e-12, lr_cut=0.5))
    still.run()
    valid_steps = [line["step"] for line in log_lines(tmp_path / "still") if line["phase"] == "valid"]
    assert valid_steps == [8, 10, 16, 20, 24]
    assert still.optimizer.param_groups[0]["lr"] == pytest.approx(0.5e-12)

    def stop_at(last):
        def stop(step):
            if step == last:
                raise KeyboardInterrupt
        return stop

    with pytest.raises(KeyboardInterrupt):  # past the cut at step 20 and its checkpoint
        train(small_config(tmp_path / "still-cut", lr=1e-12, lr_cut=0.5), callback=stop_at(23))
    resumed_still = Trainer(small_config(tmp_path / "still-cut", lr=1e-12, lr_cut=0.5), resume=True)
    resumed_still.run()  # the cut is read again from the kept validation lines
    assert resumed_still.optimizer.param_groups[0]["lr"] == pytest.approx(0.5e-12)
    full = train(small_config(tmp_path / "full", lr=0.05, lr_cut=0.5))
    stop_at_13 = stop_at(13)

    with pytest.raises(KeyboardInterrupt):
        train(small_config(tmp_path / "cut", lr=0.05, lr_cut=0.5), callback=stop_at_13)
    resumed = train(small_config(tmp_path / "cut", lr=0.05, lr_cut=0.5), resume=True)
    assert {k: v for k, v in full["test"].items() if k != "time"} == {
        k: v for k, v in resumed["test"].items() if k != "time"}
    with pytest.raises(ValueError, match=r"lr cut must lie in \(0, 1\]"):
        small_config(tmp_path / "bad", lr_cut=0.0).validate()


@pytest.fixture
def checkpoint_file(tmp_path):
    train(small_config(tmp_path / "run", steps=5))
    return tmp_path / "run" / "last.safetensors"


def test_bad_checkpoints_are_named_errors(tmp_path, checkpoint_file, capsys):
    data = checkpoint_file.read_bytes()
    cases = {}
    torch.save({"weights": torch.zeros(2)}, tmp_path / "pickled.safetensors")
    cases["pickled.safetensors"] = "pickle / torch.save file, not a safetensors checkpoint; it is not loaded"
    (tmp_path / "truncated.safetensors").write_bytes(data[: len(data) // 2])
    cases["truncated.safetensors"] = "truncated or corrupt"
    length = int.from_bytes(data[:8], "little")  # pad the JSON header to a length whose low byte is 0x80,
    padded = length + (0x80 - length) % 256     # the pickle protocol's first byte
    header = data[8:8 + length] + b" " * (padded - length)
    (tmp_path / "truncated-0x80.safetensors").write_bytes(
        padded.to_bytes(8, "little") + header + data[8 + length:][:100])
    cases["truncated-0x80.safetensors"] = "truncated or corrupt"
    tampered = bytearray(data)
    tampered[-3] ^= 0xFF
    (tmp_path / "tampered.safetensors").write_bytes(bytes(tampered))
    cases["tampered.safetensors"] = "checksum mismatch"
    save_file({"w": torch.zeros(3)}, tmp_path / "foreign.safetensors", metadata={"author": "someone"})
    cases["foreign.safetensors"] = "not a spectral-analysis checkpoint"
    cases["missing.safetensors"] = "not found"
    for name, needle in cases.items():
        with pytest.raises(CheckpointError, match=needle):
            load_checkpoint(tmp_path / name)
        assert main(["inspect", str(tmp_path / name)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0]
    with pytest.raises(CheckpointError, match="the analyzers read a PyTorch state_dict's weights alone"):
        load_checkpoint(tmp_path / "pickled.safetensors")  # and the refusal names the way that reads it


def test_metadata_tensor_mismatch_is_named(tmp_path, checkpoint_file):
    from safetensors import safe_open
    with safe_open(str(checkpoint_file), "pt") as f:
        meta = json.loads(f.metadata()["spectral_analysis"])
        tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    from spectral_analysis.train.checkpoint import tensor_digest

    def resigned(**model) -> Path:  # edited metadata with its digest recomputed, as anyone can
        edited = {**meta, "model": {**meta["model"], **model}}
        path = tmp_path / "mismatch.safetensors"
        save_file(tensors, path, metadata={"spectral_analysis": json.dumps(edited),
                                           "sha256": tensor_digest(tensors, json.dumps(edited))})
        return path

    with pytest.raises(CheckpointError, match="do not fit the model in the metadata: size mismatch"):
        load_checkpoint(resigned(hidden_size=11))
    with pytest.raises(CheckpointError, match=r"describes a model of \d+ weights, the file holds \d+"):
        load_checkpoint(resigned(name="lstm", input_size=12, output_size=12, options={"num_layers": 6}))
    started = time.perf_counter()  # sizes that would take gigabytes are refused before anything is built
    with pytest.raises(CheckpointError, match="hidden_size 10000000 is larger than any dimension"):
        load_checkpoint(resigned(hidden_size=10 ** 7))
    options = {**meta["model"]["options"], "num_layers": 300_000}
    with pytest.raises(CheckpointError, match="num_layers 300000 is more than the file's"):
        load_checkpoint(resigned(options=options))
    assert time.perf_counter() - started < 5


def test_inspect_json(checkpoint_file, capsys):
    assert main(["inspect", str(checkpoint_file), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["model"]["name"] == "spectral" and payload["T"] == 12 and payload["m"] == 160
    assert payload["step"] == 5 and len(payload["singular_values"][0]) == 12
    assert payload["B"] > 1.0 and "test" in payload["metrics"]


@pytest.mark.parametrize("model,task,options", [("lstm", "copy", {"length": 5, "train_size": 64}),
                                                ("ornn", "copy", {"length": 5, "train_size": 64}),
                                                ("mlp", "mnist-flat", {"train_size": 64})])
def test_other_models_and_tasks_train_and_reload(tmp_path, model, task, options):
    config = small_config(tmp_path / "run", model=model, task=task, model_options={}, task_options=options,
                     steps=6)
    summary = train(config)
    assert summary["test"]["step"] == 6
    reloaded = load_checkpoint(tmp_path / "run" / "last.safetensors").model
    assert reloaded.parameter_counts() == Trainer(small_config(tmp_path / "x", model=model, task=task,
                                                          model_options={}, task_options=options,
                                                          steps=6)).model.parameter_counts()


def test_train_flag_errors(tmp_path, capsys):
    assert main(["train", "--model", "mlp", "--task", "addition", "--steps", "1", "--out",
                 str(tmp_path / "a")]) == 1
    assert "use a recurrent model" in capsys.readouterr().err
    assert main(["train", "--model", "rnn", "--task", "mnist", "--length", "5", "--out",
                 str(tmp_path / "b")]) == 1
    assert "does not take option(s) ['length']" in capsys.readouterr().err
    assert main(["train", "--model", "rnn", "--task", "addition", "--lr", "-1", "--out",
                 str(tmp_path / "c")]) == 1
    assert "learning rate must be > 0" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_trains_both_models_and_says_where(tmp_path, capsys):
    assert main(["demo", "--steps", "4", "--length", "8", "--out", str(tmp_path), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload["runs"]) == {"rnn", "spectral"} and payload["baseline_mse"] == pytest.approx(1 / 6)
    for run in payload["runs"].values():
        assert os.path.isfile(os.path.join(run["out"], "last.safetensors"))
        assert run["test_mse"] > 0


def test_a_requested_progress_bar_stays_out_of_a_stderr_that_is_not_a_terminal(tmp_path, capsys,
                                                                               monkeypatch):
    import sys

    train(small_config(tmp_path / "quiet", progress=True))
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    train(small_config(tmp_path / "terminal", progress=True, steps=4))
    err = capsys.readouterr().err
    assert "it/s" in err or "s/it" in err


@pytest.mark.slow
def test_demo_draws_no_progress_bar_into_a_redirected_stderr_and_records_what_the_docs_quote(tmp_path,
                                                                                            capsys):
    from spectral_analysis.plotting.docs_blocks import demo_markdown, read_demo_record

    record = tmp_path / "results" / "demo" / "demo.json"
    assert main(["demo", "--steps", "4", "--length", "8", "--out", str(tmp_path),
                 "--record", str(record)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "test MSE" in out  # stderr is not a terminal here: no bars, text mode or not
    kept = read_demo_record(tmp_path / "results")
    assert kept["steps"] == 4 and kept["machine"] and kept["torch"] == torch.__version__
    table = demo_markdown(kept)
    for run in kept["runs"].values():
        assert f"test MSE {run['test_mse']:.4f}" in out and f"test MSE {run['test_mse']:.4f}" in table
        assert all(f"{value:.2f}" in table for value in run["log10_G"].values())
    with pytest.raises(ValueError, match="demo --record"):
        read_demo_record(tmp_path)


def test_divergence_stops_with_the_failing_step_logged_and_the_last_good_checkpoint_kept(tmp_path,
                                                                                         monkeypatch):
    from spectral_analysis.train import TrainingDivergedError, trainer

    real, calls = trainer.task_loss_and_metrics, {"n": 0}

    def nan_at_step_5(*args, **kwargs):
        loss, metrics = real(*args, **kwargs)
        calls["n"] += 1
        return (loss * float("nan") if calls["n"] == 5 else loss), metrics

    monkeypatch.setattr(trainer, "task_loss_and_metrics", nan_at_step_5)
    config = TrainConfig(model="rnn", task="addition", out=str(tmp_path / "run"), hidden=8, steps=20,
                         task_options={"length": 6, "train_size": 64, "valid_size": 8, "test_size": 8},
                         batch_size=16, record_every=1, eval_every=1000, checkpoint_every=1, progress=False)
    with pytest.raises(TrainingDivergedError, match=r"loss is nan at step 5: training diverged"):
        train(config)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1] == {"step": 5, "phase": "diverged", "reason": "the training loss is nan"}
    last = load_checkpoint(tmp_path / "run" / "last.safetensors")
    assert last.metadata["step"] == 4
    assert all(bool(torch.isfinite(v).all()) for v in last.model.state_dict().values())


def test_tensorboard_event_files_mirror_the_log(tmp_path):
    """``--tensorboard``: every numeric metric of metrics.jsonl as a scalar, the singular values as a
    histogram; the values equal the log's."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from spectral_analysis.cli import main

    out = tmp_path / "run"
    assert main(["train", "--model", "spectral", "--m1", "2", "--m2", "2", "--task", "addition",
                 "--length", "5", "--train-size", "32", "--valid-size", "8", "--test-size", "8",
                 "--hidden", "4", "--steps", "6", "--batch-size", "8", "--record-every", "2",
                 "--eval-every", "3", "--no-progress", "--tensorboard", "--out", str(out), "--json"]) == 0
    guidance = {"scalars": 0, "histograms": 0}
    events = EventAccumulator(str(out / "tensorboard"), size_guidance=guidance).Reload()
    scalars = set(events.Tags()["scalars"])
    assert {"train/loss", "train/spectral_margin", "valid/mse", "test/mse"} <= scalars
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    logged = {r["step"]: r["loss"] for r in rows if r.get("phase", "train") == "train" and "loss" in r}
    written = {e.step: e.value for e in events.Scalars("train/loss")}
    assert written.keys() == logged.keys()
    assert all(written[s] == pytest.approx(logged[s], rel=1e-6) for s in logged)
    assert any(t.startswith("train/singular_values") for t in events.Tags()["histograms"])


def test_a_sweep_trial_writes_tensorboard_events_when_asked(tmp_path):
    pytest.importorskip("tensorboard")
    from dataclasses import asdict

    from spectral_analysis.experiments import load_catalog
    from spectral_analysis.experiments.trial import TrialSpec, run_trial

    trial = load_catalog()["fig1-addition"].trials("smoke")[0]
    for tensorboard in (False, True):
        run_dir = tmp_path / f"run-{tensorboard}"
        outcome = run_trial(TrialSpec(asdict(trial), str(run_dir), str(tmp_path / f"results-{tensorboard}"),
                                      "cpu", "test", tensorboard=tensorboard))
        assert outcome["status"] == "done"
        assert any((run_dir / "tensorboard").glob("events.out.tfevents.*")) == tensorboard


def test_evaluation_forms_parametrized_weights_once_per_split_and_scores_as_uncached():
    from spectral_analysis.data.base import Split, TaskData
    from spectral_analysis.nn import build_model
    from spectral_analysis.nn.parametrize import SVDParametrization
    from spectral_analysis.train.evaluation import evaluate

    torch.manual_seed(0)
    model = build_model("spectral-mlp", 6, 5, 3, num_layers=2)
    split = Split(torch.randn(40, 6), torch.randint(0, 3, (40,)))
    task = TaskData("flat", "classification", 6, 3, 1, split, split, split)
    calls = []
    original = SVDParametrization.forward
    try:
        SVDParametrization.forward = lambda self, *a: calls.append(1) or original(self, *a)
        metrics = evaluate(model, task, split, 8, torch.device("cpu"))  # 5 batches
    finally:
        SVDParametrization.forward = original
    assert len(calls) == 4  # input, two hidden and output layers: once each, not once per batch
    with torch.no_grad():
        logits = model(split.inputs)
    assert metrics["accuracy"] == pytest.approx((logits.argmax(-1) == split.targets).float().mean().item())
    assert metrics["cross_entropy"] == pytest.approx(
        torch.nn.functional.cross_entropy(logits, split.targets).item(), rel=1e-6)


def test_frozen_parameters_keep_their_initial_values_and_the_others_train(tmp_path):
    config = small_config(tmp_path / "run", model="kru", hidden=16, model_options={"complex": True}, steps=6,
                     freeze=["transitions.*"])
    trainer = Trainer(config)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    W = trainer.model.transitions[0].matrix().detach()
    assert torch.allclose(W.T @ W, torch.eye(W.shape[0]), atol=1e-5)  # KRU's unitary start
    trainer.run()
    after = dict(trainer.model.named_parameters())
    frozen = [n for n in before if n.startswith("transitions.")]
    assert frozen and all(torch.equal(before[n], after[n]) for n in frozen)
    assert all(not torch.equal(before[n], after[n]) for n in before if n not in frozen)
    resumed = Trainer(small_config(tmp_path / "run", model="kru", hidden=16, model_options={"complex": True},
                              steps=8, freeze=["transitions.*"]), resume=True)
    resumed.run()
    assert all(torch.equal(before[n], dict(resumed.model.named_parameters())[n]) for n in frozen)


@pytest.mark.parametrize("freeze, message", [
    (["recurrent_weights*"], "matches no parameter of the model; its parameters are transitions.0"),
    (["*"], "matches every parameter: nothing would train"),
    ("transitions.*", "freeze must be a list of parameter-name patterns"),
])
def test_a_bad_freeze_pattern_is_refused_naming_the_problem(tmp_path, freeze, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.").replace("*", r"\*")):
        Trainer(small_config(tmp_path / "run", model="rnn", freeze=freeze, model_options={}))


def test_the_freeze_flag_reaches_the_run(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--model", "rnn", "--task", "addition", "--length", "8", "--steps", "2",
                 "--hidden", "6", "--freeze", "transitions.*", "--freeze", "output.*", "--no-progress",
                 "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["train"]["freeze"] == ["transitions.*", "output.*"]


def test_a_loss_summed_over_steps_is_the_mean_at_t_times_the_rate_and_a_t_times_smaller_clip(tmp_path):
    """Zaremba et al.'s PTB objective (``sequence_loss = "sum-over-steps"``): SGD at lr with clip c on the
    sum over T steps takes the step SGD at T lr with clip c / T takes on the per-step mean, while the logged
    loss stays the per-step mean."""
    length = 6  # the copy task's sequences are length + 20 steps long
    steps_per_sequence = length + 20
    task = {"length": length, "train_size": 64, "valid_size": 16, "test_size": 16}

    def run(name: str, **recipe) -> tuple[dict, list[dict]]:
        config = small_config(tmp_path / name, model="rnn", task="copy", task_options=task,
                              model_options={"activation": "tanh"}, optimizer="sgd", steps=5, **recipe)
        trainer = Trainer(config)
        trainer.run()
        return ({n: p.detach() for n, p in trainer.model.named_parameters()},
                [line for line in log_lines(tmp_path / name) if line["phase"] == "train"])

    summed, summed_log = run("sum", sequence_loss="sum-over-steps", lr=0.01, clip=2.0)
    mean, mean_log = run("mean", lr=0.01 * steps_per_sequence, clip=2.0 / steps_per_sequence)
    assert all(torch.allclose(summed[n], mean[n], atol=1e-5) for n in summed)
    unscaled, _ = run("unscaled", lr=0.01, clip=2.0)
    assert not all(torch.allclose(summed[n], unscaled[n], atol=1e-3) for n in summed)
    assert summed_log[-1]["loss"] == pytest.approx(summed_log[-1]["cross_entropy"])  # the mean, not the sum
    assert summed_log[0]["grad_norm"] == pytest.approx(steps_per_sequence * mean_log[0]["grad_norm"],
                                                       rel=1e-4)


def test_a_summed_loss_is_refused_where_there_are_no_steps_to_sum(tmp_path):
    with pytest.raises(ValueError, match="sequence_loss 'sum-over-steps' sums a sequence task's loss over "
                                         "its steps; task 'addition' is 'regression-last'"):
        Trainer(small_config(tmp_path / "run", sequence_loss="sum-over-steps"))
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
    with pytest.raises(ValueError, match="unknown sequence_loss 'sum'"):
        small_config(tmp_path / "run", sequence_loss="sum").validate()
