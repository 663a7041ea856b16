"""A non-vacuous PAC-Bayes certificate for a trained recurrent model (Dziugaite & Roy 2017;
Pérez-Ortiz, Rivasplata, Shawe-Taylor & Szepesvári 2021), beside the paper's G(w).

- Posterior ``Q = N(mu, diag(s^2))`` over every trainable tensor of the model (for a Spectral-RNN: the
  reflectors, ``sigma_raw``, M, Y, biases). Prior ``P = N(w_0, lambda I)``:
  ``prior="init"``: ``w_0`` the data-independent initialization the seed fixes, ``mu`` started at the
  trained weights, every training sequence certifies;
  ``prior="learned"`` (Pérez-Ortiz et al.'s data-dependent prior): a seeded part of the training set
  (``prior_fraction``) trains ``w_0`` from the initialization by cross entropy, ``mu`` starts at ``w_0``,
  and only the rest of the training set fits Q and certifies it (the prior never sees it).
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
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call
from tqdm import tqdm

from spectral_analysis.io import Subject
from spectral_analysis.io.subjects import as_subject
from spectral_analysis.nn import build_model
from spectral_analysis.vocabulary import OBJECTIVES, PRIORS

P_MIN = 1e-4  # the surrogate's probability clamp
CLASS_TASKS = ("classification-last", "classification")  # task kinds with a 0-1 error
INIT_STD = 0.02  # the posterior's and the prior's initial standard deviation
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
    """The largest ``p >= q`` with ``kl(q || p) <= bound``, by bisection in float64.

    ```python
    >>> round(kl_inverse_upper(0.0, math.log(2)), 6)  # kl(0 || p) = -ln(1 - p)
    0.5

    ```
    """
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
    """The class scores: the last step's output of a recurrent model, the output of a feed-forward one."""
    outputs = functional_call(model, params, (x,))
    return outputs[:, -1] if outputs.dim() == 3 else outputs


def _surrogate(logits: Tensor, labels: Tensor) -> Tensor:
    """Cross entropy of the clamped probability, scaled into [0, 1]."""
    p = torch.softmax(logits, dim=-1).gather(1, labels.unsqueeze(1)).squeeze(1)
    return (-torch.log(p.clamp_min(P_MIN)) / math.log(1 / P_MIN)).mean()


def pac_bayes_objective(surrogate: Tensor, kl: Tensor, m: int, delta: float,
                        objective: str = "classic") -> Tensor:
    """The training objective (module docstring) from the surrogate loss ``L`` and ``KL(Q||P)``.

    ```python
    >>> value = pac_bayes_objective(torch.tensor(0.1), torch.tensor(50.0), m=10000, delta=0.025)
    >>> bool(value > kl_inverse_upper(0.1, (50 + math.log(2 * 100 / 0.025)) / 10000))
    True

    ```
    """
    complexity = (kl + math.log(2 * math.sqrt(m) / delta)) / m
    if objective == "classic":
        return surrogate + torch.sqrt(complexity / 2)
    if objective == "quadratic":
        return (torch.sqrt(surrogate + complexity / 2) + torch.sqrt(complexity / 2)) ** 2
    if objective == "lambda":
        lam = (2 / (torch.sqrt(2 * surrogate / complexity + 1) + 1)).detach()
        return surrogate / (1 - lam / 2) + complexity / (lam * (1 - lam / 2))
    raise ValueError(f"unknown PAC-Bayes objective {objective!r}; expected one of {OBJECTIVES}")


def _batches(m: int, batch_size: int, epochs: int, generator: torch.Generator):
    """Index batches of ``epochs`` seeded shuffles of ``range(m)``."""
    for _ in range(epochs):
        order = torch.randperm(m, generator=generator)
        for start in range(0, m, batch_size):
            yield order[start:start + batch_size]


