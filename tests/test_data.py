"""Tasks: shapes, ranges, seeds and baselines; loaders of packaged data and of a user's own files."""

import gzip
import math
import struct
from functools import partial

import numpy as np
import pytest
import torch

from spectral_analysis.data import load_task, task_options, ucr_input_size
from spectral_analysis.data.synthetic import BLANK, MARKER


def test_addition_shapes_markers_and_the_0167_baseline():
    task = load_task("addition", length=50, train_size=20000, valid_size=10, test_size=10, seed=3)
    x, y = task.train.inputs, task.train.targets
    assert x.shape == (20000, 50, 2) and y.shape == (20000, 1)
    assert bool(((x[..., 0] >= 0) & (x[..., 0] <= 1)).all())
    markers = x[..., 1]
    assert torch.equal(markers.sum(1), torch.full((20000,), 2.0))
    assert torch.equal(markers[:, :25].sum(1), torch.ones(20000))  # one in each half
    assert torch.allclose((x[..., 0] * markers).sum(1, keepdim=True), y)
    predict_one = float(((y - 1.0) ** 2).mean())
    assert predict_one == pytest.approx(task.baselines["mse_predict_one"], abs=0.005)
    assert task.baselines["mse_predict_one"] == pytest.approx(0.1667, abs=1e-4)
    again = load_task("addition", **task.options)
    assert torch.equal(again.train.inputs, x) and torch.equal(again.test.targets, task.test.targets)
    other = load_task("addition", length=50, train_size=20000, valid_size=10, test_size=10, seed=4)
    assert not torch.equal(other.train.inputs, x)


def test_copy_layout_and_memoryless_baseline():
    T = 30
    task = load_task("copy", length=T, train_size=500, valid_size=5, test_size=5)
    x, y = task.train.inputs, task.train.targets
    assert x.shape == y.shape == (500, T + 20) and task.length == T + 20
    assert bool((x[:, :10] < 8).all())
    assert bool((x[:, T + 9] == MARKER).all())  # a_9 at step T + 10 (1-based)
    rest = torch.cat([x[:, 10:T + 9], x[:, T + 10:]], dim=1)
    assert bool((rest == BLANK).all())
    assert torch.equal(y[:, -10:], x[:, :10]) and bool((y[:, :-10] == BLANK).all())
    assert task.baselines["cross_entropy_memoryless"] == pytest.approx(10 * math.log(8) / (T + 20))
    assert task.data_bound() == 1.0 and task.recall_steps == 10


def test_copy_with_dizzyrnns_recall_loss_scores_only_the_copied_steps():
    from spectral_analysis.data.objectives import task_loss_and_metrics

    T = 30
    every, recall = (load_task("copy", length=T, train_size=64, valid_size=5, test_size=5, recall_loss=r)
                     for r in (False, True))
    assert torch.equal(every.train.inputs, recall.train.inputs) and recall.loss_steps == 10
    y = recall.train.targets
    # the memoryless strategy: the blank with certainty, then a uniform guess among the 8 data symbols
    logits = torch.full((*y.shape, 10), -1e9)
    logits[:, :-10, BLANK] = 0.0
    logits[:, -10:, :8] = 0.0
    assert recall.baselines["cross_entropy_memoryless"] == pytest.approx(math.log(8))
    for task in (every, recall):
        loss, metrics = task_loss_and_metrics(task, logits, y)
        assert float(loss) == pytest.approx(task.baselines["cross_entropy_memoryless"], rel=1e-6)
        assert metrics["cross_entropy"] == pytest.approx(float(loss))
    outputs = torch.randn(*y.shape, 10, requires_grad=True)
    task_loss_and_metrics(recall, outputs, y)[0].backward()
    assert float(outputs.grad[:, :-10].abs().max()) == 0.0 and float(outputs.grad[:, -10:].abs().max()) > 0
    with pytest.raises(ValueError, match="recall_loss must be true or false"):
        load_task("copy", length=T, recall_loss="yes")


