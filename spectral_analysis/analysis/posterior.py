"""The posterior Q of the PAC-Bayes certificates (:mod:`~spectral_analysis.analysis.certify`) and what
fitting it needs: the Bernoulli kl and its inverse, the Gaussian KL, ``Q = N(mu, diag(s^2))`` with its
prior ``N(w_0, lambda I)``, the bounded surrogate of the 0-1 loss, the three PAC-Bayes objectives, and
the fit itself (:func:`fit_posterior`). ``mu`` is the subject's weights, held or moved from there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import functional_call
from tqdm import tqdm

from spectral_analysis.analysis.evaluation_store import EvaluationStore
from spectral_analysis.vocabulary import OBJECTIVES

P_MIN = 1e-4  # the surrogate's probability clamp
NOISE_GRID = tuple(10.0 ** (-k / 2) for k in range(2, 13))  # Q's candidate initial std, 0.1 down to 1e-6
NOISE_TOLERANCE = 0.05  # how much more than its mean a network drawn from Q may err where Q's fit starts
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


def last_logits(model: torch.nn.Module, params: dict[str, Tensor], x: Tensor) -> Tensor:
    """The class scores: the last step's output of a recurrent model, the output of a feed-forward one."""
    outputs = functional_call(model, params, (x,))
    return outputs[:, -1] if outputs.dim() == 3 else outputs


def surrogate(logits: Tensor, labels: Tensor) -> Tensor:
    """Cross entropy of the clamped probability, scaled into [0, 1]."""
    p = torch.softmax(logits, dim=-1).gather(1, labels.unsqueeze(1)).squeeze(1)
    return (-torch.log(p.clamp_min(P_MIN)) / math.log(1 / P_MIN)).mean()


def pac_bayes_complexity(kl: Tensor | float, m: int, delta: float) -> Tensor | float:
    """The PAC-Bayes-kl right-hand side ``(KL + ln(2 sqrt(m) / delta)) / m`` (Maurer 2004), which every
    certificate bounds ``kl(e_S(Q) || e(Q))`` by.

    ```python
    >>> round(pac_bayes_complexity(0.0, 10000, 0.02), 6)  # ln(2 * 100 / 0.02) / 10000
    0.000921

    ```
    """
    return (kl + math.log(2 * math.sqrt(m) / delta)) / m


def pac_bayes_objective(surrogate: Tensor, kl: Tensor, m: int, delta: float,
                        objective: str = "classic") -> Tensor:
    """The training objective (module docstring) from the surrogate loss ``L`` and ``KL(Q||P)``.

    ```python
    >>> value = pac_bayes_objective(torch.tensor(0.1), torch.tensor(50.0), m=10000, delta=0.025)
    >>> bool(value > kl_inverse_upper(0.1, (50 + math.log(2 * 100 / 0.025)) / 10000))
    True

    ```
    """
    complexity = pac_bayes_complexity(kl, m, delta)
    if objective == "classic":
        return surrogate + torch.sqrt(complexity / 2)
    if objective == "quadratic":
        return (torch.sqrt(surrogate + complexity / 2) + torch.sqrt(complexity / 2)) ** 2
    if objective == "lambda":
        lam = (2 / (torch.sqrt(2 * surrogate / complexity + 1) + 1)).detach()
        return surrogate / (1 - lam / 2) + complexity / (lam * (1 - lam / 2))
    raise ValueError(f"unknown PAC-Bayes objective {objective!r}; expected one of {OBJECTIVES}")


def batches(m: int, batch_size: int, epochs: int, generator: torch.Generator):
    """Index batches of ``epochs`` seeded shuffles of ``range(m)``."""
    for _ in range(epochs):
        order = torch.randperm(m, generator=generator)
        for start in range(0, m, batch_size):
            yield order[start:start + batch_size]


def noise_probe(model: torch.nn.Module, inputs: Tensor, labels: Tensor, tolerance: float = NOISE_TOLERANCE,
                probe: int = 1000, samples: int = 4, seed: int = 0) -> tuple[float, dict[float, float]]:
    """Where Q's fit starts: the largest std ``s`` of :data:`NOISE_GRID` at which networks drawn from
    ``N(w, s^2 I)`` err on ``probe`` seeded training sequences at most ``tolerance`` more than ``w``
    does (the smallest ``s`` of the grid if none does), with the mean error of ``samples`` draws at each
    ``s`` tried. Started where noise already destroys the network, the surrogate is flat (clamped at
    ``P_MIN``), only the KL moves ``s``, and the fit ends at a Q near chance; a network whose outputs
    follow its weights over T = 784 steps tolerates far less noise than one of T = 28.

    ```python
    >>> from spectral_analysis.io.subjects import as_subject
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> rnn, x = as_subject(torch.nn.RNN(2, 4, batch_first=True)).model, torch.randn(40, 5, 2)
    >>> std, errors = noise_probe(rnn, x, last_logits(rnn, dict(rnn.named_parameters()), x).argmax(1))
    >>> std in NOISE_GRID and errors[std] <= NOISE_TOLERANCE
    True

    ```
    """
    if not 0 < tolerance < 1:
        raise ValueError(f"the noise probe's error tolerance must lie in (0, 1), got {tolerance}")
    generator = torch.Generator().manual_seed(seed)
    index = torch.randperm(len(inputs), generator=generator)[:probe]
    x, y = inputs[index], labels[index]
    weights = {k: v.detach() for k, v in model.named_parameters()}
    clean, errors = error_rate(model, weights, x, y), {}
    for std in NOISE_GRID:
        log_s = {k: torch.full_like(v, math.log(std)) for k, v in weights.items()}
        noisy = Posterior(weights, log_s, weights, torch.tensor(2 * math.log(std)))  # N(w, std^2 I)
        errors[std] = sum(error_rate(model, noisy.sample(generator), x, y) for _ in range(samples)) / samples
        if errors[std] <= clean + tolerance:
            return std, errors
    return NOISE_GRID[-1], errors