def fit_posterior(model: torch.nn.Module, w0: dict[str, Tensor], inputs: Tensor, labels: Tensor,
                  delta: float = 0.025, epochs: int = 20, batch_size: int = 256, lr: float = 1e-4,
                  scale_lr: float = 1e-2, init_std: float = INIT_STD, seed: int = 0,
                  objective: str = "quadratic", mu_start: dict[str, Tensor] | None = None,
                  progress: bool = False) -> Posterior:
    """Minimize a PAC-Bayes ``objective`` over ``mu`` (Adam, ``lr``; started at ``mu_start``, default the
    model's weights), ``log s`` and ``log lambda`` (``scale_lr``: the variances travel further), from
    ``s = sqrt(lambda) = init_std``: with a learned prior Q starts equal to P. Every weight of ``mu`` that
    drifts by ``d`` costs ``d^2 / (2 lambda)`` of KL, so ``lr`` is small."""
    if not init_std > 0:
        raise ValueError(f"the initial posterior standard deviation must be > 0, got {init_std}")
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown PAC-Bayes objective {objective!r}; expected one of {OBJECTIVES}")
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    start = mu_start or params
    log_s = math.log(init_std)
    posterior = Posterior({k: start[k].detach().clone().to(v).requires_grad_() for k, v in params.items()},
                          {k: torch.full_like(v, log_s).requires_grad_() for k, v in params.items()},
                          {k: w0[k].to(v) for k, v in params.items()},
                          torch.tensor(2 * math.log(init_std), dtype=torch.float32).requires_grad_())
    optimizer = torch.optim.Adam([{"params": list(posterior.mu.values()), "lr": lr},
                                  {"params": [*posterior.log_s.values(), posterior.log_prior_var],
                                   "lr": scale_lr}])
    generator = torch.Generator().manual_seed(seed)
    m = len(inputs)
    steps = epochs * math.ceil(m / batch_size)
    for index in tqdm(_batches(m, batch_size, epochs, generator), total=steps, desc="posterior",
                      disable=not progress, leave=False):
        logits = _last_logits(model, posterior.sample(generator), inputs[index])
        objective_value = pac_bayes_objective(_surrogate(logits, labels[index]), posterior.kl(), m,
                                              delta / len(PRIOR_GRID), objective)
        optimizer.zero_grad()
        objective_value.backward()
        optimizer.step()
    return Posterior({k: v.detach() for k, v in posterior.mu.items()},
                     {k: v.detach() for k, v in posterior.log_s.items()}, posterior.w0,
                     posterior.log_prior_var.detach())


