"""A non-vacuous PAC-Bayes certificate for a trained recurrent model (Dziugaite & Roy 2017;
Pérez-Ortiz, Rivasplata, Shawe-Taylor & Szepesvári 2021), beside the paper's G(w).

- Posterior ``Q = N(mu, diag(s^2))`` over every trainable tensor of the model (for a Spectral-RNN: the
  reflectors, ``sigma_raw``, M, Y, biases), ``mu`` started at the trained weights; prior
  ``P = N(w_0, lambda I)`` with ``w_0`` the data-independent initialization the seed fixes.
- Optimization (``fit_posterior``): the "classic" (McAllester) objective
  ``L_surrogate(Q) + sqrt((KL(Q||P) + ln(2 sqrt(m)/delta)) / (2m))`` by the reparameterization trick;
  the surrogate is the cross entropy of a probability clamped at ``p_min``, divided by
  ``ln(1/p_min)`` so it lies in [0, 1]; ``lambda`` is learned too, then snapped to a grid of
  ``PRIOR_GRID`` values (a union bound: each costs ``delta / len(PRIOR_GRID)``).
- The certificate (``certify``), never on test data: Q's training 0-1 error estimated with N
  sampled networks, bounded by the binomial kl inverse at ``delta'`` (Langford & Caruana 2001), then
  the PAC-Bayes-kl bound (Seeger 2002; Maurer 2004) ``kl(e_S(Q) || e(Q)) <= (KL + ln(2 sqrt(m)/delta)) / m``.
  The total confidence is ``1 - delta - delta'``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch
from torch import Tensor
from torch.func import functional_call
from tqdm import tqdm

from spectral_analysis.io import Subject
from spectral_analysis.nn import build_model

P_MIN = 1e-4  # the surrogate's probability clamp
PRIOR_GRID = tuple(10.0 ** (-k / 2) for k in range(2, 14))  # lambda from 1e-1 down to 3e-7


def kl_bernoulli(q: float, p: float) -> float:
    """``kl(q || p)`` between Bernoulli distributions (natural log), with 0 log 0 = 0."""
    if not (0.0 <= q <= 1.0 and 0.0 <= p <= 1.0):
        raise ValueError(f"kl needs probabilities in [0, 1], got q = {q}, p = {p}")

    def term(a: float, b: float) -> float:
        if a == 0.0:
            return 0.0
        return math.inf if b == 0.0 else a * math.log(a / b)

    return term(q, p) + term(1.0 - q, 1.0 - p)


def kl_inverse_upper(q: float, bound: float, iterations: int = 200) -> float:
    """The largest ``p >= q`` with ``kl(q || p) <= bound``, by bisection in float64."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must lie in [0, 1], got {q}")
    if not bound >= 0.0 or math.isnan(bound):
        raise ValueError(f"the kl bound must be >= 0, got {bound}")
    low, high = q, 1.0
    if kl_bernoulli(q, high) <= bound:
        return 1.0
    for _ in range(iterations):
        middle = (low + high) / 2
        if kl_bernoulli(q, middle) <= bound:
            low = middle
        else:
            high = middle
    return high


def gaussian_kl(mu: Tensor, log_s: Tensor, w0: Tensor, prior_var: Tensor | float) -> Tensor:
    """``KL(N(mu, s^2) || N(w0, lambda))`` summed over entries (closed form)."""
    var = torch.exp(2 * log_s)
    prior_var = torch.as_tensor(prior_var, dtype=mu.dtype)
    return 0.5 * ((var + (mu - w0) ** 2) / prior_var - 1.0 + torch.log(prior_var) - 2 * log_s).sum()


