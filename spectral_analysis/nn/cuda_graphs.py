"""Loops over static buffers, captured once per key as CUDA graphs and replayed.

A time loop on a GPU launches a few tiny kernels a step, and each launch costs more host time than the
kernel runs: on an H200 the leaky-ReLU scan (``nn.time_loop``) took 34x cuDNN's relu kernel at n = 128 and
about the same time at n = 512 (``benchmarks/recurrence_cuda_h200.json``). A graph records the loop's
launches once and replays them in one call, the same kernels on the same buffers in the same order.
:func:`graphed_function` does the same for a function of fixed-shape tensors with its backward (W's
formation from its reflectors), by PyTorch's ``torch.cuda.make_graphed_callables``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import torch
from torch import Tensor

Buffers = dict[str, Tensor]

MAX_GRAPHS = 8
"""Graphs kept per process (least recently used dropped first): one per shape a model meets, e.g. the
training batch and the evaluation batch, forward and backward."""

_GRAPHS: OrderedDict[Hashable, tuple[torch.cuda.CUDAGraph, Buffers]] = OrderedDict()


def replay(key: Hashable, make_outputs: Callable[[], Buffers], body: Callable[[Buffers], None],
           inputs: Buffers) -> Buffers:
    """Copy ``inputs`` into the static buffers of ``key`` and run ``body`` on them by its graph.

    On first use of ``key``: the buffers are allocated (one like each input, and ``make_outputs()``),
    ``body`` runs once eagerly on a side stream (cuBLAS sets up its workspace outside the capture), then is
    captured. ``body`` must read and write only the buffers, with no host synchronization. The buffers
    returned are static: the next replay of ``key`` overwrites them, so clone what must outlive it.
    """
    found = _GRAPHS.get(key)
    if found is None:
        buffers = {name: torch.empty_like(value) for name, value in inputs.items()} | make_outputs()
        _copy_inputs(buffers, inputs)
        side = torch.cuda.Stream(device=next(iter(inputs.values())).device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            body(buffers)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            body(buffers)
        found = _GRAPHS[key] = (graph, buffers)
        while len(_GRAPHS) > MAX_GRAPHS:
            _GRAPHS.popitem(last=False)
    else:
        _GRAPHS.move_to_end(key)
    graph, buffers = found
    _copy_inputs(buffers, inputs)
    graph.replay()
    return buffers


def run_body(key: Hashable | None, make_outputs: Callable[[], Buffers], body: Callable[[Buffers], None],
             inputs: Buffers) -> Buffers:
    """The outputs of ``body`` (the buffers ``make_outputs`` allocates) on ``inputs``: run eagerly on fresh
    outputs when ``key`` is None, else replayed as ``key``'s graph (:func:`replay`) and cloned, so they
    outlive the next replay. ``key`` must name everything the body depends on besides the inputs' values
    (their shapes, dtypes and device are added here)."""
    if key is None:
        outputs = make_outputs()
        body(dict(inputs) | outputs)
        return outputs
    full_key = (key, tuple((name, value.shape, value.dtype, value.device) for name, value in inputs.items()))
    buffers = replay(full_key, make_outputs, body, inputs)
    return {name: value.clone() for name, value in buffers.items() if name not in inputs}


def _copy_inputs(buffers: Buffers, inputs: Buffers) -> None:
    for name, value in inputs.items():
        buffers[name].copy_(value)


def clear() -> None:
    """Drop every captured graph and its buffers (their memory returns to the caching allocator)."""
    _GRAPHS.clear()


class _FreshGradients(torch.autograd.Function):
    """The identity on its inputs (views, so a graph that reads them in place needs no copy) whose backward
    hands on copies of the gradients it receives."""

    @staticmethod
    def forward(ctx, *tensors: Tensor) -> tuple[Tensor, ...]:
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    def backward(ctx, *grads: Tensor) -> tuple[Tensor, ...]:
        return tuple(None if g is None else g.clone() for g in grads)


def graphed_function(function: Callable[..., Tensor], *sample_args: Tensor) -> Callable[..., Tensor]:
    """``function`` (of tensors shaped as ``sample_args``, every one requiring grad, one tensor out)
    captured forward and backward as CUDA graphs by ``torch.cuda.make_graphed_callables`` and replayed,
    giving fresh tensors: the graphs write their output and the inputs' gradients into the same buffers at
    every replay, so the output is cloned and the gradients copied (a gradient accumulated over two
    backward passes would otherwise alias the buffer the second overwrites). Inputs at the sample's
    addresses (parameters updated in place) are read where they are; others are copied in.

    >>> W = torch.randn(4, 4, device="cuda", requires_grad=True)  # doctest: +SKIP
    >>> square = graphed_function(lambda w: w @ w, W)  # doctest: +SKIP
    >>> square(W).sum().backward()  # doctest: +SKIP
    """
    graphed = torch.cuda.make_graphed_callables(function, sample_args)

    def replayed(*args: Tensor) -> Tensor:
        return graphed(*_FreshGradients.apply(*args)).clone()

    return replayed
