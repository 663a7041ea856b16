"""The chorales task (KRU Sections 4.5 and 4.7): piano rolls from music21, next-frame prediction with a
masked multi-label loss, the parse cache, a user's own files."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

music21 = pytest.importorskip("music21")

from spectral_analysis.data import load_task, music  # noqa: E402
from spectral_analysis.data.objectives import PADDED, loss_and_metrics  # noqa: E402

CHORALES = ["bach/bwv269", "bach/bwv347", "bach/bwv153.1"]


def _score(notes: list[tuple[float, float, list[int]]]):
    """A one-part score of (offset, quarter length, MIDI pitches) notes and chords."""
    part = music21.stream.Part()
    for offset, length, pitches in notes:
        item = music21.chord.Chord(pitches) if len(pitches) > 1 else music21.note.Note(pitches[0])
        item.quarterLength = length
        part.insert(offset, item)
    return music21.stream.Score([part])


def test_a_piano_roll_samples_each_beat_and_skips_notes_between_beats():
    roll = music.piano_roll(_score([(0, 1, [60]), (1, 2, [64, 67]), (3, 0.5, [62]), (3.5, 0.5, [65])]))
    assert roll.shape == (4, 88)
    on = {t: sorted(int(k) + 21 for k in torch.nonzero(roll[t]).flatten()) for t in range(4)}
    assert on == {0: [60], 1: [64, 67], 2: [64, 67], 3: [62]}  # the eighth at 3.5 sounds at no beat


def _few_chorales(monkeypatch, tmp_path, names=CHORALES):
    monkeypatch.setenv("SPECTRAL_ANALYSIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(music21.corpus.chorales, "Iterator", lambda returnType: list(names))


def test_the_task_shifts_frames_pads_with_a_mark_and_caches_the_parse(monkeypatch, tmp_path):
    _few_chorales(monkeypatch, tmp_path)
    rolls = music.read_chorales()
    assert len(rolls) == 3 and all(r.shape[1] == 88 and set(r.unique().tolist()) <= {0.0, 1.0} for r in rolls)
    monkeypatch.setattr(music21.corpus, "parse", lambda name: pytest.fail("parsed despite the cache"))
    task = load_task("jsb")
    assert (len(task.train), len(task.valid), len(task.test)) == (1, 1, 1)
    assert task.length == max(len(r) for r in rolls) - 1 and task.kind == "multilabel-sequence"
    for split in (task.train, task.valid, task.test):
        for x, y in zip(split.inputs, split.targets, strict=True):
            frames = int((y[:, 0] != PADDED).sum())
            roll = next(r for r in rolls if len(r) == frames + 1 and torch.equal(r[:-1], x[:frames]))
            assert torch.equal(y[:frames], roll[1:])  # the target is the next frame
            assert bool((y[frames:] == PADDED).all()) and bool((x[frames:] == 0).all())
    # the chance level: each key at its training rate (add-one), scored by the task's own masked loss
    played = task.train.targets[task.train.targets[..., 0] != PADDED]
    rates = (played.sum(0) + 1) / (len(played) + 2)
    logits = (rates.log() - (1 - rates).log()).expand_as(task.test.targets)
    nll = loss_and_metrics(task.kind, logits, task.test.targets)[1]["nll"]
    assert task.baselines["nll_note_rates"] == pytest.approx(nll, rel=1e-5)


def test_a_corrupt_cache_is_parsed_again(monkeypatch, tmp_path):
    _few_chorales(monkeypatch, tmp_path, CHORALES[:1])
    cache = tmp_path / "cache" / f"chorales-music21-{music21.__version__}.safetensors"
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"not a safetensors file")
    (roll,) = music.read_chorales()
    assert roll.shape[1] == 88 and len(music.read_chorales()) == 1 and cache.stat().st_size > 100


def test_the_masked_loss_is_the_bernoulli_nll_of_the_unpadded_frames():
    torch.manual_seed(0)
    targets = (torch.rand(2, 5, 88) < 0.05).float()
    targets[1, 3:] = PADDED
    outputs = torch.randn(2, 5, 88, requires_grad=True)
    loss, metrics = loss_and_metrics("multilabel-sequence", outputs, targets)
    kept = torch.cat([targets[0], targets[1, :3]])
    logits = torch.cat([outputs[0], outputs[1, :3]])
    expected = -(kept * F.logsigmoid(logits) + (1 - kept) * F.logsigmoid(-logits)).sum() / 8
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert metrics["nll"] == pytest.approx(loss.item())
    loss.backward()
    assert float(outputs.grad[1, 3:].abs().max()) == 0.0 and float(outputs.grad[1, :3].abs().max()) > 0


def test_a_users_music_files_and_bad_input(tmp_path):
    for i in range(3):
        _score([(0, 1, [60 + i]), (1, 1, [62 + i]), (2, 2, [64, 67 + i])]).write(
            "musicxml", fp=str(tmp_path / f"piece{i}.musicxml"))
    task = load_task("jsb", data_dir=str(tmp_path))
    assert sum(len(s) for s in (task.train, task.valid, task.test)) == 3 and task.length == 3
    with pytest.raises(ValueError, match="no music files"):
        load_task("jsb", data_dir=str(tmp_path / "nothing"))


def test_kru_trains_on_the_chorales_and_the_plateau_rule_reads_nll_as_lower_is_better(monkeypatch, tmp_path):
    from spectral_analysis.train import TrainConfig, train
    from spectral_analysis.train.plateau import best_validation

    _few_chorales(monkeypatch, tmp_path)
    config = TrainConfig(model="kru", task="jsb", out=str(tmp_path / "run"), hidden=4, steps=40, lr=5e-2,
                         batch_size=1, record_every=5, eval_every=10, checkpoint_every=40, progress=False)
    latest = train(config)
    assert latest["test"]["nll"] < 88 * 0.6931  # below an untrained net's ln 2 per key
    lines = [{"step": 10, "nll": 3.0}, {"step": 20, "nll": 1.0}, {"step": 30, "nll": 2.0}]
    assert best_validation(lines, "nll") == (1.0, 20)


def test_evaluation_averages_the_nll_over_frames_not_over_batches(monkeypatch, tmp_path):
    from spectral_analysis.nn import build_model
    from spectral_analysis.train.evaluation import evaluate, model_outputs

    _few_chorales(monkeypatch, tmp_path)
    task = load_task("jsb")
    split = music._split([r for split in (task.train, task.valid, task.test) for r in _rolls(split)],
                         task.length)
    torch.manual_seed(0)
    model = build_model("rnn", 88, 6, 88)
    by_batches = evaluate(model, task, split, batch_size=1, device=torch.device("cpu"))["nll"]
    with torch.no_grad():
        outputs = model_outputs(model, split.inputs)[0]
        whole = loss_and_metrics("multilabel-sequence", outputs, split.targets)[0]
    assert by_batches == pytest.approx(whole.item(), rel=1e-5)  # pieces of different lengths


def _rolls(split) -> list[torch.Tensor]:
    """The piano rolls back from a split's inputs and targets."""
    rolls = []
    for x, y in zip(split.inputs, split.targets, strict=True):
        frames = int((y[:, 0] != PADDED).sum())
        rolls.append(torch.cat([x[:1], y[:frames]]))
    return rolls
