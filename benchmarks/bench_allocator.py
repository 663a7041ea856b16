"""Training steps with freed memory kept in the process (``allocator.keep_freed_memory``) or given back.

mallopt is process-wide, so each (case, policy) runs in its own subprocess, interleaved, one thread:
2 warm-up steps, then the median of 3 timed steps (forward + backward + Adam), with the process's
user and system CPU seconds and its page faults per step. Cases: pixel MNIST at Table 2's sizes
(RNN and LSTM n = 128, Spectral-RNN n = 128 with m1 = m2 = 16; T = 784, batch 128) and KRU's adding
problem (N = 512 complex, T = 750, batch 50).

    python benchmarks/bench_allocator.py --out benchmarks/allocator_cpu.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

import torch
from report import write_report

CASES = [
    {"name": "pixel MNIST, RNN", "model": "rnn", "ni": 1, "n": 128, "T": 784, "B": 128, "options": {}},
    {"name": "pixel MNIST, LSTM", "model": "lstm", "ni": 1, "n": 128, "T": 784, "B": 128, "options": {}},
    {"name": "pixel MNIST, Spectral-RNN", "model": "spectral", "ni": 1, "n": 128, "T": 784, "B": 128,
     "options": {"m1": 16, "m2": 16}},
    {"name": "adding, KRU", "model": "kru", "ni": 2, "n": 512, "T": 750, "B": 50,
     "options": {"complex": True}},
]

STEPS = """
import json, resource, statistics, sys, time
import torch
from spectral_analysis.allocator import keep_freed_memory
from spectral_analysis.nn import build_model
case, policy = json.loads(sys.argv[1]), sys.argv[2]
if policy == "keep":
    assert keep_freed_memory()
torch.set_num_threads(1)
torch.manual_seed(0)
model = build_model(case["model"], case["ni"], case["n"], 10, **case["options"])
optimizer = torch.optim.Adam(model.parameters())
x = torch.randn(case["B"], case["T"], case["ni"])
def step():
    optimizer.zero_grad()
    model(x).square().mean().backward()
    optimizer.step()
for _ in range(2):
    step()
seconds, user, system, faults = [], [], [], []
for _ in range(3):
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    step()
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    seconds.append(t1 - t0)
    user.append(r1.ru_utime - r0.ru_utime)
    system.append(r1.ru_stime - r0.ru_stime)
    faults.append(r1.ru_minflt - r0.ru_minflt)
print(json.dumps({"seconds": statistics.median(seconds), "user": statistics.median(user),
                  "system": statistics.median(system), "page_faults": statistics.median(faults)}))
"""


def measure(case: dict, policy: str) -> dict:
    out = subprocess.run([sys.executable, "-c", STEPS, json.dumps(case), policy], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="interleaved subprocess pairs per case")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as each measuring subprocess runs; the report's machine line records it
    cases = []
    for case in CASES:
        runs: dict[str, list[dict]] = {"keep": [], "release": []}
        for _ in range(args.repeats):
            for policy in runs:
                runs[policy].append(measure(case, policy))
        result = {policy: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                  for policy, rs in runs.items()}
        row = {**case, "per_step": result,
               "release_over_keep": result["release"]["seconds"] / result["keep"]["seconds"]}
        cases.append(row)
        print(f"{case['name']}: keep {result['keep']['seconds']:.3f} s/step "
              f"(sys {result['keep']['system']:.3f}), release {result['release']['seconds']:.3f} s/step "
              f"(sys {result['release']['system']:.3f}): {row['release_over_keep']:.2f}x", flush=True)
    write_report(args.out, "cpu", "one training step (forward, backward, Adam), 1 thread, per memory policy",
                 cases)


if __name__ == "__main__":
    main()
