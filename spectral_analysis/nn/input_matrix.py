"""The recurrent models' input weights, one matrix a layer, and the word embedding that may factor the first.

Layer 0's input weight ``M`` (``rows x n_i``) reads the network's input; the layers above read the hidden
states below. On a vocabulary (Penn Treebank's 10,000 words) a language model written the standard way
does not hold one ``rows x n_i`` matrix: it embeds each word in ``e`` dimensions and feeds the embedding to
the recurrent layer (Zaremba et al. 2014, whose successive mini-batches ICML Section 7.3 adopts, and
PyTorch's word_language_model example: an ``nn.Embedding`` of the hidden size before ``nn.LSTM``). With
``embedding = e``, ``M = A E^T`` with ``E`` the ``n_i x e`` embedding and ``A`` the ``rows x e`` weight
the recurrent layer applies to it, held through ``torch.nn.utils.parametrize``, so that every reader of
``M`` (the time loops, the analyzers' step Jacobians, the certificates) sees the one matrix while the
optimizer moves the two factors, as it moves ``nn.Embedding`` and ``nn.LSTM``'s input weight.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from spectral_analysis.nn.arguments import check_input_std, check_positive_sizes, layer_input_stds


class FactoredInput(nn.Module):
    """``M = A E^T``: the parametrization of layer 0's input weight by a word embedding ``E`` (``n_i x
    e``, N(0, 1), ``nn.Embedding``'s start) held here, and the recurrent layer's weight ``A`` on it (the
    parametrized tensor's ``original``).

    ```python
    >>> factored = FactoredInput(vocabulary=5, width=2)
    >>> tuple(factored(torch.ones(3, 2)).shape)
    (3, 5)

    ```
    """

    def __init__(self, vocabulary: int, width: int) -> None:
        super().__init__()
        self.embedding = nn.Parameter(torch.randn(vocabulary, width))

    def forward(self, weight: Tensor) -> Tensor:
        return weight @ self.embedding.T


def input_weights(rows: int, fan_ins: list[int], input_std: float | None, embedding: int | None = None,
                  fan_scale: int = 1) -> nn.ParameterList:
    """One ``rows x fan-in`` input weight per layer, N(0, s^2) with ``s`` from
    :func:`~spectral_analysis.nn.arguments.layer_input_stds`; with ``embedding = e``, layer 0's is ``A E^T``
    (:class:`FactoredInput`), ``A`` drawn as a first layer of fan-in ``e`` is.

    ```python
    >>> weights = input_weights(8, [1000, 8], None, embedding=4)
    >>> tuple(weights[0].shape), sum(p.numel() for p in weights.parameters())
    ((8, 1000), 4096)

    ```
    """
    check_input_std(input_std)
    if embedding is not None:
        check_positive_sizes(embedding=embedding)
    first = fan_ins[0] if embedding is None else embedding
    stds = layer_input_stds([first, *fan_ins[1:]], input_std, fan_scale)
    drawn = (torch.randn(rows, f) * s for f, s in zip([first, *fan_ins[1:]], stds, strict=True))
    weights = nn.ParameterList([nn.Parameter(w) for w in drawn])
    if embedding is not None:  # unsafe: the original, A, is not the shape of the matrix M it makes
        parametrize.register_parametrization(weights, "0", FactoredInput(fan_ins[0], embedding), unsafe=True)
    return weights


def is_embedded(weights: nn.ParameterList) -> bool:
    """Whether layer 0's input weight is a word embedding's product ``A E^T`` (:class:`FactoredInput`).

    ```python
    >>> is_embedded(input_weights(8, [1000], None, embedding=4)), is_embedded(input_weights(8, [1000], None))
    (True, False)

    ```
    """
    return parametrize.is_parametrized(weights, "0")


def symbol_vectors(weights: nn.ParameterList, ids: Tensor) -> tuple[Tensor, Tensor | None]:
    """Layer 0's reading of symbol ids ``(B, T)``: the vectors that dropout acts on and the matrix that
    then multiplies them (None: the vectors are already ``M x``). With a word embedding, ``M = A E^T``,
    they are the embedded words ``E[ids]`` and ``A``: Zaremba et al. (2014) drop the embedding's output,
    the recurrent layer's input, not ``M x``. Without one, the one-hot word's ``M x``, ``M``'s column.

    ```python
    >>> weights = input_weights(8, [1000], None, embedding=4)
    >>> vectors, A = symbol_vectors(weights, torch.tensor([[3, 7]]))
    >>> tuple(vectors.shape), torch.allclose(vectors @ A.T, weights[0][:, [3, 7]].T[None])
    ((1, 2, 4), True)

    ```
    """
    if is_embedded(weights):
        factored = weights.parametrizations["0"]
        return nn.functional.embedding(ids, factored[0].embedding), factored.original
    return nn.functional.embedding(ids, weights[0].T), None