def test_packaged_mnist_pixel_two_pixel_permuted_and_flat():
    pixel = load_task("mnist", train_size=100)
    assert pixel.train.inputs.shape == (100, 784, 1) and pixel.length == 784
    assert len(pixel.valid) == 10000 and len(pixel.test) == 10000
    assert float(pixel.train.inputs.min()) >= 0.0 and float(pixel.train.inputs.max()) <= 1.0
    two = load_task("mnist", pixels_per_step=2, train_size=100)
    assert two.train.inputs.shape == (100, 392, 2)
    assert torch.equal(two.train.inputs.reshape(100, -1), pixel.train.inputs.reshape(100, -1))
    permuted = load_task("permuted-mnist", train_size=100, seed=1)
    assert torch.equal(permuted.train.inputs.sort(1).values, pixel.train.inputs.sort(1).values)
    assert not torch.equal(permuted.train.inputs, pixel.train.inputs)
    flat = load_task("mnist-flat", train_size=100)
    assert flat.train.inputs.shape == (100, 784) and flat.kind == "classification"
    assert set(pixel.test.targets.tolist()) == set(range(10))


def _write_idx(path, array: np.ndarray) -> None:
    header = struct.pack(">BBBB", 0, 0, 8, array.ndim) + struct.pack(">" + "I" * array.ndim, *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_mnist_from_a_users_idx_directory(tmp_path):
    rng = np.random.default_rng(0)
    _write_idx(tmp_path / "train-images-idx3-ubyte.gz", rng.integers(0, 256, (10010, 28, 28)))
    _write_idx(tmp_path / "train-labels-idx1-ubyte.gz", rng.integers(0, 10, 10010))
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (7, 28, 28)))
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", rng.integers(0, 10, 7))
    task = load_task("mnist", data_dir=str(tmp_path))
    assert (len(task.train), len(task.valid), len(task.test)) == (10, 10000, 7)
    assert float(task.train.inputs.max()) <= 1.0
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(b"\x00\x00\x08\x01\x00\x00\x00\x09"))
    with pytest.raises(ValueError, match="truncated"):
        load_task("mnist", data_dir=str(tmp_path))
    bomb = tmp_path / "t10k-images-idx3-ubyte.gz"  # a header claiming 4 GB: refused, nothing inflated
    bomb.write_bytes(gzip.compress(struct.pack(">BBBBIII", 0, 0, 8, 3, 60000, 280, 280) + bytes(10 ** 6)))
    with pytest.raises(ValueError, match=r"more than the 1073741824 read"):
        load_task("mnist", data_dir=str(tmp_path))


def _write_nielsen_pickle(path, first_label: int, train: int) -> None:
    import pickle

    parts = [(np.full((n, 784), 0.5, dtype=np.float32), np.full(n, first_label, dtype=np.int64))
             for n in (train, 2, 2)]
    with gzip.open(path, "wb") as f:
        pickle.dump(parts, f)


def test_nielsen_pickle_is_decoded_once_per_file_version_and_code_in_it_is_refused(tmp_path):
    from spectral_analysis.data.mnist import read_nielsen_pickle

    path = tmp_path / "mnist.pkl.gz"
    _write_nielsen_pickle(path, first_label=4, train=3)
    first, again = read_nielsen_pickle(path), read_nielsen_pickle(path)
    assert again[0].inputs is first[0].inputs and int(first[0].targets[0]) == 4  # shared, not re-read
    again[0] = None  # a caller's list is its own
    assert read_nielsen_pickle(path)[0] is first[0]
    _write_nielsen_pickle(path, first_label=7, train=5)  # a new version of the file: another size
    assert [len(s) for s in read_nielsen_pickle(path)] == [5, 2, 2]
    assert int(read_nielsen_pickle(path)[0].targets[0]) == 7
    path.write_bytes(gzip.compress(b"cos\nsystem\n(S'true'\ntR."))  # a pickle that would run a command
    with pytest.raises(ValueError, match="refusing to load"):
        read_nielsen_pickle(path)


