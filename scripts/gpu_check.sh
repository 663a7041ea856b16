#!/usr/bin/env bash
# One call on a lent GPU machine, with `.gpu` carried (scripts/gpu_carry.sh): the CUDA benchmarks of the time
# loop, then the GPU tests (the fused Triton kernels compiled, not interpreted), their logs and JSON back
# through $OUT; about 9 minutes at most.
#   bash scripts/gpu_check.sh [CONFIGURATION...]   (bench_gpu_sharing.py's EXPERIMENT/KEY, timed only when given)
set -uo pipefail
# shellcheck source=scripts/gpu_setup.sh
source scripts/gpu_setup.sh || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import triton; print('triton', triton.__version__)"
export PYTHONWARNINGS=ignore::UserWarning PYTHONUNBUFFERED=1
# Each part has its own time limit, so one that hangs or fails leaves the others their turn; the timed parts
# come first (nothing else on the card beside them), the GPU tests of the compiled kernels last.
cd benchmarks || exit 1
# the fused-recurrence issue's table: n = 128, 256, 512 at T = 784, B = 64 and 128, and Table 2's epoch
timeout 200 python3 bench_recurrence.py --device cuda --cases 128:16 256:16 512:16 --batch 64 128 --repeats 7 \
  --reflector-repeats 0 --epoch --out "$OUT/recurrence_cuda.json" > "$OUT/recurrence_cuda.log" 2>&1
echo "bench_recurrence: rc=$?"; tail -n 9 "$OUT/recurrence_cuda.log"
# the fused Spectral-RNN's whole step as one CUDA graph (its own run: a failed capture can spoil the device)
timeout 60 python3 bench_recurrence.py --device cuda --cases 128:16 --batch 64 128 --repeats 7 --reflector-repeats 0 \
  --graphed --out "$OUT/recurrence_graphed_cuda.json" 2>&1 | tail -n 4
# the streamed kernels' launch settings (warps, rows of W a read) against cuDNN; n <= 128 is kept in
# benchmarks/fused_settings_cuda_h200.json
timeout 220 python3 bench_fused_settings.py --sizes 256 512 --out "$OUT/fused_settings_cuda.json" \
  > "$OUT/fused_settings.log" 2>&1
echo "bench_fused_settings: rc=$?"; grep -E "best|default" "$OUT/fused_settings.log"
# W's formation alone, the fused product beside the blocked one (n = 128: m = 16, 64, 128)
timeout 45 python3 bench_householder.py --device cuda --sizes 128 --repeats 9 \
  --out "$OUT/householder_cuda.json" 2>&1 | tail -n 4
if [ $# -gt 0 ]; then
  timeout 120 python3 bench_gpu_sharing.py "$@" --processes 1 12 --steps 20 --out "$OUT/gpu_sharing_cuda.json" 2>&1 \
    | tail -n 4
fi
cd .. || exit 1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_fused_recurrence.py tests/test_fused_householder.py \
  tests/test_gpu.py tests/test_recurrence.py tests/test_graph_routes.py > "$OUT/gpu_tests.log" 2>&1
echo "tests: rc=$?"; grep -E "^FAILED|passed|failed" "$OUT/gpu_tests.log" | tail -n 12
