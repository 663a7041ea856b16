"""The time loop of Eq. 4, ``h_t = phi(W h_{t-1} + M x_t + b)``, for a W that is fixed over time.

Six interchangeable routes, all exact (they differ only in rounding):

- ``torch``: PyTorch's fused RNN kernel (``torch.rnn_relu`` / ``torch.rnn_tanh``, cuDNN on a
  GPU), which takes any weight tensors and keeps autograd; relu and tanh only.
- ``scan``: :class:`_Scan`, one autograd node for the whole sequence. Forward runs one ``addmm``
  and one in-place activation per step; backward runs one ``addmm`` and one elementwise op per step
  and forms ``dL/dW = sum_t g_t h_{t-1}^T`` as one large GEMM at the end. Every activation.
- ``graph`` (CUDA only): the scan with its two time loops captured as CUDA graphs once per shape and
  replayed (:mod:`spectral_analysis.nn.cuda_graphs`): the same kernels without a host launch each.
- ``fused`` (CUDA, Triton): one persistent Triton kernel per direction that keeps W on chip across all
  T steps (:mod:`spectral_analysis.nn.fused_recurrence`), for ``n <= 128`` in float32 or float64, and
  streams W from L2 each step up to ``n = 512``; every activation but modReLU.
- ``loop``: the obviously correct twin, a plain Python loop under autograd (dense W).
- ``reflector``: the same loop with ``W h`` applied by the transition's own structure, W never formed:
  the reflectors one at a time (Algorithm 1, :func:`~spectral_analysis.linalg.reflector_loop`), KRU's
  factor-by-factor product, DizzyRNN's packed rotations.

``auto`` picks ``torch`` for relu/tanh on CUDA (cuDNN); for the other activations on CUDA ``fused`` where
it can hold W on chip and run with TF32 products (:func:`fused_in_tf32`; two launches a pass, timed on an
H200 in ``benchmarks/recurrence_fused_cuda_h200.json``), else ``graph`` (3.5x the scan's training steps a
second on an H200, ``benchmarks/bench_gpu_sharing.py``), except modReLU, which stays on ``scan`` until a card
has timed KRU's replayed loops; and ``scan`` on the CPU, where it measured faster than PyTorch's own kernel
(``benchmarks/bench_recurrence.py``). Models whose transitions apply themselves (the uRNN) take
``reflector`` instead (``nn.recurrent``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from spectral_analysis.linalg.triton_support import triton_unavailable
from spectral_analysis.nn.activations import activate, activate_, derivative_from_output
from spectral_analysis.nn.cuda_graphs import Buffers, run_body
from spectral_analysis.vocabulary import MODRELU, RECURRENCES

TORCH_KERNEL_ACTIVATIONS = ("relu", "tanh")
FUSED_RESIDENT_SIZE = 128
"""The largest hidden size whose W the fused kernels hold on chip: at n = 256 a program asked for 278,528
bytes of shared memory where an H200 gives 232,448 (a first card, 2026-12-04); W is padded to a power of
two, so nothing between 128 and 256 fits either. Past it the kernels stream W each step."""
FUSED_MAX_SIZE = 512
"""The largest hidden size the fused kernels take: a program holds its 16 rows of the pre-activation,
``16 n`` floats, in registers (64 a thread of 4 warps at n = 512)."""
FUSED_DTYPES = (torch.float32, torch.float64)


class _Scan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xp: Tensor, W: Tensor, h0: Tensor, activation: str, leak: float, graphs: bool) -> Tensor:
        T, keep_z = xp.shape[0], activation == "abs"

        def steps(b: Buffers) -> None:
            b["H"][0].copy_(b["h0"])
            _forward_steps(b["xp"], b["W"], b["H"], b.get("Z"), activation, leak)

        def outputs() -> Buffers:
            return {"H": xp.new_empty((T + 1, *h0.shape))} | ({"Z": torch.empty_like(xp)} if keep_z else {})

        key = ("scan forward", activation, leak) if graphs else None
        done = run_body(key, outputs, steps, {"xp": xp, "W": W, "h0": h0})
        ctx.activation, ctx.leak, ctx.graphs = activation, leak, graphs
        ctx.save_for_backward(W, done["H"], *((done["Z"],) if keep_z else ()))
        return done["H"][1:]

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):
        W, H, *z = ctx.saved_tensors
        if ctx.activation == "identity":
            D = None
        elif ctx.activation == "abs":
            D = torch.sgn(z[0])
        else:
            D = derivative_from_output(H[1:], ctx.activation, ctx.leak)

        def steps(b: Buffers) -> None:
            _backward_steps(b["g"], b.get("D"), b["W"], b["GZ"])

        def outputs() -> Buffers:
            return {"GZ": torch.empty_like(H[1:])}

        inputs = {"g": g, "W": W} | ({} if D is None else {"D": D})
        GZ = run_body("scan backward" if ctx.graphs else None, outputs, steps, inputs)["GZ"]
        grad_W = torch.tensordot(GZ, H[:-1], dims=([0, 1], [0, 1])) if ctx.needs_input_grad[1] else None
        grad_h0 = GZ[0] @ W if ctx.needs_input_grad[2] else None
        return GZ, grad_W, grad_h0, None, None, None


def _forward_steps(xp: Tensor, W: Tensor, H: Tensor, Z: Tensor | None, activation: str, leak: float) -> None:
    """Eq. 4 into ``H[1:]`` from ``H[0]``: one ``addmm`` and one in-place activation a step (``abs`` keeps
    ``z_t`` in ``Z``: its sign is the derivative)."""
    Wt = W.t()
    for t in range(xp.shape[0]):
        if Z is None:
            activate_(torch.addmm(xp[t], H[t], Wt, out=H[t + 1]), activation, leak)
        else:
            torch.abs(torch.addmm(xp[t], H[t], Wt, out=Z[t]), out=H[t + 1])


def _backward_steps(g: Tensor, D: Tensor | None, W: Tensor, GZ: Tensor) -> None:
    """``dL/dz_t`` into ``GZ`` backward in time: ``GZ_t = (g_t + GZ_(t+1) W) * phi'_t`` (``D`` holds phi')."""
    T = g.shape[0]
    torch.mul(g[T - 1], D[T - 1], out=GZ[T - 1]) if D is not None else GZ[T - 1].copy_(g[T - 1])
    for t in range(T - 2, -1, -1):
        torch.addmm(g[t], GZ[t + 1], W, out=GZ[t])  # g_t + GZ_(t+1) W in one pass
        if D is not None:
            GZ[t].mul_(D[t])


def recurrence_scan(xp: Tensor, W: Tensor, h0: Tensor, activation: str, leak: float,
                    graphs: bool = False) -> Tensor:
    """Hidden states ``(T, B, n)`` from input projections ``xp = M x_t + b`` ``(T, B, n)`` by the scan;
    ``graphs`` replays both time loops as CUDA graphs (:func:`~spectral_analysis.nn.cuda_graphs.replay`)."""
    return _Scan.apply(xp, W, h0, activation, leak, graphs)


def recurrence_loop(xp: Tensor, h0: Tensor, step: Callable[[Tensor], Tensor], activation: str,
                    leak: float) -> Tensor:
    """The reference: ``h_t = phi(step(h_{t-1}) + xp_t)`` under autograd, ``step(h) = W h``."""
    h, states = h0, []
    for t in range(xp.shape[0]):
        h = activate(step(h) + xp[t], activation, leak)
        states.append(h)
    return torch.stack(states)


def recurrence_torch(x: Tensor, M: Tensor, b: Tensor, W: Tensor, h0: Tensor, activation: str) -> Tensor:
    """PyTorch's fused kernel on batch-first ``x (B, T, ni)``; returns ``(B, T, n)``."""
    kernel = torch.rnn_relu if activation == "relu" else torch.rnn_tanh
    with warnings.catch_warnings():  # cuDNN copies W into its flat buffer: W is new at every call
        warnings.filterwarnings("ignore", message=".*contiguous chunk of memory.*")
        # cuDNN views the weights as one flat buffer: a transposed or strided W (the SVD map's) must be
        # made contiguous first ("view size is not compatible with input tensor's size and stride")
        weights = [M.contiguous(), W.contiguous(), b.contiguous(), torch.zeros_like(b)]
        out, _ = kernel(x.contiguous(), h0.unsqueeze(0).contiguous(), weights, True, 1, 0.0,
                        torch.is_grad_enabled(), False, True)
    return out


