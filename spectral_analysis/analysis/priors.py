"""The priors of the PAC-Bayes certificates (:mod:`~spectral_analysis.analysis.certify`): the
data-independent initialization a run's seed fixes, and a prior learned from data the certificate does
not use (a held-out split, or a seeded part of the training set).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from tqdm import tqdm

from spectral_analysis.analysis.posterior import batches, last_logits
from spectral_analysis.io import Subject
from spectral_analysis.nn import build_model


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


def train_prior(model: torch.nn.Module, w0: dict[str, Tensor], inputs: Tensor, labels: Tensor,
                epochs: int = 20, batch_size: int = 128, lr: float = 1e-3, seed: int = 0,
                progress: bool = False) -> dict[str, Tensor]:
    """The learned prior mean: ``w_0`` trained by cross entropy (Adam) on the prior part of the data only."""
    weights = {k: v.detach().clone().requires_grad_() for k, v in w0.items()}
    optimizer = torch.optim.Adam(list(weights.values()), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    steps = epochs * math.ceil(len(inputs) / batch_size)
    for index in tqdm(batches(len(inputs), batch_size, epochs, generator), total=steps, desc="prior",
                      disable=not progress, leave=False):
        loss = torch.nn.functional.cross_entropy(last_logits(model, weights, inputs[index]), labels[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return {k: v.detach() for k, v in weights.items()}