def test_a_gzip_bomb_posing_as_the_mnist_pickle_inflates_no_further_than_the_limit(tmp_path, monkeypatch):
    from spectral_analysis.data import mnist

    monkeypatch.setattr(mnist, "MAX_PICKLE_BYTES", 2 ** 20)  # the 1 GiB limit, scaled to a quick test
    path = tmp_path / "mnist.pkl.gz"
    _write_nielsen_pickle(path, first_label=1, train=1000)  # 3 MB inflated, a few KB on disk
    assert path.stat().st_size < 2 ** 16
    with pytest.raises(ValueError, match="inflates past 1048576 bytes"):
        mnist.read_nielsen_pickle(path)


@pytest.mark.parametrize("name,length,n_i,classes", [("ArrowHead", 251, 1, 3), ("GunPoint", 150, 10, 2),
                                                     ("ItalyPowerDemand", 24, 4, 2), ("Coffee", 286, 13, 2)])
def test_packaged_ucr_sets_with_validation_holdout(name, length, n_i, classes):
    task = load_task("ucr", dataset=name)
    assert task.input_size == n_i and task.length * n_i == length and task.output_size == classes
    total = len(task.train) + len(task.valid)
    assert len(task.valid) == round(0.2 * total)
    assert set(task.test.targets.tolist()) <= set(range(classes))


def test_appendix_c_input_size_reproduces_table_4_depths():
    """Table 4's depths (length -> depth), all but 50words (270 -> 27, the rule gives 18)."""
    table = {176: 16, 251: 251, 470: 47, 512: 32, 128: 16, 286: 22, 300: 20, 80: 10, 96: 12, 140: 14,
             136: 17, 131: 131, 350: 25, 150: 15, 256: 16, 24: 6, 637: 49}
    for length, depth in table.items():
        assert length // ucr_input_size(length) == depth
    assert 270 // ucr_input_size(270) == 18


def test_ucr_from_a_users_directory(tmp_path):
    rows = ["1 0.1 0.2 0.3 0.4", "2 0.5 0.6 0.7 0.8", "1 0.0 0.1 0.0 0.1", "2 1.0 1.0 1.0 1.0",
            "1 0.3 0.3 0.3 0.3"]
    (tmp_path / "Toy_TRAIN.tsv").write_text("\n".join(r.replace(" ", "\t") for r in rows))
    (tmp_path / "Toy_TEST.tsv").write_text("\n".join(r.replace(" ", "\t") for r in rows[:2]))
    task = load_task("ucr", dataset="Toy", data_dir=str(tmp_path))
    assert task.input_size == 2 and task.length == 2 and len(task.valid) == 1 and len(task.train) == 4
    assert task.test.targets.tolist() == [0, 1]
    (tmp_path / "Bad_TRAIN.tsv").write_text("1\t0.1\t0.2\n2\t0.3\n")
    (tmp_path / "Bad_TEST.tsv").write_text("1\t0.1\t0.2\n")
    with pytest.raises(ValueError, match="equal-length"):
        load_task("ucr", dataset="Bad", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="not found"):
        load_task("ucr", dataset="Missing", data_dir=str(tmp_path))


def test_penn_treebank_streams():
    task = load_task("ptb", length=35, batch_size=20)
    assert task.input_size == task.output_size == 10000 and task.stream
    assert task.train.inputs.shape[0] == 20
    assert torch.equal(task.train.inputs[:, 1:], task.train.targets[:, :-1])  # shifted by one token
    assert task.baselines["perplexity_uniform"] == 10000.0
    assert 6.0 < task.baselines["cross_entropy_unigram"] < 7.0  # Penn Treebank's unigram: perplexity ~640