def fused_in_tf32(dtype: torch.dtype) -> bool:
    """Whether the fused kernels' float32 products run in TF32: where ``torch.backends.cudnn.allow_tf32``
    allows it (on by default), the flag under which PyTorch's own RNN and LSTM kernels (cuDNN) do the same.
    Measured on an H200 at n = 128, T = 784: IEEE float32 products made the kernels 17-61 times slower than
    TF32 (``benchmarks/fused_settings_cuda_h200.json``).

    >>> fused_in_tf32(torch.float64)
    False
    """
    return dtype == torch.float32 and torch.backends.cudnn.allow_tf32


def fused_unavailable(activation: str, size: int | None, dtype: torch.dtype,
                      device: torch.device) -> str | None:
    """Why the ``fused`` route cannot run for this layer, or ``None`` when it can (``size`` None: unknown).

    >>> fused_unavailable("leaky_relu", 1024, torch.float32, torch.device("cuda"))  # doctest: +SKIP
    'the fused kernels take n up to 512, and this layer has n = 1024; use 'graph' or 'scan''
    """
    if activation == MODRELU:
        return "the fused kernels have no modReLU; use 'scan' or 'graph'"
    if reason := triton_unavailable(device):
        return f"{reason}; use 'scan'"
    if size is None or size > FUSED_MAX_SIZE:
        return (f"the fused kernels take n up to {FUSED_MAX_SIZE}, and this layer has "
                f"n = {size}; use 'graph' or 'scan'")
    if dtype not in FUSED_DTYPES:
        return f"the fused kernels run in float32 or float64, not {dtype}; use 'scan'"
    return None


