"""A non-vacuous PAC-Bayes certificate for a trained recurrent model (Dziugaite & Roy 2017;
Pérez-Ortiz, Rivasplata, Shawe-Taylor & Szepesvári 2021), beside the paper's G(w).

What is certified is a stochastic network Q, and each record says which (``certifies``) and how far Q's
mean lies from the subject's weights (``mean_distance``), beside the subject's own training error.

- Posterior ``Q = N(mu, diag(s^2))`` over every trainable tensor of the model (for a Spectral-RNN: the
  reflectors, ``sigma_raw``, M, Y, biases), :mod:`~spectral_analysis.analysis.posterior`. ``mean=
  "checkpoint"``: ``mu`` is the subject's weights ``w`` and only the variances are fitted, so Q is the
  checkpoint with noise; ``mean="fitted"``: ``mu`` starts at ``w`` and is fitted too. Q's mean never
  starts anywhere but at the subject's weights: a certificate that does not depend on them is not one of
  the subject. Prior ``P = N(w_0, lambda I)`` (:mod:`~spectral_analysis.analysis.priors`):
  ``prior="init"``: ``w_0`` the data-independent initialization the seed fixes (zeros for a model that
  records none), every training sequence certifies;
  ``prior="learned"`` (Pérez-Ortiz et al.'s data-dependent prior): ``w_0`` trained from the
  initialization by cross entropy on ``held_out`` sequences the subject never trained on (the CLI gives a
  toolkit checkpoint's validation split), else on a seeded part of the training set
  (``prior_fraction``), which then leaves the certificate's part (the prior never sees it).
- Optimization (``fit_posterior``) of one of three objectives, by the reparameterization trick, with
  ``B = (KL + ln(2 sqrt(m)/delta)) / m`` and ``L`` the surrogate: "classic" (McAllester)
  ``L + sqrt(B / 2)``; "quadratic" (Pérez-Ortiz et al.'s f_quad) ``(sqrt(L + B/2) + sqrt(B/2))^2``;
  "lambda" (Thiemann et al. 2017) ``L / (1 - l/2) + B / (l (1 - l/2))`` at its minimizing
  ``l = 2 / (sqrt(2 L / B + 1) + 1)``. The surrogate is the cross entropy of a probability clamped at
  ``p_min``, divided by ``ln(1/p_min)`` so it lies in [0, 1]; ``lambda`` is learned too, then snapped
  to a grid of ``PRIOR_GRID`` values (a union bound: each costs ``delta / len(PRIOR_GRID)``). The
  objective changes the posterior found, never the validity of the certificate.
- The certificate (``certify``), never on test data: Q's training 0-1 error estimated with N
  sampled networks (:func:`monte_carlo_error`: each scores one chunk of the training set), bounded by
  the binomial kl inverse at ``delta'`` (Langford & Caruana 2001), then
  the PAC-Bayes-kl bound (Seeger 2002; Maurer 2004) ``kl(e_S(Q) || e(Q)) <= (KL + ln(2 sqrt(m)/delta)) / m``.
  The total confidence is ``1 - delta - delta'``.
- Resuming (``state``): the learned prior, Q and every Monte Carlo pass are kept in a folder as they
  finish (:mod:`~spectral_analysis.analysis.evaluation_store`); the same call with the same folder
  continues an interrupted evaluation and gives the record an uninterrupted one gives.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from spectral_analysis.analysis.derandomize import HELD_CHUNK, derandomized_certificate, held_out_bound
from spectral_analysis.analysis.evaluation_store import EvaluationStore, digest
from spectral_analysis.analysis.posterior import (
    PRIOR_GRID,
    Posterior,
    error_rate,
    fit_posterior,
    kl_bernoulli,
    kl_inverse_upper,
    monte_carlo_losses,
    noise_probe,
    pac_bayes_complexity,
)
from spectral_analysis.analysis.priors import prior_mean, prior_split, train_prior
from spectral_analysis.io import Subject
from spectral_analysis.io.subjects import as_subject
from spectral_analysis.vocabulary import MEANS, OBJECTIVES, PRIORS

CLASS_TASKS = ("classification-last", "classification")  # task kinds with a 0-1 error


@dataclass
class Certificate:
    certified_error: float  # the bound on Q's expected 0-1 error, confidence 1 - delta - delta'
    mc_error: float  # Q's training 0-1 error estimated with mc_samples networks, one per chunk
    mc_error_upper: float  # its binomial kl upper bound at delta' (dropped examples counted as errors)
    kl: float
    prior_variance: float
    m: int
    mc_samples: int  # sampled networks N
    chunk_size: int  # training examples each sampled network scores
    mc_passes: int  # seeded shuffles of the training set, each cut into m // chunk_size chunks
    delta: float
    delta_prime: float
    mean_train_error: float  # the mean network (mu) on the training set
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def monte_carlo_error(model: torch.nn.Module, posterior: Posterior, inputs: Tensor, labels: Tensor,
                      mc_samples: int, chunk_size: int, delta_prime: float, seed: int = 0,
                      progress: bool = False, store: EvaluationStore | None = None
                      ) -> tuple[float, float, int, int]:
    """Q's training 0-1 error, estimated and bounded (:func:`monte_carlo_losses`): ``(estimate, upper
    bound, N, passes)``."""
    def wrong(logits: Tensor, y: Tensor) -> Tensor:
        return (logits.argmax(dim=1) != y)[:, None]

    (estimate,), (upper,), samples, passes = monte_carlo_losses(model, posterior, inputs, labels, wrong,
                                                                mc_samples, chunk_size, delta_prime, seed,
                                                                progress, store)
    return estimate, upper, samples, passes


def certificate_from_posterior(model: torch.nn.Module, posterior: Posterior, inputs: Tensor, labels: Tensor,
                               delta: float = 0.025, delta_prime: float = 0.01, mc_samples: int = 20000,
                               chunk_size: int = 50, seed: int = 0, progress: bool = False,
                               store: EvaluationStore | None = None) -> Certificate:
    """Evaluate the bound for a fixed ``Q`` (the prior variance snapped to :data:`PRIOR_GRID`)."""
    if not (0 < delta < 1 and 0 < delta_prime < 1):
        raise ValueError(f"delta and delta' must lie in (0, 1), got {delta} and {delta_prime}")
    if mc_samples < 1:
        raise ValueError(f"mc_samples must be >= 1, got {mc_samples}")
    started = time.perf_counter()
    m = len(inputs)
    learned = float(torch.exp(posterior.log_prior_var))
    prior_var = min(PRIOR_GRID, key=lambda v: abs(math.log(v) - math.log(learned)))
    kl = float(posterior.kl(prior_var).detach())
    chunk_size = min(chunk_size, m)
    mc_error, mc_upper, samples, passes = monte_carlo_error(model, posterior, inputs, labels, mc_samples,
                                                            chunk_size, delta_prime, seed, progress, store)
    bound = kl_inverse_upper(mc_upper, pac_bayes_complexity(kl, m, delta / len(PRIOR_GRID)))
    mean_error = error_rate(model, posterior.mu, inputs, labels)
    return Certificate(bound, mc_error, mc_upper, kl, prior_var, m, samples, chunk_size, passes, delta,
                       delta_prime, mean_error, time.perf_counter() - started)


def kl_allowed(mc_error_upper: float, m: int, delta: float, goal: float) -> float | None:
    """The largest KL at which Q, with its training error bounded by ``mc_error_upper``, would be
    certified at ``goal`` (:func:`certificate_from_posterior`'s bound solved for KL); None where no KL
    would: the training error bound is at ``goal`` or so near it that the bound's confidence term alone
    goes past ``goal``.

    ```python
    >>> round(kl_allowed(0.1, 50000, 0.025, 0.15), 1), kl_allowed(0.2, 50000, 0.025, 0.15)
    (532.5, None)
    >>> kl_allowed(0.146, 50000, 0.025, 0.15) is None  # kl(0.146 || 0.15) m is below ln(2 sqrt(m) / delta)
    True

    ```
    """
    if mc_error_upper >= goal:
        return None
    allowed = m * (kl_bernoulli(mc_error_upper, goal) - pac_bayes_complexity(0.0, m, delta / len(PRIOR_GRID)))
    return allowed if allowed >= 0 else None


def _sequences_on(x: Tensor, device: torch.device) -> Tensor:
    """Input sequences on ``device``: floats in float32 (the model's), symbol ids as they are."""
    return (x.float() if x.is_floating_point() else x).to(device)


def _distance(a: dict[str, Tensor], b: dict[str, Tensor]) -> float:
    """The Euclidean distance between two sets of the same named tensors, over all of them."""
    return math.sqrt(sum(float(((a[k].double() - b[k].double()) ** 2).sum()) for k in a))


def _what_is_certified(mean: str, std_rms: float, distance: float, relative: float) -> str:
    """The certificate's object in words (the CLI's line, the JSON, the docs)."""
    if mean == "checkpoint":
        return (f"the stochastic network Q = N(w, diag s^2) centred on the subject's weights w (s rms "
                f"{std_rms:.3g}): the 0-1 error of a network drawn from Q, not of w itself")
    return (f"the stochastic network Q = N(mu, diag s^2) with mu fitted from the subject's weights w "
            f"(||mu - w|| = {distance:.3g}, {relative:.3g} of ||w||; s rms {std_rms:.3g}): the 0-1 error of "
            "a network drawn from Q, not of w itself")


def certify(subject: Subject | nn.Module | str, inputs: Tensor, labels: Tensor, delta: float = 0.025,
            delta_prime: float = 0.01, mc_samples: int = 20000, epochs: int = 20, seed: int = 0,
            chunk_size: int = 50, objective: str = "quadratic", prior: str = "init", mean: str = "checkpoint",
            held_out: tuple[Tensor, Tensor] | None = None, selections: int = 1, prior_fraction: float = 0.5,
            prior_epochs: int = 20, lr: float = 1e-4, init_std: float | str = "auto",
            delta_held: float = 0.01, progress: bool = False, state: str | Path | None = None
            ) -> tuple[dict, Posterior]:
    """Fit Q on the training sequences ``(inputs, labels)`` and certify it (module docstring): the
    record (what is certified, the certificate, the prior and the data it read, Q's distance to the
    subject's weights, the subject's own training error) and Q itself. ``mean``: ``checkpoint`` (Q's mean
    is the subject's weights, only the variances are fitted) or ``fitted`` (moved from there too);
    ``held_out``: sequences the subject never trained on (beyond choosing among ``selections``
    checkpoints by them, as a plateau criterion does), from which ``prior="learned"`` learns its prior
    (else from a ``prior_fraction`` of the training set, which the certificate then leaves out), and with
    a Q centred on the checkpoint, the certificates of the deterministic network
    (:mod:`~spectral_analysis.analysis.derandomize`: a prior learned from them takes half, the other half
    measures the perturbations), at ``delta_held``. ``state``: a folder that keeps each finished stage, so
    that the same call resumes an interrupted evaluation (module docstring).

    ```python
    >>> import torch
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> rnn, x, y = torch.nn.RNN(2, 4, batch_first=True), torch.randn(40, 5, 2), torch.randint(0, 4, (40,))
    >>> record, q = certify(rnn, x, y, mc_samples=40, chunk_size=10, epochs=1)
    >>> record["mean"], record["mean_distance"], 0 < record["certified_error"] <= 1
    ('checkpoint', 0.0, True)

    ```
    """
    subject = as_subject(subject)
    if not (0 < delta < 1 and 0 < delta_held < 1):
        raise ValueError(f"delta and delta_held must lie in (0, 1), got {delta} and {delta_held}")
    counts = (("mc_samples", mc_samples, 1), ("chunk_size", chunk_size, 1), ("epochs", epochs, 0),
              ("prior_epochs", prior_epochs, 0), ("selections", selections, 1))
    for name, value, low in counts:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if init_std != "auto" and (isinstance(init_std, (bool, str))
                               or not (math.isfinite(init_std) and init_std > 0)):
        raise ValueError(f"init_std must be 'auto' or a positive standard deviation, got {init_std!r}")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number (the posterior's Adam step; a negative one ascends "
                         f"the objective), got {lr}")
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown PAC-Bayes objective {objective!r}; expected one of {OBJECTIVES}")
    if prior not in PRIORS:
        raise ValueError(f"unknown prior {prior!r}; expected one of {PRIORS}")
    if mean not in MEANS:
        raise ValueError(f"unknown posterior mean {mean!r}; expected one of {MEANS}")
    if len(inputs) != len(labels) or len(inputs) < 2:
        raise ValueError(f"need matching training inputs and labels (at least 2), got {len(inputs)} and "
                         f"{len(labels)}")
    model = subject.model.float()
    device = next(model.parameters()).device
    inputs = _sequences_on(inputs, device)
    labels = labels.to(device)
    weights = {k: v.detach().clone() for k, v in model.named_parameters()}
    options = {"delta": delta, "delta_prime": delta_prime, "mc_samples": mc_samples, "epochs": epochs,
               "seed": seed, "chunk_size": chunk_size, "objective": objective, "prior": prior, "mean": mean,
               "selections": selections, "prior_fraction": prior_fraction, "prior_epochs": prior_epochs,
               "lr": lr, "init_std": init_std, "delta_held": delta_held}
    store = EvaluationStore(state, {"subject": digest(weights), "data": digest([inputs, labels]),
                                    "held_out": None if held_out is None else digest(list(held_out)),
                                    "options": options})
    w0, prior_text = prior_mean(subject)
    split = {"prior": 0, "certificate": len(inputs), "prior_data": "none (data-independent)"}
    if held_out is not None:
        held_x, held_y = _sequences_on(held_out[0], device), held_out[1].to(device)
        perturbed = torch.arange(len(held_x))  # the held-out sequences R_gamma is measured on
    if prior == "learned":
        if held_out is not None:
            prior_index, perturbed = prior_split(len(held_x), 0.5, seed)
            prior_x, prior_y = held_x[prior_index], held_y[prior_index]
            source = f"{len(prior_x)} held-out sequences the subject never trained on"
        else:
            prior_index, certificate_index = prior_split(len(inputs), prior_fraction, seed)
            prior_x, prior_y = inputs[prior_index], labels[prior_index]
            inputs, labels = inputs[certificate_index], labels[certificate_index]
            source = f"{len(prior_index)} training sequences the certificate does not use"
        kept = store.stage("prior")
        if kept is None:
            torch.manual_seed(seed)
            w0 = train_prior(model, w0, prior_x, prior_y, prior_epochs, seed=seed, progress=progress)
            store.keep("prior", w0)
        else:  # in the model's order, not the file's: Q's samples draw from one generator in that order
            w0 = {k: kept[k].to(device) for k in weights}
        prior_text = f"learned: {prior_text} trained {prior_epochs} epochs on {source}"
        split = {"prior": len(prior_x), "certificate": len(inputs), "prior_data": source}
    posterior, start = _fitted_posterior(store, model, w0, inputs, labels, delta, epochs, lr, init_std, seed,
                                         objective, mean, progress)
    certificate = certificate_from_posterior(model, posterior, inputs, labels, delta, delta_prime, mc_samples,
                                             chunk_size, seed, progress, store)
    distance = _distance(posterior.mu, weights)
    norm = math.sqrt(sum(float((v.double() ** 2).sum()) for v in weights.values()))
    relative = distance / norm if norm > 0 else math.inf
    std_rms = math.sqrt(sum(float(torch.exp(2 * v.double()).sum()) for v in posterior.log_s.values())
                        / sum(v.numel() for v in weights.values()))
    record = {"certifies": _what_is_certified(mean, std_rms, distance, relative),
              **certificate.as_dict(), "mean": mean, "mean_distance": distance,
              "mean_relative_distance": relative, "posterior_std_rms": std_rms,
              "prior_distance": _distance(weights, w0),
              "checkpoint_train_error": error_rate(model, weights, inputs, labels),
              "prior": prior_text, "prior_kind": prior, "sample_split": split,
              "epochs": epochs, "objective": objective, "lr": lr, **start,
              "parameters": sum(v.numel() for v in w0.values()),
              "subject": subject.describe()}
    record["deterministic"] = None
    if held_out is not None and mean == "checkpoint":
        record["deterministic"] = {**held_out_bound(model, weights, held_x, held_y, delta_held, selections),
                                   "selections": selections, "derandomized_bound": None}
        if len(perturbed) >= HELD_CHUNK:
            record["deterministic"].update(derandomized_certificate(
                model, posterior, certificate.prior_variance, inputs, labels, held_x[perturbed], delta,
                delta_prime, delta_held, mc_samples, chunk_size, selections, seed, progress, store))
    record["state"] = None if state is None else {"folder": str(state), "resumed": store.resumed,
                                                  "untimed": store.untimed}
    record["seconds"] = store.seconds()
    return record, posterior


def _fitted_posterior(store: EvaluationStore, model: nn.Module, w0: dict[str, Tensor], inputs: Tensor,
                      labels: Tensor, delta: float, epochs: int, lr: float, init_std: float | str, seed: int,
                      objective: str, mean: str, progress: bool) -> tuple[Posterior, dict]:
    """Q fitted (:func:`fit_posterior`, from ``init_std`` or, for ``"auto"``, from where
    :func:`noise_probe` finds it), or read back from ``store`` where an earlier run kept it; with where
    the fit started (``init_std``, and the probe's error at each std it tried)."""
    kept = store.stage("posterior")
    if kept is not None:  # in the model's order: Q's samples draw from one generator in that order
        device = next(iter(w0.values())).device
        names = [name for name, _ in model.named_parameters()]
        part = {kind: {k: kept[f"{kind}/{k}"].to(device) for k in names} for kind in ("mu", "log_s")}
        probe = kept["noise_probe"].tolist() if "noise_probe" in kept else []  # older folders kept no probe
        start = {"init_std": float(kept["init_std"]) if "init_std" in kept else init_std,
                 "noise_probe": dict(probe) if probe else None}
        return Posterior(part["mu"], part["log_s"], {k: w0[k].to(v) for k, v in part["mu"].items()},
                         kept["log_prior_var"].to(device)), start
    start = {"init_std": init_std, "noise_probe": None}
    if init_std == "auto":
        start["init_std"], start["noise_probe"] = noise_probe(model, inputs, labels, seed=seed)
    torch.manual_seed(seed)
    posterior = fit_posterior(model, w0, inputs, labels, start["init_std"], delta, epochs, lr=lr, seed=seed,
                              objective=objective, fit_mean=mean == "fitted", progress=progress, store=store)
    probe = [[std, error] for std, error in (start["noise_probe"] or {}).items()]
    store.keep("posterior", {**{f"mu/{k}": v for k, v in posterior.mu.items()},
                             **{f"log_s/{k}": v for k, v in posterior.log_s.items()},
                             "log_prior_var": posterior.log_prior_var,
                             "init_std": torch.tensor(start["init_std"], dtype=torch.float64),
                             "noise_probe": torch.tensor(probe, dtype=torch.float64).reshape(-1, 2)})
    return posterior, start