def test_ptb_from_a_users_directory(tmp_path):
    for split, text in (("train", "a b c\nb c a\n"), ("valid", "a b\n"), ("test", "c a\n")):
        (tmp_path / f"ptb.{split}.txt").write_text(text)
    task = load_task("ptb", length=2, batch_size=1, data_dir=str(tmp_path))
    assert task.input_size == 4  # a, b, c, <eos>
    # the chance level: the training words' frequencies, one added to each count (a b c <eos> b c a <eos>,
    # less the stream's first word: counts 1, 2, 2, 2 plus one), scored on the test stream's targets
    shares = torch.full((4,), 3.0 / 11.0)
    shares[task.train.inputs[0, 0]] = 2.0 / 11.0  # "a", the stream's first word, is a target once
    expected = -shares.log()[task.test.targets.flatten()].mean()
    assert task.baselines["cross_entropy_unigram"] == pytest.approx(float(expected))
    (tmp_path / "ptb.test.txt").write_text("zebra\n")
    with pytest.raises(ValueError, match="outside the training vocabulary"):
        load_task("ptb", length=2, batch_size=1, data_dir=str(tmp_path))


@pytest.mark.parametrize("call,match", [
    (lambda: load_task("sine"), "unknown task"),
    (lambda: load_task("addition", dataset="x"), r"does not take option\(s\) \['dataset'\]"),
    (lambda: load_task("addition", length=0), "length must be"),
    (lambda: load_task("ucr"), "needs a dataset"),
    (lambda: load_task("mnist", pixels_per_step=3), "pixels_per_step"),
    (lambda: load_task("mnist", data_dir="/nonexistent"), "not found"),
])
def test_bad_task_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_task_options_are_listed():
    assert "length" in task_options("addition") and "dataset" in task_options("ucr")


def test_each_task_declares_the_bound_of_its_input_domain():
    """Theorem 5's B bounds ||x_t|| for every input, not only the training sample."""
    addition = load_task("addition", length=20, train_size=50, valid_size=10, test_size=10)
    B, source = addition.theorem_bound()
    assert pytest.approx(2 ** 0.5) == B and source.startswith("input domain")
    assert addition.data_bound() <= B
    two = load_task("mnist", pixels_per_step=2, train_size=100)
    B, source = two.theorem_bound()
    assert pytest.approx(2 ** 0.5) == B and "pixel(s) in [0, 1]" in source and two.data_bound() <= B
    assert load_task("copy", length=10, train_size=20, valid_size=5, test_size=5).theorem_bound()[0] == 1.0
    ucr = load_task("ucr", dataset="Coffee")
    B, source = ucr.theorem_bound()
    assert "checked only on that sample" in source
    assert pytest.approx(max(float(s.inputs.norm(dim=-1).max()) for s in (ucr.train, ucr.test))) == B


@pytest.mark.slow
def test_ptb_at_the_character_level_is_kru_s_reading_of_the_same_text(tmp_path):
    """Words joined by single spaces, character by character, <eos> closing each line; the packaged text
    gives KRU's character counts exactly (Section 4.4: 5017K, 393K, 442K; 50 symbols)."""
    for split, text in (("train", "ab  c\n\nb a\n"), ("valid", "a b\n"), ("test", "c\n")):
        (tmp_path / f"ptb.{split}.txt").write_text(text)
    task = load_task("ptb", length=2, batch_size=1, data_dir=str(tmp_path), level="char")
    assert task.input_size == 5  # a, b, space, c, <eos>
    assert task.train.inputs[0].tolist() + task.train.targets[0, -1:].tolist() == [0, 1, 2, 3, 4, 1, 2, 0, 4]
    assert task.options["level"] == "char" and "level" not in load_task(
        "ptb", length=2, batch_size=1, data_dir=str(tmp_path)).options  # word-level options as before
    with pytest.raises(ValueError, match="level must be one of"):
        load_task("ptb", length=2, batch_size=1, data_dir=str(tmp_path), level="byte")
    from spectral_analysis.data.text import char_ids, read_ptb, token_ids, tokenize

    packaged = read_ptb()
    counts = {split: len(tokenize(text, "char")) for split, text in packaged.items()}
    assert counts == {"train": 5_017_482, "valid": 393_042, "test": 442_423}
    for texts in (packaged, {"train": "é <unk> b\r\n \t \n\x0ca\u2028N  é", "valid": "b é", "test": "N"}):
        size, fast = char_ids(texts)  # the fast path against the reference, ids and vocabulary
        assert (size, {k: v.tolist() for k, v in fast.items()}) == (
            token_ids(texts, "char")[0], {k: v.tolist() for k, v in token_ids(texts, "char")[1].items()})
    outside = (({"train": "ab\n", "valid": "a\n", "test": "abz\n"}, "test text has chars .* \\['z'\\]"),
               ({"train": "", "valid": "a", "test": ""}, "valid text .* \\['<eos>', 'a'\\]"))
    for texts, unknown in outside:  # the same error from both, naming the split and the symbols
        for ids in (char_ids, partial(token_ids, level="char")):
            with pytest.raises(ValueError, match=f"{unknown}$"):
                ids(texts)
    assert load_task("ptb", length=30, batch_size=50, level="char").input_size == 50