def fit_posterior(model: torch.nn.Module, w0: dict[str, Tensor], inputs: Tensor, labels: Tensor,
                  init_std: float, delta: float = 0.025, epochs: int = 20, batch_size: int = 256,
                  lr: float = 1e-4, scale_lr: float = 1e-2, seed: int = 0, objective: str = "quadratic",
                  fit_mean: bool = False, progress: bool = False,
                  store: EvaluationStore | None = None) -> Posterior:
    """Minimize a PAC-Bayes ``objective`` over ``log s`` and ``log lambda`` (``scale_lr``), from
    ``s = init_std`` (:func:`noise_probe` finds one) and the ``lambda`` that minimizes the KL there, with
    Q's mean ``mu`` the model's own weights: held there, or with ``fit_mean`` moved from there too (Adam,
    ``lr``; every weight that drifts by ``d`` costs ``d^2 / (2 lambda)`` of KL, so ``lr`` is small). Q is
    never independent of the model's weights. With a ``store``, Q, Adam's state and the generator's are
    kept after each epoch (stage ``posterior-fit``), and a rerun continues from the last epoch kept to
    the Q an uninterrupted fit gives."""
    if not init_std > 0:
        raise ValueError(f"the initial posterior standard deviation must be > 0, got {init_std}")
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown PAC-Bayes objective {objective!r}; expected one of {OBJECTIVES}")
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    w0 = {k: w0[k].to(v) for k, v in params.items()}
    # KL(N(mu, s^2) || N(w0, lambda)) is least at lambda = mean(s^2 + (mu - w0)^2)
    spread = sum(float(((v.double() - w0[k].double()) ** 2).sum()) for k, v in params.items())
    count = sum(v.numel() for v in params.values())
    prior_var = init_std ** 2 + spread / count
    log_s = {k: torch.full_like(v, math.log(init_std)).requires_grad_() for k, v in params.items()}
    posterior = Posterior({k: v.requires_grad_(fit_mean) for k, v in params.items()}, log_s, w0,
                          torch.tensor(math.log(prior_var), dtype=torch.float32).requires_grad_())
    groups = [{"params": [*posterior.log_s.values(), posterior.log_prior_var], "lr": scale_lr}]
    if fit_mean:
        groups.append({"params": list(posterior.mu.values()), "lr": lr})
    optimizer = torch.optim.Adam(groups)
    generator = torch.Generator().manual_seed(seed)
    done = _resume_fit(store, posterior, optimizer, generator)
    if done > epochs:
        raise ValueError(f"the kept fit ran {done} epochs, more than the {epochs} asked for")
    m = len(inputs)
    per_epoch = math.ceil(m / batch_size)
    bar = tqdm(total=epochs * per_epoch, initial=done * per_epoch, desc="posterior", disable=not progress,
               leave=False)
    for epoch in range(done, epochs):
        for index in batches(m, batch_size, 1, generator):
            logits = last_logits(model, posterior.sample(generator), inputs[index])
            objective_value = pac_bayes_objective(surrogate(logits, labels[index]), posterior.kl(), m,
                                                  delta / len(PRIOR_GRID), objective)
            optimizer.zero_grad()
            objective_value.backward()
            optimizer.step()
            bar.update()
        if store is not None:
            store.keep("posterior-fit", _fit_state(epoch + 1, posterior, optimizer, generator))
    bar.close()
    return Posterior({k: v.detach() for k, v in posterior.mu.items()},
                     {k: v.detach() for k, v in posterior.log_s.items()}, posterior.w0,
                     posterior.log_prior_var.detach())


