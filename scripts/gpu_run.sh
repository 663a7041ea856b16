#!/usr/bin/env bash
# One call on a lent GPU machine (docs/howto/experiments.md, "A machine without Ray"), with `.gpu` carried:
# the named grids at paper scale, side by side (one `run` each, WORKERS local processes each), stopped by
# a time budget; their results directories come back through $OUT as results.tgz (unpack here with
# scripts/gpu_unpack.sh) and each grid's log as <grid>.log.
#   bash scripts/gpu_run.sh SECONDS WORKERS GPUS_PER_TRIAL GRID[@WORKERS][:KEY=VALUE...]... [-- MORE_RUN_OPTIONS]
# A GRID's KEY=VALUE pairs (colon-separated) are its `--only` selection, and @WORKERS its own number of
# processes in place of the call's WORKERS, e.g.
#   bash scripts/gpu_run.sh 450 6 0.08 table2-mnist:variant=rnn,ornn fig3-mnist@3:variant=spectral:task=mnist
set -uo pipefail
seconds=$1 workers=$2 share=$3
shift 3
specs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do specs+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#specs[@]} -gt 0 ] || { echo "gpu_run.sh: name at least one grid" >&2; exit 2; }
# each grid's name and processes, read (and a malformed @ refused) before the setup starts anything
names=() grid_workers=()
for spec in "${specs[@]}"; do
  head=${spec%%:*}
  names+=("${head%@*}") grid_workers+=("$workers")
  if [[ $head == *@* ]]; then
    [[ ${head##*@} =~ ^[1-9][0-9]*$ ]] ||
      { echo "gpu_run.sh: '$head': the workers after @ must be a positive whole number" >&2; exit 2; }
    grid_workers[-1]=${head##*@}
  fi
done
# shellcheck source=scripts/gpu_setup.sh
source scripts/gpu_setup.sh || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore::UserWarning
logs=()
for i in "${!specs[@]}"; do
  IFS=: read -r -a parts <<<"${specs[$i]}"
  name=${names[$i]} only=()
  [ ${#parts[@]} -gt 1 ] && only=(--only "${parts[@]:1}")
  logs+=("$OUT/$name.log")
  timeout $((seconds + 60)) python3 -m spectral_analysis.cli run "$name" --scale paper --backend processes \
    --workers "${grid_workers[$i]}" --gpus-per-trial "$share" --time-budget "$seconds" --out /tmp/runs \
    "${only[@]}" "$@" > "$OUT/$name.log" 2>&1 &
done
# how busy the card is halfway through (trials side by side share it; past saturation each slows down)
(sleep $((seconds / 2)); nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader) \
  > "$OUT/gpu_load.txt" 2>&1 &
wait
tail -n 4 "${logs[@]}"
tar czf "$OUT/results.tgz" $(printf 'results/%s/paper ' "${names[@]}")