def test_the_constant_predictor_loss_is_the_task_loss_of_the_best_input_blind_prediction():
    """Through ``loss_and_metrics`` itself: the training targets' own marginals, predicted for every
    input, score exactly ``constant_predictor_loss``; moving the prediction only raises it; and it meets
    the closed forms (the adding problem's variance 1/6, the copy task's memoryless strategy)."""
    from spectral_analysis.data.base import Split, TaskData
    from spectral_analysis.data.objectives import PADDED, constant_predictor_loss, task_loss_and_metrics

    addition = load_task("addition", length=10, train_size=20000, valid_size=5, test_size=5)
    y = addition.train.targets
    mean = torch.full((len(y), 1, 1), float(y.mean()))
    assert constant_predictor_loss(addition, addition.train) == pytest.approx(
        float(task_loss_and_metrics(addition, mean, y)[0]), rel=1e-5)
    assert constant_predictor_loss(addition, addition.train) == pytest.approx(1 / 6, abs=0.005)
    assert float(task_loss_and_metrics(addition, mean + 0.05, y)[0]) > constant_predictor_loss(
        addition, addition.train)
    for recall_loss in (False, True):
        copy = load_task("copy", length=30, train_size=4000, valid_size=5, test_size=5,
                         recall_loss=recall_loss)
        y = copy.train.targets
        shares = torch.nn.functional.one_hot(y, 10).double().mean(0)  # each position's own distribution
        logits = shares.clamp(min=1e-300).log().float().expand(len(y), -1, -1)
        loss = constant_predictor_loss(copy, copy.train)
        assert loss == pytest.approx(float(task_loss_and_metrics(copy, logits, y)[0]), rel=1e-4)
        assert loss == pytest.approx(copy.baselines["cross_entropy_memoryless"], rel=0.01)
    ptb = load_task("ptb", length=35, batch_size=20)
    unigram = constant_predictor_loss(ptb, ptb.train)
    assert 6.0 < unigram < math.log(10000)  # word frequencies alone: Penn Treebank's unigram entropy
    labels = torch.tensor([0, 0, 1, 2])
    counts = TaskData("labels", "classification-last", 1, 3, 1, *[Split(torch.zeros(4, 1, 1), labels)] * 3)
    assert constant_predictor_loss(counts, counts.train) == pytest.approx(-(0.5 * math.log(0.5)
                                                                             + 0.5 * math.log(0.25)))
    roll = torch.tensor([[[1.0, 0.0], [1.0, 1.0], [PADDED, PADDED]]])  # label 0 always on, label 1 half
    music = TaskData("roll", "multilabel-sequence", 2, 2, 3, *[Split(roll, roll)] * 3)
    assert constant_predictor_loss(music, music.train) == pytest.approx(math.log(2), rel=1e-6)