def resolve_recurrence(mode: str, activation: str, device: torch.device, size: int | None = None,
                       dtype: torch.dtype = torch.float32) -> str:
    """The concrete route for ``mode`` (``auto`` resolved) for a layer of hidden size ``size``;
    ``ValueError`` when it cannot run."""
    if mode not in RECURRENCES:
        raise ValueError(f"unknown recurrence {mode!r}; expected one of {RECURRENCES}")
    if mode == "auto":
        if device.type != "cuda" or activation == MODRELU:  # modReLU: graph by name until a card times it
            return "scan"
        if activation in TORCH_KERNEL_ACTIVATIONS:
            return "torch"
        if (fused_unavailable(activation, size, dtype, device) or not fused_in_tf32(dtype)
                or size > FUSED_RESIDENT_SIZE):
            # IEEE products were slower than the replayed scan on an H200; a streamed W is not timed yet
            return "graph"
        return "fused"
    if mode == "fused" and (reason := fused_unavailable(activation, size, dtype, device)):
        raise ValueError(f"recurrence='fused' cannot run here: {reason}")
    if mode == "graph" and device.type != "cuda":
        raise ValueError(f"recurrence='graph' replays CUDA graphs: it needs a CUDA device, not "
                         f"{device.type!r}; use 'scan'")
    if mode == "torch" and activation not in TORCH_KERNEL_ACTIVATIONS:
        raise ValueError(f"recurrence='torch' (PyTorch's fused RNN kernel) supports only "
                         f"{TORCH_KERNEL_ACTIVATIONS}, not {activation!r}; use 'scan'")
    return mode
