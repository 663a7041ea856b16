"""The PAC-Bayes certificate: the kl inverse, the Gaussian KL, the bound's pieces, and the record."""

import functools
import json
import math

import pytest
import torch
from train_fixtures import constant_classifier

from spectral_analysis.analysis import certify as certify_module
from spectral_analysis.analysis.certify import certificate_from_posterior, certify, monte_carlo_error
from spectral_analysis.analysis.posterior import (
    NOISE_GRID,
    NOISE_TOLERANCE,
    PRIOR_GRID,
    Posterior,
    error_rate,
    fit_posterior,
    gaussian_kl,
    kl_bernoulli,
    kl_inverse_upper,
    last_logits,
    noise_probe,
    pac_bayes_objective,
)
from spectral_analysis.analysis.priors import prior_split
from spectral_analysis.cli import main
from spectral_analysis.io import load
from spectral_analysis.io.subjects import as_subject
from spectral_analysis.nn import build_model
from spectral_analysis.train import TrainConfig, train
from spectral_analysis.vocabulary import OBJECTIVES


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


def test_constant_classifier_certificate_is_the_binomial_bound():
    """Q = P concentrated on a constant classifier: KL = 0, every sample errs on exactly the class-1
    examples, so the certificate is the kl inverse of the training error alone."""
    model = constant_classifier()
    params = {k: v.detach() for k, v in model.named_parameters()}
    posterior = Posterior(params, {k: torch.full_like(v, -30.0) for k, v in params.items()}, params,
                          torch.tensor(0.0))
    x, y = torch.randn(400, 5, 1), torch.cat([torch.zeros(300), torch.ones(100)]).long()
    cert = certificate_from_posterior(model, posterior, x, y, mc_samples=50, chunk_size=50)
    assert cert.mc_error == pytest.approx(0.25) and (cert.mc_samples, cert.mc_passes) == (56, 7)
    prior_var = cert.prior_variance
    kl = float(posterior.kl(prior_var))
    expected = kl_inverse_upper(kl_inverse_upper(0.25, math.log(2 / 0.01) / 56),
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
    few = certificate_from_posterior(model, posterior, task.train.inputs, task.train.targets, mc_samples=5,
                                     chunk_size=28)
    many = certificate_from_posterior(model, posterior, task.train.inputs, task.train.targets, mc_samples=200,
                                      chunk_size=28)
    assert many.mc_error_upper - many.mc_error < few.mc_error_upper - few.mc_error


def test_the_certificate_never_reads_the_test_split_and_is_deterministic(trained, monkeypatch, capsys):
    args = ["certify", str(trained), "--mc-samples", "10", "--chunk-size", "7", "--epochs", "2", "--json"]
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
    with pytest.raises(ValueError, match="delta and delta_held must lie in"):
        certify(subject, torch.randn(4, 5, 2), torch.zeros(4).long(), delta=1.5)


@pytest.mark.slow
def test_bounds_table_rows_for_the_zoo_and_the_refusals(trained, capsys, tmp_path):
    from spectral_analysis.analysis.bounds_table import COLUMNS, bounds_row

    row = bounds_row(str(trained), ("init",), mc_samples=5, epochs=1)
    assert set(row) == set(COLUMNS) and row["note"] is None
    assert 0 <= row["test_error"] <= 1 and row["log10_G"] > 0 and 0 < row["certified_error_init"] <= 1
    assert 0 <= row["q_test_error_init"] <= 1 and row["kl_init"] > 0 and row["log10_unrolled_bound"] > 0
    assert row["certified_error_learned"] is None and row["sigma_bound"] == pytest.approx(1.1)
    csv = tmp_path / "t.csv"
    figure = tmp_path / "bounds.png"
    assert main(["bounds-table", "--experiment", "table4-ucr", "--out", str(csv), "--figure", str(figure),
                 "--json"]) == 0
    assert figure.stat().st_size > 10_000
    import json
    rows = json.loads(capsys.readouterr().out)["rows"]
    lstm = [r for r in rows if r["model"] == "lstm"]
    from spectral_analysis.experiments import find_experiment

    grid = find_experiment("table4-ucr")  # one zoo network per variant and dataset (seed 0's)
    assert len(rows) == len(grid.variants) * len(grid.axes["task_options.dataset"]) and lstm
    assert all("gated update" in r["note"] and r["log10_G"] is None for r in lstm)
    assert csv.read_text().startswith(",".join(COLUMNS))


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_every_objective_bounds_the_kl_bound_it_relaxes(objective):
    """Each training objective is >= the PAC-Bayes-kl bound kl^-1(L, B) (Pinsker and its refinements), so
    minimizing it minimizes an upper bound of the certificate; a wrong constant breaks this."""
    m, delta = 5000, 0.025
    for loss in (0.0, 0.01, 0.1, 0.3, 0.7):
        for kl in (0.0, 5.0, 100.0, 3000.0):
            value = float(pac_bayes_objective(torch.tensor(loss, dtype=torch.float64),
                                              torch.tensor(kl, dtype=torch.float64), m, delta, objective))
            exact = kl_inverse_upper(loss, (kl + math.log(2 * math.sqrt(m) / delta)) / m)
            assert value >= exact - 1e-9, (objective, loss, kl, value, exact)
    with pytest.raises(ValueError, match="unknown PAC-Bayes objective"):
        pac_bayes_objective(torch.tensor(0.1), torch.tensor(1.0), m, delta, "mcallister")


def _noisy_posterior(model, log_s=-1.5):
    params = {k: v.detach() for k, v in model.named_parameters()}
    return Posterior(params, {k: torch.full_like(v, log_s) for k, v in params.items()}, params,
                     torch.tensor(math.log(1e-2)))


@pytest.mark.slow
def test_chunked_monte_carlo_matches_whole_set_networks():
    """The fast estimator (a fresh network per chunk) against its slow twin (every sampled network scores
    the whole set): same expectation e_S(Q), within a few standard errors."""
    torch.manual_seed(3)
    model = build_model("rnn", 2, 6, 3)
    posterior = _noisy_posterior(model)
    x, y = torch.randn(240, 5, 2), torch.randint(0, 3, (240,))
    generator = torch.Generator().manual_seed(11)
    whole = [error_rate(model, posterior.sample(generator), x, y) for _ in range(300)]
    reference = sum(whole) / len(whole)
    estimate, upper, samples, passes = monte_carlo_error(model, posterior, x, y, 2400, 10, 0.01, seed=5)
    assert (samples, passes) == (2400, 100)
    spread = (sum((w - reference) ** 2 for w in whole) / len(whole)) ** 0.5
    assert abs(estimate - reference) < 4 * (0.5 / math.sqrt(samples * 10) + spread / math.sqrt(300))
    assert upper > estimate


def test_monte_carlo_counts_leftover_examples_as_errors():
    model = constant_classifier()  # always class 0: every example of class 0 is right
    posterior = _noisy_posterior(model, log_s=-30.0)
    x, y = torch.randn(103, 4, 1), torch.zeros(103).long()
    estimate, upper, samples, _ = monte_carlo_error(model, posterior, x, y, 10, 10, 0.01)
    assert estimate == 0.0 and samples == 10
    assert upper == pytest.approx((100 * kl_inverse_upper(0.0, math.log(2 / 0.01) / 10) + 3) / 103)
    with pytest.raises(ValueError, match="chunk_size must lie in"):
        monte_carlo_error(model, posterior, x, y, 10, 500, 0.01)


def test_a_learned_prior_never_sees_the_certificate_part(trained, monkeypatch):
    """The data-dependent prior learns from its own part only: relabelling the certificate part leaves
    the prior unchanged; the split is disjoint and covers the training set."""
    from spectral_analysis.analysis.checkpoint_data import checkpoint_task

    subject = load(trained)
    task = checkpoint_task(subject.metadata)
    x, y = task.train.inputs, task.train.targets
    prior_index, certificate_index = prior_split(len(x), 0.5, seed=0)
    assert set(prior_index.tolist()).isdisjoint(certificate_index.tolist())
    assert len(prior_index) + len(certificate_index) == len(x)
    priors = []
    real = certify_module.train_prior

    def recorded(*args, **kwargs):
        priors.append(real(*args, **kwargs))
        return priors[-1]

    monkeypatch.setattr(certify_module, "train_prior", recorded)
    first, _ = certify(subject, x, y, mc_samples=20, chunk_size=5, epochs=1, prior="learned", prior_epochs=2,
                       objective="quadratic")
    relabelled = y.clone()
    relabelled[certificate_index] = (relabelled[certificate_index] + 1) % int(y.max() + 1)
    second, _ = certify(subject, x, relabelled, mc_samples=20, chunk_size=5, epochs=1, prior="learned",
                        prior_epochs=2, objective="quadratic")
    assert all(torch.equal(priors[0][k], priors[1][k]) for k in priors[0])
    assert first["sample_split"] == {"prior": len(prior_index), "certificate": len(certificate_index),
                                     "prior_data": f"{len(prior_index)} training sequences the certificate "
                                                   "does not use"}
    assert first["m"] == len(certificate_index) and first["objective"] == "quadratic"
    assert first["mc_error"] != second["mc_error"]  # the certificate part did change
    assert first["checkpoint_train_error"] != second["checkpoint_train_error"]
    with pytest.raises(ValueError, match="prior's fraction"):
        prior_split(10, 1.0, 0)
    with pytest.raises(ValueError, match="unknown prior"):
        certify(subject, x, y, prior="posterior")


@pytest.mark.slow
def test_a_feed_forward_classifier_is_certified_too(tmp_path, capsys):
    """The MLP sanity run's path: a toolkit checkpoint of a feed-forward net on flat MNIST; the
    recurrent analyzers still refuse it."""
    out = tmp_path / "mlp"
    train(TrainConfig(model="mlp", task="mnist-flat", out=str(out), hidden=16, steps=20, batch_size=32,
                      model_options={"num_layers": 0}, task_options={"train_size": 200}, eval_every=1000,
                      checkpoint_every=1000, progress=False))
    args = ["certify", str(out / "last.safetensors"), "--mc-samples", "40", "--chunk-size", "10",
            "--epochs", "1", "--prior", "learned", "--prior-epochs", "1", "--json"]
    assert main(args) == 0
    import json
    record = json.loads(capsys.readouterr().out)
    # the prior learns from half the validation split, the perturbations are measured on the other half
    assert record["sample_split"]["prior"] == 5000 and record["m"] == 200
    assert 0 < record["certified_error"] <= 1
    deterministic = record["deterministic"]
    assert deterministic["held_out_n"] == 10000 and deterministic["selections"] == 1
    assert 0 < deterministic["held_out_error"] < deterministic["held_out_bound"] <= 1
    parts = deterministic["q_margin_bound"] + deterministic["perturbation_bound"]
    assert deterministic["derandomized_bound"] == pytest.approx(min(1.0, parts))
    assert 0 <= record["mean_test_error"] <= 1
    from spectral_analysis.cli.analysis import certificate_text

    assert (f"Q with its noise times {deterministic['scaled_q_noise_scale']:g} (the same mean), certified: "
            f"0-1 error <= {deterministic['scaled_q_bound']:.4f}") in certificate_text(record)
    assert main(["bound", str(out / "last.safetensors")]) == 1
    assert "not a recurrent model" in capsys.readouterr().err


def test_a_certificate_is_of_the_subjects_weights_and_names_what_it_certifies(trained):
    """The trained network and the same network at its initialization get different certificates; Q is
    centred on each one's weights (distance 0) unless its mean is fitted, which the record then measures."""
    import copy

    from spectral_analysis.analysis.checkpoint_data import checkpoint_task
    from spectral_analysis.analysis.priors import prior_mean

    subject = load(trained)
    task = checkpoint_task(subject.metadata)
    x, y = task.train.inputs, task.train.targets
    untrained = copy.deepcopy(subject)
    init, _ = prior_mean(subject)
    with torch.no_grad():
        for name, parameter in untrained.model.named_parameters():
            parameter.copy_(init[name])
    options = {"mc_samples": 40, "chunk_size": 7, "epochs": 2}
    trained_record, _ = certify(subject, x, y, **options)
    untrained_record, _ = certify(untrained, x, y, **options)
    assert trained_record["certified_error"] != untrained_record["certified_error"]
    assert trained_record["checkpoint_train_error"] == error_rate(
        subject.model, dict(subject.model.named_parameters()), x, y)
    for record in (trained_record, untrained_record):
        assert record["mean"] == "checkpoint" and record["mean_distance"] == 0.0
        assert record["certifies"].startswith("the stochastic network Q = N(w, diag s^2) centred on")
    assert untrained_record["prior_distance"] == 0.0 < trained_record["prior_distance"]
    fitted, posterior = certify(subject, x, y, mean="fitted", lr=1e-2, **options)
    weights = {k: v.detach() for k, v in subject.model.named_parameters()}
    moved = math.sqrt(sum(float(((posterior.mu[k] - weights[k]) ** 2).sum()) for k in weights))
    assert fitted["mean_distance"] == pytest.approx(moved) and moved > 0
    assert f"||mu - w|| = {moved:.3g}" in fitted["certifies"]
    with pytest.raises(ValueError, match="unknown posterior mean 'prior'"):
        certify(subject, x, y, mean="prior")


def test_a_prior_learned_on_held_out_data_leaves_every_training_sequence_to_the_certificate(trained):
    from spectral_analysis.analysis.checkpoint_data import checkpoint_task

    subject = load(trained)
    task = checkpoint_task(subject.metadata)
    x, y, held = task.train.inputs, task.train.targets, (task.valid.inputs, task.valid.targets)
    options = {"mc_samples": 40, "chunk_size": 7, "epochs": 1, "prior": "learned", "prior_epochs": 2}
    record, _ = certify(subject, x, y, held_out=held, **options)
    # half the held-out split for the prior; the other half, Q never reads, for the perturbation term
    assert record["m"] == len(x) and record["sample_split"]["prior"] == round(len(held[0]) / 2)
    assert "held-out sequences the subject never trained on" in record["prior"]
    relabelled, _ = certify(subject, x, y, held_out=(held[0], (held[1] + 1) % 2), **options)
    assert relabelled["prior_distance"] != record["prior_distance"]  # the prior is learned from them


def test_an_interrupted_certificate_resumes_to_the_uninterrupted_record(trained, tmp_path, monkeypatch):
    """With ``state``, every finished stage is kept: a run stopped in the middle of the derandomized
    certificate's Monte Carlo resumes there (the prior, Q and the 0-1 Monte Carlo read back, not redone)
    and gives the uninterrupted run's record; a folder of another evaluation is refused."""
    from spectral_analysis.analysis import derandomize, posterior
    from spectral_analysis.analysis.checkpoint_data import checkpoint_task

    subject = load(trained)
    task = checkpoint_task(subject.metadata)
    x, y = task.train.inputs, task.train.targets
    # enough held-out sequences for the derandomized certificate's half (what they are does not matter here)
    held = tuple(torch.cat([a, b]) for a, b in ((task.valid.inputs, task.test.inputs),
                                                (task.valid.targets, task.test.targets)))
    options = {"mc_samples": 30, "chunk_size": 7, "epochs": 1, "prior": "learned", "prior_epochs": 1,
               "held_out": held}
    whole, _ = certify(subject, x, y, **options)
    original, calls = posterior.monte_carlo_losses, []

    def stop_in_the_third_stage(*args, **kwargs):
        calls.append(kwargs.get("stage", args[12] if len(args) > 12 else "monte-carlo"))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(derandomize, "monte_carlo_losses", stop_in_the_third_stage)
    with pytest.raises(KeyboardInterrupt):
        certify(subject, x, y, state=tmp_path / "state", **options)
    monkeypatch.undo()
    kept = sorted(p.stem for p in (tmp_path / "state").glob("*.safetensors"))
    assert kept == ["margins-0", "margins-1", "monte-carlo", "moved-0", "moved-1", "posterior",
                    "posterior-fit", "prior"]
    trained_again = []
    monkeypatch.setattr(certify_module, "fit_posterior", lambda *a, **k: trained_again.append(1))
    monkeypatch.setattr(certify_module, "train_prior", lambda *a, **k: trained_again.append(1))
    resumed, _ = certify(subject, x, y, state=tmp_path / "state", **options)
    assert not trained_again
    assert resumed["state"]["resumed"][:4] == ["prior", "posterior", "monte-carlo", "margins-0"]
    for key in ("certified_error", "mc_error", "kl", "prior_distance", "deterministic"):
        assert resumed[key] == whole[key], key
    with pytest.raises(ValueError, match=r"holds the state of another evaluation \(it differs in options\)"):
        certify(subject, x, y, state=tmp_path / "state", **{**options, "mc_samples": 31})


def test_certify_resumes_from_its_state_folder_on_the_command_line(trained, tmp_path, capsys):
    args = ["certify", str(trained), "--mc-samples", "10", "--chunk-size", "7", "--epochs", "1",
            "--state", str(tmp_path / "state")]
    assert main([*args, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["state"]["resumed"] == []
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"resumed from {tmp_path / 'state'}: posterior, monte-carlo read back; " in out
    assert " s of work in all\n" in out
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["certified_error"] == first["certified_error"]
    assert main([*args, "--seed", "1"]) == 1
    assert "holds the state of another evaluation (it differs in options)" in capsys.readouterr().err


def sharp_rnn() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """A relu RNN over 40 steps whose recurrence amplifies (W_hh tripled), labelled by its own outputs:
    training error 0, and noise of std 0.02 on its weights already changes about one output in ten."""
    torch.manual_seed(0)
    rnn = torch.nn.RNN(3, 6, batch_first=True, nonlinearity="relu")
    with torch.no_grad():
        rnn.weight_hh_l0.mul_(3.0)
    x = torch.randn(300, 40, 3)
    model = as_subject(rnn).model
    return rnn, x, last_logits(model, dict(model.named_parameters()), x).argmax(1)


def test_the_noise_probe_starts_q_where_the_sampled_networks_still_follow_the_checkpoint():
    rnn, x, y = sharp_rnn()
    model = as_subject(rnn).model
    std, errors = noise_probe(model, x, y, seed=3)
    tried = list(errors)
    assert tried == list(NOISE_GRID[:len(tried)]) and std == tried[-1]
    assert errors[std] <= NOISE_TOLERANCE  # the checkpoint errs on none of its own labels
    assert all(errors[s] > NOISE_TOLERANCE for s in tried[:-1])  # every larger std errs more
    assert noise_probe(model, x, y, seed=3) == (std, errors)
    assert noise_probe(model, x, y, tolerance=0.5, seed=3)[0] > std
    with pytest.raises(ValueError, match="tolerance must lie in"):
        noise_probe(model, x, y, tolerance=0.0)


def test_q_fitted_from_the_probe_keeps_the_checkpoints_error_where_a_fixed_start_does_not():
    """Started at std 0.02 the sampled sharp networks err on about one sequence in ten; from the probe's
    std they err as the checkpoint does, and the record says where the fit started."""
    rnn, x, y = sharp_rnn()
    options = {"mc_samples": 60, "chunk_size": 10, "epochs": 1}
    probed, _ = certify(rnn, x, y, **options)
    fixed, _ = certify(rnn, x, y, init_std=0.02, **options)
    assert probed["init_std"] in NOISE_GRID and probed["init_std"] < 0.02
    assert set(probed["noise_probe"]) == {s for s in NOISE_GRID if s >= probed["init_std"]}
    assert fixed["init_std"] == 0.02 and fixed["noise_probe"] is None
    assert probed["mc_error"] < NOISE_TOLERANCE < fixed["mc_error"] - 0.05
    for wrong in ("big", -0.1, True, math.inf):
        with pytest.raises(ValueError, match="init_std must be 'auto' or a positive"):
            certify(rnn, x, y, init_std=wrong, **options)


def test_the_fit_starts_at_the_prior_variance_that_minimizes_the_kl():
    """lambda starts where d KL / d lambda = 0 for Q's initial noise: a start far from it (lambda = s^2
    beside weights far from the prior) would let the KL's mean term drive the fit."""
    rnn, x, y = sharp_rnn()
    model = as_subject(rnn).model
    w0 = {k: torch.zeros_like(v) for k, v in model.named_parameters()}
    posterior = fit_posterior(model, w0, x, y, init_std=1e-3, epochs=0)
    log_prior_var = posterior.log_prior_var.clone().requires_grad_()
    kl = sum(gaussian_kl(posterior.mu[k], posterior.log_s[k], w0[k], torch.exp(log_prior_var))
             for k in w0)
    (slope,) = torch.autograd.grad(kl, log_prior_var)
    assert abs(float(slope)) < 1e-3 * float(kl.detach())
    assert float(torch.exp(posterior.log_prior_var)) > 100 * 1e-3 ** 2


def test_the_command_line_takes_auto_or_a_positive_init_std(trained, capsys):
    base = ["certify", str(trained), "--mc-samples", "10", "--chunk-size", "7", "--epochs", "1", "--json"]
    assert main([*base, "--init-std", "0.01"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["init_std"] == 0.01 and record["noise_probe"] is None
    assert main(base) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["init_std"] in NOISE_GRID and record["noise_probe"][str(record["init_std"])] is not None
    assert main([*base[:-1], "--init-std", "0.01"]) == 0
    assert "  Q's fit started at s = 0.01 (--init-std)\n" in capsys.readouterr().out
    for wrong in ("big", "-0.1"):
        with pytest.raises(SystemExit):
            main([*base, "--init-std", wrong])
        assert "--init-std" in capsys.readouterr().err


def test_the_bounds_table_keeps_and_resumes_each_certificate_in_its_own_folder(trained, tmp_path,
                                                                                monkeypatch):
    from spectral_analysis.analysis.bounds_table import bounds_row, certificate_folder

    first = bounds_row(str(trained), ("init",), mc_samples=6, epochs=1, state=tmp_path / "state")
    folder = certificate_folder(tmp_path / "state", str(trained), "init")
    assert folder.parts[-3:] == (trained.parent.name, "last", "init")
    assert {"evaluation.json", "posterior.safetensors", "monte-carlo.safetensors"} <= {
        p.name for p in folder.iterdir()}
    monkeypatch.setattr(certify_module, "fit_posterior", lambda *a, **k: pytest.fail("Q fitted again"))
    again = bounds_row(str(trained), ("init",), mc_samples=6, epochs=1, state=tmp_path / "state")
    assert again == first
    zoo = certificate_folder("root", "zoo:table2-mnist/paper/spectral_s0", "learned")
    assert zoo.parts == ("root", "table2-mnist", "paper", "spectral_s0", "learned")
    assert ".." not in certificate_folder("root", "../elsewhere/model.safetensors", "init").parts


def test_the_bounds_table_certifies_on_the_device_it_is_given(trained, monkeypatch, capsys):
    """``--device``: the certificates get the subject loaded there (the deterministic bounds stay on the
    CPU), and a device this torch lacks is refused by name before any bound is computed."""
    import spectral_analysis.analysis.bounds_table as table_module

    loaded, subjects, certified = [], [], []
    real_load, real_certify = table_module.load, table_module.certify

    def load_on(name, device="cpu"):
        loaded.append(str(device))
        subjects.append(real_load(name))  # this machine has only its CPU: the device is recorded, not used
        return subjects[-1]

    def certify_spy(subject, *args, **kwargs):
        certified.append(subject)
        return real_certify(subject, *args, **kwargs)

    monkeypatch.setattr(table_module, "load", load_on)
    monkeypatch.setattr(table_module, "certify", certify_spy)
    table_module.bounds_row(str(trained), ("init",), mc_samples=5, epochs=1, device="cuda:1")
    assert loaded == ["cpu", "cuda:1"] and certified == [subjects[1]]
    monkeypatch.setattr(table_module, "load", real_load)
    if not torch.cuda.is_available():
        monkeypatch.setattr(table_module, "_bound_or_none", lambda s: pytest.fail("bounds before the check"))
        assert main(["bounds-table", str(trained), "--certify", "init", "--device", "cuda"]) == 1
        assert "--device (device=) cuda: this torch sees no CUDA device" in capsys.readouterr().err


def test_an_interrupted_fit_of_q_continues_to_the_q_an_uninterrupted_one_gives(tmp_path):
    """Q, Adam's moments and the generator are kept after each epoch: one epoch, then a rerun asked for
    three, ends bit for bit where three epochs in one go end (Q's fit is most of a T = 784 certificate)."""
    from spectral_analysis.analysis.evaluation_store import EvaluationStore

    rnn, x, y = sharp_rnn()
    model = as_subject(rnn).model
    w0 = {k: torch.zeros_like(v) for k, v in model.named_parameters()}
    options = {"init_std": 1e-2, "batch_size": 64, "seed": 2, "fit_mean": True, "lr": 1e-2}
    whole = fit_posterior(model, w0, x, y, epochs=3, **options)
    store = EvaluationStore(tmp_path, {"test": 1})
    fit_posterior(model, w0, x, y, epochs=1, store=store, **options)
    assert int(store.stage("posterior-fit")["epochs"]) == 1
    store = EvaluationStore(tmp_path, {"test": 1})
    resumed = fit_posterior(model, w0, x, y, epochs=3, store=store, **options)
    for k in whole.mu:
        assert torch.equal(resumed.log_s[k], whole.log_s[k]) and torch.equal(resumed.mu[k], whole.mu[k])
    assert torch.equal(resumed.log_prior_var, whole.log_prior_var)
    assert not torch.equal(whole.log_s[k], fit_posterior(model, w0, x, y, epochs=2, **options).log_s[k])
    with pytest.raises(ValueError, match="kept fit ran 3 epochs, more than the 2"):
        fit_posterior(model, w0, x, y, epochs=2, store=EvaluationStore(tmp_path, {"test": 1}), **options)


def test_a_resumed_evaluation_counts_the_seconds_of_the_work_it_kept(tmp_path, monkeypatch):
    """The record's seconds are the kept stages' work over every call plus the last call's: not the last
    call's alone, and not the work a killed call lost after its last kept stage."""
    from safetensors.torch import save_file

    from spectral_analysis.analysis import evaluation_store
    from spectral_analysis.analysis.evaluation_store import EvaluationStore

    clock = [0.0]
    monkeypatch.setattr(evaluation_store.time, "perf_counter", lambda: clock[0])
    first = EvaluationStore(tmp_path, {"test": 1})
    clock[0] = 10.0
    first.keep("prior", {"w": torch.zeros(2)})
    clock[0] = 15.0  # killed here: its last 5 s of work are lost and done again
    assert first.seconds() == 15.0
    clock[0] = 100.0
    second = EvaluationStore(tmp_path, {"test": 1})
    assert second.seconds() == 10.0 and second.untimed == []
    clock[0] = 130.0
    second.keep("posterior", {"s": torch.ones(2)})
    clock[0] = 131.0
    assert second.seconds() == 41.0
    save_file({"w": torch.zeros(1)}, str(tmp_path / "monte-carlo.safetensors"))  # an older version's stage
    clock[0] = 200.0
    third = EvaluationStore(tmp_path, {"test": 1})
    assert third.untimed == ["monte-carlo"] and third.seconds() == 40.0


def test_the_certificates_block_reads_every_kept_record_and_the_kl_the_goal_allows(tmp_path):
    """The docs' certificates table comes from the kept records: the KL it says the goal allows certifies
    Q at the goal exactly (the certificate's own bound solved for KL), a record that resumed stages kept
    without their time shows no hours, and a folder without records is refused by name."""
    from spectral_analysis.analysis.certify import kl_allowed
    from spectral_analysis.plotting.docs_blocks import CERTIFICATE_GOAL, certificates_markdown

    record = {"certified_error": 0.4, "mc_error": 0.05, "mc_error_upper": 0.06, "kl": 900.0, "m": 20000,
              "mc_samples": 400, "delta": 0.025, "checkpoint_test_error": 0.03, "stochastic_test_error": 0.07,
              "seconds": 7200.0, "state": {"folder": "f", "resumed": ["prior"], "untimed": []},
              "deterministic": {"held_out_bound": 0.04, "derandomized_bound": None, "scaled_q_bound": 0.35,
                                "scaled_q_noise_scale": 0.5},
              "mean": "checkpoint", "prior_distance": 3.0, "prior_variance": 0.01}
    allowed = kl_allowed(0.06, 20000, 0.025, CERTIFICATE_GOAL)
    slack = math.log(2 * math.sqrt(20000) / (0.025 / len(PRIOR_GRID)))
    assert kl_inverse_upper(0.06, (allowed + slack) / 20000) == pytest.approx(CERTIFICATE_GOAL, abs=1e-9)
    assert kl_allowed(CERTIFICATE_GOAL + 0.01, 20000, 0.025, CERTIFICATE_GOAL) is None
    with pytest.raises(ValueError, match="no certificate record under"):
        certificates_markdown(tmp_path)
    older = {"state": {"folder": "f", "resumed": ["prior"]}, "mean": "fitted",
             "deterministic": {"held_out_bound": 0.04, "derandomized_bound": None}}
    for trial, changes in (("a_s0", {}), ("b_s0", older)):
        folder = tmp_path / "certificates" / "exp" / "paper" / trial / "learned"
        folder.mkdir(parents=True)
        (folder / "record.json").write_text(json.dumps({**record, **changes}))
    rows = certificates_markdown(tmp_path).splitlines()[2:]
    assert rows[0] == ("| exp/paper/a_s0 (learned) | 0.030 | 0.400 | 0.050 (400) | 900 (20,000) | 450 | "
                       f"0.070 | {allowed:,.0f} | 0.350 (0.5) | - | 0.040 | 2.0 |")
    assert rows[1].endswith("| 900 (20,000) | - | 0.070 | " + f"{allowed:,.0f} | - | - | 0.040 | - |")