def _fit_state(epochs: int, posterior: Posterior, optimizer: torch.optim.Optimizer,
               generator: torch.Generator) -> dict[str, Tensor]:
    """What :func:`fit_posterior` needs to continue after ``epochs``: Q, Adam's moments, the generator."""
    adam = {f"adam/{index}/{name}": value for index, moments in optimizer.state_dict()["state"].items()
            for name, value in moments.items()}
    return {"epochs": torch.tensor(epochs), "generator": generator.get_state(),
            "log_prior_var": posterior.log_prior_var, **adam,
            **{f"mu/{k}": v for k, v in posterior.mu.items()},
            **{f"log_s/{k}": v for k, v in posterior.log_s.items()}}


def _resume_fit(store: EvaluationStore | None, posterior: Posterior, optimizer: torch.optim.Optimizer,
                generator: torch.Generator) -> int:
    """Load the last epoch :func:`_fit_state` kept into Q, Adam and the generator; the epochs done."""
    kept = store.stage("posterior-fit") if store is not None else None
    if kept is None:
        return 0
    with torch.no_grad():
        posterior.log_prior_var.copy_(kept["log_prior_var"])
        for k in posterior.mu:
            posterior.mu[k].copy_(kept[f"mu/{k}"])
            posterior.log_s[k].copy_(kept[f"log_s/{k}"])
    moments: dict[int, dict[str, Tensor]] = {}
    for key, value in kept.items():
        if key.startswith("adam/"):
            _, index, name = key.split("/")
            moments.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": moments, "param_groups": optimizer.state_dict()["param_groups"]})
    generator.set_state(kept["generator"])
    return int(kept["epochs"])


@torch.no_grad()
def error_rate(model: torch.nn.Module, params: dict[str, Tensor], inputs: Tensor, labels: Tensor,
               batch_size: int = 1024) -> float:
    """The 0-1 error of the network with ``params`` (float64 count)."""
    wrong, device = 0, next(iter(params.values())).device
    for start in range(0, len(inputs), batch_size):
        logits = last_logits(model, params, inputs[start:start + batch_size].to(device))
        wrong += int((logits.argmax(dim=1) != labels[start:start + batch_size].to(device)).sum())
    return wrong / len(inputs)


def monte_carlo_losses(model: torch.nn.Module, posterior: Posterior, inputs: Tensor, labels: Tensor,
                       losses: Callable[[Tensor, Tensor], Tensor], mc_samples: int, chunk_size: int,
                       delta_prime: float, seed: int = 0, progress: bool = False,
                       store: EvaluationStore | None = None, stage: str = "monte-carlo"
                       ) -> tuple[list[float], list[float], int, int]:
    """Q's training losses ``e_S(Q)``, estimated and bounded (Dziugaite & Roy's Monte Carlo step, with a
    fresh network per chunk of examples rather than per pass over the set); ``losses(logits, labels)``
    gives a ``(chunk, K)`` 0/1 table, K losses scored by the same sampled networks.

    Each pass shuffles the set (seeded) and cuts it into ``k = m // chunk_size`` chunks; a freshly sampled
    network scores each chunk; the ``r = m - k chunk_size`` examples left over count as losses. Given
    the shuffles, the N chunk loss rates are independent in [0, 1] with mean ``p`` over the covered
    examples, so ``kl(mean || p) <= ln(2/delta')/N`` (Maurer 2004) and
    ``e_S(Q) <= ((m - r) p + r) / m``, for each of the K losses. Returns ``(estimates, upper bounds, N,
    passes)``. With a ``store``, each pass's counts and the generator's state are kept as ``stage``, and a
    rerun continues after the last pass kept."""
    m = len(inputs)
    chunks = m // chunk_size
    if chunk_size < 1 or chunks < 1:
        raise ValueError(f"chunk_size must lie in [1, m = {m}], got {chunk_size}")
    passes = math.ceil(mc_samples / chunks)
    generator = torch.Generator().manual_seed(seed)
    counts, done = None, 0  # counted in integers: the estimates are exact
    kept = store.stage(stage) if store is not None else None
    if kept is not None:
        counts, done = kept["counts"], int(kept["passes"])
        generator.set_state(kept["generator"])
    with torch.no_grad():
        for finished in tqdm(range(done + 1, passes + 1), desc="Monte Carlo", initial=done, total=passes,
                             disable=not progress, leave=False):
            order = torch.randperm(m, generator=generator)
            for j in range(chunks):
                index = order[j * chunk_size:(j + 1) * chunk_size]
                lost = losses(last_logits(model, posterior.sample(generator), inputs[index]), labels[index])
                counts = lost.sum(dim=0).long() + (0 if counts is None else counts.to(lost.device))
            if store is not None:
                store.keep(stage, {"counts": counts, "passes": torch.tensor(finished),
                                   "generator": generator.get_state()})
    samples, leftover = passes * chunks, m - chunks * chunk_size
    estimates = [int(c) / (samples * chunk_size) for c in counts]
    uppers = [((m - leftover) * kl_inverse_upper(e, math.log(2 / delta_prime) / samples) + leftover) / m
              for e in estimates]
    return estimates, uppers, samples, passes
