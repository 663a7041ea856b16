"""The PAC-Bayes certificate: the kl inverse, the Gaussian KL, the bound's pieces, and the record."""

import functools
import math

import pytest
import torch

from spectral_analysis.analysis.certify import (
    PRIOR_GRID,
    Posterior,
    certificate_from_posterior,
    certify,
    gaussian_kl,
    kl_bernoulli,
    kl_inverse_upper,
)
from spectral_analysis.cli import main
from spectral_analysis.io import load
from spectral_analysis.nn import build_model
from spectral_analysis.train import TrainConfig, train


def test_kl_inverse_against_closed_cases():
    assert kl_inverse_upper(0.0, math.log(2)) == pytest.approx(0.5, abs=1e-12)  # kl(0 || p) = -ln(1 - p)
    assert kl_inverse_upper(0.3, 0.0) == pytest.approx(0.3, abs=1e-8)  # from above: conservative
    assert kl_bernoulli(0.2, kl_inverse_upper(0.2, 10.0)) == pytest.approx(10.0, rel=1e-6)
    assert kl_inverse_upper(1.0, 0.5) == 1.0
    p = kl_inverse_upper(0.1, 0.05)
    assert kl_bernoulli(0.1, p) == pytest.approx(0.05, abs=1e-10) and p > 0.1
    with pytest.raises(ValueError, match="kl bound must be >= 0"):
        kl_inverse_upper(0.1, -1.0)


def test_gaussian_kl_matches_torch_distributions():
    torch.manual_seed(0)
    mu, w0 = torch.randn(7, dtype=torch.float64), torch.randn(7)
    log_s = torch.randn(7, dtype=torch.float64) * 0.3
    q = torch.distributions.Normal(mu, log_s.exp())
    p = torch.distributions.Normal(w0.double(), math.sqrt(0.04))
    expected = torch.distributions.kl_divergence(q, p).sum()
    assert float(gaussian_kl(mu, log_s, w0.double(), 0.04)) == pytest.approx(float(expected), rel=1e-12)


def _constant_classifier():
    model = build_model("rnn", 1, 3, 2, output_bias=True)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.output.bias.copy_(torch.tensor([1.0, 0.0]))  # always class 0
    return model


def test_constant_classifier_certificate_is_the_binomial_bound():
    """Q = P concentrated on a constant classifier: KL = 0, every sample errs on exactly the class-1
    examples, so the certificate is the kl inverse of the training error alone."""
    model = _constant_classifier()
    params = {k: v.detach() for k, v in model.named_parameters()}
    posterior = Posterior(params, {k: torch.full_like(v, -30.0) for k, v in params.items()}, params,
                          torch.tensor(0.0))
    x, y = torch.randn(400, 5, 1), torch.cat([torch.zeros(300), torch.ones(100)]).long()
    cert = certificate_from_posterior(model, posterior, x, y, mc_samples=50)
    assert cert.mc_error == pytest.approx(0.25)
    prior_var = cert.prior_variance
    kl = float(posterior.kl(prior_var))
    expected = kl_inverse_upper(kl_inverse_upper(0.25, math.log(2 / 0.01) / 50),
                                (kl + math.log(2 * math.sqrt(400) / (0.025 / len(PRIOR_GRID)))) / 400)
    assert cert.certified_error == pytest.approx(expected, abs=1e-12)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("cert") / "run"
    train(TrainConfig(model="spectral", task="ucr", out=str(out), hidden=8, steps=60, batch_size=16,
                      model_options={"m1": 4, "m2": 4}, task_options={"dataset": "Coffee"}, lr=1e-2,
                      eval_every=1000, checkpoint_every=1000, progress=False))
    return out / "last.safetensors"


def test_more_mc_samples_tighten_the_bound_at_fixed_q(trained):
    subject = load(trained)
    model = subject.model
    params = {k: v.detach() for k, v in model.named_parameters()}
    posterior = Posterior(params, {k: torch.full_like(v, -5.0) for k, v in params.items()}, params,
                          torch.tensor(math.log(1e-3)))
    from spectral_analysis.analysis.checkpoint_data import checkpoint_task
    task = checkpoint_task(subject.metadata)
    few = certificate_from_posterior(model, posterior, task.train.inputs, task.train.targets, mc_samples=5)
    many = certificate_from_posterior(model, posterior, task.train.inputs, task.train.targets, mc_samples=200)
    assert many.mc_error_upper - many.mc_error < few.mc_error_upper - few.mc_error


def test_the_certificate_never_reads_the_test_split_and_is_deterministic(trained, monkeypatch, capsys):
    args = ["certify", str(trained), "--mc-samples", "10", "--epochs", "2", "--json"]
    assert main(args) == 0
    import json
    first = json.loads(capsys.readouterr().out)
    from spectral_analysis import data
    real = data.ucr_task

    @functools.wraps(real)  # keeps the signature load_task validates options against
    def poisoned(*a, **k):
        task = real(*a, **k)
        task.test.inputs.fill_(float("nan"))
        task.test.targets.fill_(0)
        return task

    monkeypatch.setattr(data, "ucr_task", poisoned)
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["certified_error"] == first["certified_error"]  # same seed, no test data read
    assert 0 < first["certified_error"] <= 1 and first["m"] > 0


def test_certify_refuses_tasks_without_classes(tmp_path, capsys):
    out = tmp_path / "run"
    train(TrainConfig(model="rnn", task="addition", out=str(out), hidden=4, steps=2, progress=False,
                      batch_size=4,
                      task_options={"length": 5, "train_size": 20, "valid_size": 5, "test_size": 5}))
    assert main(["certify", str(out / "last.safetensors")]) == 1
    assert "needs one class per sequence" in capsys.readouterr().err
    subject = load(out / "last.safetensors")
    with pytest.raises(ValueError, match="delta must lie in"):
        certify(subject, torch.randn(4, 5, 2), torch.zeros(4).long(), delta=1.5)


def test_bounds_table_rows_for_the_zoo_and_the_refusals(trained, capsys, tmp_path):
    from spectral_analysis.analysis.bounds_table import COLUMNS, bounds_row

    row = bounds_row(str(trained), certificate=True, mc_samples=5, epochs=1)
    assert set(row) == set(COLUMNS) and row["note"] is None
    assert 0 <= row["test_error"] <= 1 and row["log10_G"] > 0 and 0 < row["certified_error"] <= 1
    csv = tmp_path / "t.csv"
    assert main(["bounds-table", "--experiment", "table4-ucr", "--out", str(csv), "--json"]) == 0
    import json
    rows = json.loads(capsys.readouterr().out)["rows"]
    lstm = [r for r in rows if r["model"] == "lstm"]
    assert len(rows) == 16 and lstm
    assert all("gated update" in r["note"] and r["log10_G"] is None for r in lstm)
    assert csv.read_text().startswith(",".join(COLUMNS))
