"""Polyphonic music (KRU, Sections 4.5 and 4.7): Bach chorales as piano rolls, from ``music21``'s corpus
or a user's directory of MusicXML / MIDI files.

A chorale becomes one frame per quarter note: an 88-key binary vector (MIDI pitches 21-108) of the
notes sounding at that beat. The task is next-frame prediction: the input at step t is frame t and
the target frame t + 1. Chorales differ in length, so every split is padded to its longest chorale;
padded target frames hold -1 and are left out of the loss (``multilabel-sequence`` in
:mod:`~spectral_analysis.data.objectives`). The loss is the negative log-likelihood of a frame under
88 independent Bernoulli outputs, summed over keys and averaged over frames: the "average negative
log-likelihood" of KRU's Table 4 (Boulanger-Lewandowski et al.'s measure).

The packaged source is ``music21.corpus.chorales.Iterator``: Riemenschneider's 371 four-part chorales
(the JSB Chorales set of Boulanger-Lewandowski et al. has 382 and its own split, which does not
ship). The split here is a seeded shuffle, 60/20/20. Parsing takes about a minute; the piano rolls are
kept in a cache file (``$SPECTRAL_ANALYSIS_CACHE``, else ``~/.cache/spectral-analysis``) read without
running code (safetensors).
"""

from __future__ import annotations

import fcntl
import math
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from spectral_analysis.data.base import Split, TaskData
from spectral_analysis.data.objectives import PADDED

LOWEST_KEY, KEYS = 21, 88  # the piano's MIDI range 21-108
FRAME_QUARTERS = 1.0  # one frame per quarter note
SPLIT_FRACTIONS = (0.6, 0.2)  # train, valid; the rest is test
MUSIC_FILES = ("*.mxl", "*.musicxml", "*.xml", "*.mid", "*.midi")


def cache_dir() -> Path:
    env = os.environ.get("SPECTRAL_ANALYSIS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "spectral-analysis"


def piano_roll(score) -> torch.Tensor:
    """``(frames, 88)`` of a music21 score: 1 where a note sounds at a frame's start (a note that starts
    and ends between two frame starts, a passing eighth, is not sampled)."""
    frames = max(1, math.ceil(float(score.highestTime) / FRAME_QUARTERS))
    roll = torch.zeros(frames, KEYS)
    for note in score.flatten().notes:
        start, end = float(note.offset), float(note.offset + note.quarterLength)
        first, last = math.ceil(start / FRAME_QUARTERS), math.ceil(end / FRAME_QUARTERS)
        for pitch in note.pitches:
            key = pitch.midi - LOWEST_KEY
            if 0 <= key < KEYS:
                roll[first:last, key] = 1.0
    return roll


def _music21():
    try:
        import music21
    except ImportError:
        raise ValueError("the chorales need the 'music21' package (pip install music21, or the "
                         "toolkit's data extra) or --data-dir with MusicXML / MIDI files") from None
    return music21


def _packed(rolls: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    return {"frames": torch.cat(rolls).to(torch.uint8), "lengths": torch.tensor([len(r) for r in rolls])}


def _unpacked(tensors: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    frames, lengths = tensors["frames"], tensors["lengths"]
    if frames.dim() != 2 or frames.shape[1] != KEYS or int(lengths.sum()) != frames.shape[0]:
        raise ValueError("corrupt chorale cache: frames and lengths do not agree")
    return [part.float() for part in torch.split(frames, lengths.tolist())]


def read_chorales(data_dir: str | None = None) -> list[torch.Tensor]:
    """Piano rolls of the packaged chorales (cached after the first parse) or of every music file in
    ``data_dir``, in a fixed order."""
    music21 = _music21()
    if data_dir:
        paths = sorted(p for pattern in MUSIC_FILES for p in Path(data_dir).glob(pattern))
        if not paths:
            raise ValueError(f"no music files ({', '.join(MUSIC_FILES)}) in {data_dir}")
        return [piano_roll(music21.converter.parse(str(p))) for p in paths]
    cache = cache_dir() / f"chorales-music21-{music21.__version__}.safetensors"
    cache.parent.mkdir(parents=True, exist_ok=True)
    # one process parses at a time: music21 keeps its parses in compressed files of its own, which two
    # workers parsing at once (a sweep's trials) read half-written; the others then read this cache
    with open(cache.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cache.is_file():
            try:
                return _unpacked(load_file(str(cache)))
            except Exception:  # noqa: BLE001 - a torn or foreign cache file is parsed again and rewritten
                pass
        names = list(music21.corpus.chorales.Iterator(returnType="filename"))
        rolls = [piano_roll(music21.corpus.parse(name)) for name in names]
        partial = cache.with_suffix(f".{os.getpid()}.partial")
        save_file(_packed(rolls), str(partial))
        partial.replace(cache)
    return rolls


def _split(rolls: list[torch.Tensor], longest: int) -> Split:
    """Inputs are frames 0..T-2 and targets frames 1..T-1, padded to ``longest`` steps."""
    inputs = torch.zeros(len(rolls), longest, KEYS)
    targets = torch.full((len(rolls), longest, KEYS), PADDED)
    for i, roll in enumerate(rolls):
        inputs[i, :len(roll) - 1] = roll[:-1]
        targets[i, :len(roll) - 1] = roll[1:]
    return Split(inputs, targets)


def note_rate_nll(train: Split, test: Split) -> float:
    """The test negative log-likelihood a frame (nats, summed over the keys) of playing each key at its
    training rate, whatever came before: the chorales' chance level. Rates are (count + 1) / (frames + 2),
    so a key never played in training costs a finite amount."""
    played = train.targets[train.targets[..., 0] != PADDED].double()
    rates = (played.sum(0) + 1.0) / (len(played) + 2.0)
    frames = test.targets[test.targets[..., 0] != PADDED].double()
    return float(-(frames * rates.log() + (1 - frames) * (1 - rates).log()).sum(-1).mean())


def jsb_task(seed: int = 0, data_dir: str | None = None) -> TaskData:
    """Bach chorales, next-frame prediction (see the module docstring)."""
    rolls = [r for r in read_chorales(data_dir) if len(r) >= 2]
    if len(rolls) < 3:
        raise ValueError(f"the chorale task needs at least 3 pieces of 2 frames or more, got {len(rolls)}")
    order = torch.randperm(len(rolls), generator=torch.Generator().manual_seed(seed)).tolist()
    count = len(rolls)  # every split gets at least one piece
    train_end = max(1, min(count - 2, round(SPLIT_FRACTIONS[0] * count)))
    valid_end = max(train_end + 1, min(count - 1, train_end + round(SPLIT_FRACTIONS[1] * count)))
    parts = [order[:train_end], order[train_end:valid_end], order[valid_end:]]
    longest = max(len(r) for r in rolls) - 1
    splits = [_split([rolls[i] for i in part], longest) for part in parts]
    return TaskData("jsb", "multilabel-sequence", KEYS, KEYS, longest, *splits,
                    options={"seed": seed, "data_dir": data_dir},
                    baselines={"nll_note_rates": note_rate_nll(splits[0], splits[2])},
                    domain_bound=math.sqrt(KEYS), domain="88-key binary frames")
