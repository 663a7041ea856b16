#!/usr/bin/env bash
# One call on a lent GPU machine (docs/howto/experiments.md, "A machine without Ray"), with `.gpu` carried:
# the named grids at paper scale in local processes, stopped by a time budget, their results directories
# brought back through $OUT as results.tgz (unpack here with scripts/gpu_unpack.sh).
#   bash scripts/gpu_run.sh SECONDS WORKERS GPUS_PER_TRIAL NAME... [-- MORE_RUN_OPTIONS]
# e.g. bash scripts/gpu_run.sh 500 12 0.08 table2-mnist -- --only variant=rnn,ornn
set -uo pipefail
seconds=$1 workers=$2 share=$3
shift 3
names=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do names+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
# shellcheck source=scripts/gpu_setup.sh
source scripts/gpu_setup.sh || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore::UserWarning
timeout $((seconds + 60)) python3 -m spectral_analysis.cli run "${names[@]}" --scale paper --backend processes \
  --workers "$workers" --gpus-per-trial "$share" --time-budget "$seconds" --out /tmp/runs "$@" 2>&1 |
  tee "$OUT/run.log"
tar czf "$OUT/results.tgz" $(printf 'results/%s/paper ' "${names[@]}")
