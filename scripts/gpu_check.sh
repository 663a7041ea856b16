#!/usr/bin/env bash
# One call on a lent GPU machine, with `.gpu` carried (scripts/gpu_carry.sh): the GPU tests and the CUDA
# benchmarks of the time loop, their logs and JSON back through $OUT.
#   bash scripts/gpu_check.sh [CONFIGURATION...]   (bench_gpu_sharing.py's EXPERIMENT/KEY; default below)
set -uo pipefail
# shellcheck source=scripts/gpu_setup.sh
source scripts/gpu_setup.sh || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
export PYTHONWARNINGS=ignore::UserWarning
python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_recurrence.py tests/test_graph_routes.py > "$OUT/gpu_tests.log" 2>&1
echo "tests: rc=$?"; tail -n 3 "$OUT/gpu_tests.log"
cd benchmarks || exit 1
python3 bench_recurrence.py --device cuda --cases 128:16 256:32 --repeats 5 --reflector-repeats 0 \
  --out "$OUT/recurrence_cuda.json" 2>&1 | tail -n 4
# default: KRU's modReLU loops (two Kronecker blocks at N = 512, the dense fallback at N = 128), whose graph
# route `auto` takes only once timed (Fig. 3's Spectral-RNN was timed on 2026-11-27: gpu_sharing_cuda_h200.json)
if [ $# -gt 0 ]; then configurations=("$@"); else configurations=(kru-adding/kru_length750 kru-copy/kru_length1000); fi
python3 bench_gpu_sharing.py "${configurations[@]}" --processes 1 12 --steps 20 \
  --out "$OUT/gpu_sharing_cuda.json" 2>&1 | tail -n 4