@dataclass
class Posterior:
    """``Q = N(mu, diag(exp(2 log_s)))`` over the named parameters, and the prior ``N(w0, lambda I)``."""

    mu: dict[str, Tensor]
    log_s: dict[str, Tensor]
    w0: dict[str, Tensor]
    log_prior_var: Tensor

    def kl(self, prior_var: Tensor | float | None = None) -> Tensor:
        var = torch.exp(self.log_prior_var) if prior_var is None else prior_var
        return sum(gaussian_kl(self.mu[k], self.log_s[k], self.w0[k], var) for k in self.mu)

    def sample(self, generator: torch.Generator | None = None) -> dict[str, Tensor]:
        return {k: self.mu[k] + torch.exp(self.log_s[k]) * torch.randn(
            self.mu[k].shape, generator=generator, dtype=self.mu[k].dtype).to(self.mu[k].device)
            for k in self.mu}


def _last_logits(model: torch.nn.Module, params: dict[str, Tensor], x: Tensor) -> Tensor:
    return functional_call(model, params, (x,))[:, -1]


def _surrogate(logits: Tensor, labels: Tensor) -> Tensor:
    """Cross entropy of the clamped probability, scaled into [0, 1]."""
    p = torch.softmax(logits, dim=-1).gather(1, labels.unsqueeze(1)).squeeze(1)
    return (-torch.log(p.clamp_min(P_MIN)) / math.log(1 / P_MIN)).mean()


def _bound_term(kl: Tensor, m: int, delta: float) -> Tensor:
    return torch.sqrt((kl + math.log(2 * math.sqrt(m) / delta)) / (2 * m))


def fit_posterior(model: torch.nn.Module, w0: dict[str, Tensor], inputs: Tensor, labels: Tensor,
                  delta: float = 0.025, epochs: int = 20, batch_size: int = 256, lr: float = 1e-3,
                  scale_lr: float = 1e-2, init_log_s: float = -4.0, seed: int = 0,
                  progress: bool = False) -> Posterior:
    """Minimize the classic PAC-Bayes objective over ``mu`` (Adam, ``lr``), ``log s`` and ``log lambda``
    (``scale_lr``: the variances must travel further than the means)."""
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    posterior = Posterior({k: v.clone().requires_grad_() for k, v in params.items()},
                          {k: torch.full_like(v, init_log_s).requires_grad_() for k, v in params.items()},
                          {k: w0[k].to(v) for k, v in params.items()},
                          torch.tensor(math.log(1e-3), dtype=torch.float32).requires_grad_())
    optimizer = torch.optim.Adam([{"params": list(posterior.mu.values()), "lr": lr},
                                  {"params": [*posterior.log_s.values(), posterior.log_prior_var],
                                   "lr": scale_lr}])
    generator = torch.Generator().manual_seed(seed)
    m = len(inputs)
    steps = epochs * math.ceil(m / batch_size)
    for step in tqdm(range(steps), desc="posterior", disable=not progress, leave=False):
        if step % math.ceil(m / batch_size) == 0:
            order = torch.randperm(m, generator=generator)
        start = (step % math.ceil(m / batch_size)) * batch_size
        index = order[start:start + batch_size]
        logits = _last_logits(model, posterior.sample(generator), inputs[index])
        penalty = _bound_term(posterior.kl(), m, delta / len(PRIOR_GRID))
        objective = _surrogate(logits, labels[index]) + penalty
        optimizer.zero_grad()
        objective.backward()
        optimizer.step()
    return Posterior({k: v.detach() for k, v in posterior.mu.items()},
                     {k: v.detach() for k, v in posterior.log_s.items()}, posterior.w0,
                     posterior.log_prior_var.detach())


@torch.no_grad()
def error_rate(model: torch.nn.Module, params: dict[str, Tensor], inputs: Tensor, labels: Tensor,
               batch_size: int = 1024) -> float:
    """The 0-1 error of the network with ``params`` (float64 count)."""
    wrong = 0
    for start in range(0, len(inputs), batch_size):
        logits = _last_logits(model, params, inputs[start:start + batch_size])
        wrong += int((logits.argmax(dim=1) != labels[start:start + batch_size]).sum())
    return wrong / len(inputs)