def train_prior(model: torch.nn.Module, w0: dict[str, Tensor], inputs: Tensor, labels: Tensor,
                epochs: int = 20, batch_size: int = 128, lr: float = 1e-3, seed: int = 0,
                progress: bool = False) -> dict[str, Tensor]:
    """The learned prior mean: ``w_0`` trained by cross entropy (Adam) on the prior part of the data only."""
    weights = {k: v.detach().clone().requires_grad_() for k, v in w0.items()}
    optimizer = torch.optim.Adam(list(weights.values()), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    steps = epochs * math.ceil(len(inputs) / batch_size)
    for index in tqdm(_batches(len(inputs), batch_size, epochs, generator), total=steps, desc="prior",
                      disable=not progress, leave=False):
        loss = torch.nn.functional.cross_entropy(_last_logits(model, weights, inputs[index]), labels[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return {k: v.detach() for k, v in weights.items()}


@torch.no_grad()
def error_rate(model: torch.nn.Module, params: dict[str, Tensor], inputs: Tensor, labels: Tensor,
               batch_size: int = 1024) -> float:
    """The 0-1 error of the network with ``params`` (float64 count)."""
    wrong, device = 0, next(iter(params.values())).device
    for start in range(0, len(inputs), batch_size):
        logits = _last_logits(model, params, inputs[start:start + batch_size].to(device))
        wrong += int((logits.argmax(dim=1) != labels[start:start + batch_size].to(device)).sum())
    return wrong / len(inputs)


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
                      progress: bool = False) -> tuple[float, float, int, int]:
    """Q's training error ``e_S(Q)``, estimated and bounded (Dziugaite & Roy's Monte Carlo step, with a
    fresh network per chunk of examples rather than per pass over the set).

    Each pass shuffles the set (seeded) and cuts it into ``k = m // chunk_size`` chunks; a freshly sampled
    network scores each chunk; the ``r = m - k chunk_size`` examples left over count as errors. Given
    the shuffles, the N chunk error rates are independent in [0, 1] with mean ``p`` over the covered
    examples, so ``kl(mean || p) <= ln(2/delta')/N`` (Maurer 2004) and
    ``e_S(Q) <= ((m - r) p + r) / m``. Returns ``(estimate, upper bound, N, passes)``."""
    m = len(inputs)
    chunks = m // chunk_size
    if chunk_size < 1 or chunks < 1:
        raise ValueError(f"chunk_size must lie in [1, m = {m}], got {chunk_size}")
    passes = math.ceil(mc_samples / chunks)
    generator = torch.Generator().manual_seed(seed)
    wrong = 0  # counted in integers: the estimate is exact
    with torch.no_grad():
        for _ in tqdm(range(passes), desc="Monte Carlo", disable=not progress, leave=False):
            order = torch.randperm(m, generator=generator)
            for j in range(chunks):
                index = order[j * chunk_size:(j + 1) * chunk_size]
                logits = _last_logits(model, posterior.sample(generator), inputs[index])
                wrong += int((logits.argmax(dim=1) != labels[index]).sum())
    samples = passes * chunks
    estimate = wrong / (samples * chunk_size)
    covered_upper = kl_inverse_upper(estimate, math.log(2 / delta_prime) / samples)
    leftover = m - chunks * chunk_size
    return estimate, ((m - leftover) * covered_upper + leftover) / m, samples, passes


def certificate_from_posterior(model: torch.nn.Module, posterior: Posterior, inputs: Tensor, labels: Tensor,
                               delta: float = 0.025, delta_prime: float = 0.01, mc_samples: int = 20000,
                               chunk_size: int = 50, seed: int = 0, progress: bool = False) -> Certificate:
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
                                                            chunk_size, delta_prime, seed, progress)
    bound = kl_inverse_upper(mc_upper, (kl + math.log(2 * math.sqrt(m) / (delta / len(PRIOR_GRID)))) / m)
    mean_error = error_rate(model, posterior.mu, inputs, labels)
    return Certificate(bound, mc_error, mc_upper, kl, prior_var, m, samples, chunk_size, passes, delta,
                       delta_prime, mean_error, time.perf_counter() - started)


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


def prior_split(m: int, fraction: float, seed: int) -> tuple[Tensor, Tensor]:
    """Seeded disjoint indices: the prior's part (``fraction`` of ``m``) and the certificate's part."""
    if not 0 < fraction < 1:
        raise ValueError(f"the prior's fraction of the training set must lie in (0, 1), got {fraction}")
    order = torch.randperm(m, generator=torch.Generator().manual_seed(seed))
    cut = int(round(fraction * m))
    if cut < 1 or m - cut < 2:
        raise ValueError(f"a prior fraction of {fraction} leaves {cut} prior and {m - cut} certificate "
                         "sequences")
    return order[:cut], order[cut:]


def certify(subject: Subject | nn.Module | str, inputs: Tensor, labels: Tensor, delta: float = 0.025,
            delta_prime: float = 0.01, mc_samples: int = 20000, epochs: int = 20, seed: int = 0,
            chunk_size: int = 50, objective: str = "quadratic", prior: str = "init",
            prior_fraction: float = 0.5, prior_epochs: int = 20, lr: float = 1e-4,
            init_std: float = INIT_STD, progress: bool = False) -> tuple[dict, Posterior]:
    """Fit Q on the training sequences ``(inputs, labels)`` and certify it (module docstring): the
    record (the certificate, the prior, the sample split, the training error of Q's mean) and Q itself."""
    subject = as_subject(subject)
    if not (0 < delta < 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    counts = (("mc_samples", mc_samples, 1), ("chunk_size", chunk_size, 1), ("epochs", epochs, 0),
              ("prior_epochs", prior_epochs, 0))
    for name, value, low in counts:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number (the posterior's Adam step; a negative one ascends "
                         f"the objective), got {lr}")
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown PAC-Bayes objective {objective!r}; expected one of {OBJECTIVES}")
    if prior not in PRIORS:
        raise ValueError(f"unknown prior {prior!r}; expected one of {PRIORS}")
    if len(inputs) != len(labels) or len(inputs) < 2:
        raise ValueError(f"need matching training inputs and labels (at least 2), got {len(inputs)} and "
                         f"{len(labels)}")
    started = time.perf_counter()
    model = subject.model.float()
    device = next(model.parameters()).device
    inputs = (inputs.float() if inputs.is_floating_point() else inputs).to(device)
    labels = labels.to(device)
    w0, prior_text = prior_mean(subject)
    mu_start, split = None, {"prior": 0, "certificate": len(inputs)}
    if prior == "learned":
        prior_index, certificate_index = prior_split(len(inputs), prior_fraction, seed)
        torch.manual_seed(seed)
        w0 = train_prior(model, w0, inputs[prior_index], labels[prior_index], prior_epochs, seed=seed,
                         progress=progress)
        mu_start = w0
        inputs, labels = inputs[certificate_index], labels[certificate_index]
        prior_text = (f"learned: {prior_text} trained {prior_epochs} epochs on {len(prior_index)} training "
                      "sequences the certificate does not use")
        split = {"prior": len(prior_index), "certificate": len(certificate_index)}
    torch.manual_seed(seed)
    posterior = fit_posterior(model, w0, inputs, labels, delta, epochs, lr=lr, init_std=init_std, seed=seed,
                              objective=objective, mu_start=mu_start, progress=progress)
    certificate = certificate_from_posterior(model, posterior, inputs, labels, delta, delta_prime, mc_samples,
                                             chunk_size, seed, progress)
    record = {**certificate.as_dict(), "prior": prior_text, "prior_kind": prior, "sample_split": split,
              "epochs": epochs, "objective": objective, "lr": lr, "init_std": init_std,
              "parameters": sum(v.numel() for v in w0.values()), "seconds": time.perf_counter() - started,
              "subject": subject.describe()}
    return record, posterior