@dataclass
class Certificate:
    certified_error: float  # the bound on Q's expected 0-1 error, confidence 1 - delta - delta'
    mc_error: float  # Q's training 0-1 error estimated with mc_samples networks
    mc_error_upper: float  # its binomial kl upper bound at delta'
    kl: float
    prior_variance: float
    m: int
    mc_samples: int
    delta: float
    delta_prime: float
    mean_train_error: float  # the mean network (mu) on the training set
    seconds: float

    def as_dict(self) -> dict:
        return asdict(self)


def certificate_from_posterior(model: torch.nn.Module, posterior: Posterior, inputs: Tensor, labels: Tensor,
                               delta: float = 0.025, delta_prime: float = 0.01, mc_samples: int = 100,
                               seed: int = 0, progress: bool = False) -> Certificate:
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
    generator = torch.Generator().manual_seed(seed)
    errors = [error_rate(model, posterior.sample(generator), inputs, labels)
              for _ in tqdm(range(mc_samples), desc="Monte Carlo", disable=not progress, leave=False)]
    mc_error = sum(errors) / mc_samples
    mc_upper = kl_inverse_upper(mc_error, math.log(2 / delta_prime) / mc_samples)
    bound = kl_inverse_upper(mc_upper, (kl + math.log(2 * math.sqrt(m) / (delta / len(PRIOR_GRID)))) / m)
    return Certificate(bound, mc_error, mc_upper, kl, prior_var, m, mc_samples, delta, delta_prime,
                       error_rate(model, posterior.mu, inputs, labels), time.perf_counter() - started)


def prior_mean(subject: Subject) -> tuple[dict[str, Tensor], str]:
    """``w_0``: the initialization the run's seed fixes (a toolkit checkpoint with a recorded seed: the
    model rebuilt the way the trainer built it), else zeros; and what it is."""
    config, seed = subject.metadata.get("model"), (subject.metadata.get("train") or {}).get("seed")
    model = subject.model
    if config is not None and isinstance(seed, int):
        torch.manual_seed(seed)
        init = build_model(config["name"], config["input_size"], config["hidden_size"], config["output_size"],
                           **config["options"])
        params = dict(init.named_parameters())
        return ({k: params[k].detach().to(v) for k, v in model.named_parameters()},
                f"the initialization of seed {seed} (data-independent)")
    return ({k: torch.zeros_like(v.detach()) for k, v in model.named_parameters()},
            "zeros (the model records no initialization)")


def certify(subject: Subject, inputs: Tensor, labels: Tensor, delta: float = 0.025,
            delta_prime: float = 0.01, mc_samples: int = 400, epochs: int = 20, seed: int = 0,
            progress: bool = False) -> tuple[dict, Posterior]:
    """Fit Q on the training sequences ``(inputs, labels)`` and certify it (module docstring): the
    record (the certificate, the prior, the training error of Q's mean) and Q itself."""
    if not (0 < delta < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    if len(inputs) != len(labels) or len(inputs) < 2:
        raise ValueError(f"need matching training inputs and labels (at least 2), got {len(inputs)} and "
                         f"{len(labels)}")
    started = time.perf_counter()
    model = subject.model.float()
    inputs = inputs.float() if inputs.is_floating_point() else inputs
    w0, prior = prior_mean(subject)
    torch.manual_seed(seed)
    posterior = fit_posterior(model, w0, inputs, labels, delta, epochs, seed=seed, progress=progress)
    certificate = certificate_from_posterior(model, posterior, inputs, labels, delta, delta_prime, mc_samples,
                                             seed, progress)
    record = {**certificate.as_dict(), "prior": prior, "epochs": epochs, "objective": "classic (McAllester)",
              "parameters": sum(v.numel() for v in w0.values()), "seconds": time.perf_counter() - started,
              "subject": subject.describe()}
    return record, posterior
