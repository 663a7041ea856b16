#!/usr/bin/env bash
# Here, after a call of scripts/gpu_run.sh: TARBALL's results/<experiment>/paper/ files over this
# checkout's (the machine's copy began as this one and is the newer), and each parked run the machine no
# longer holds removed here too (its trial was kept there); then the compute ledger is written again.
#   bash scripts/gpu_unpack.sh /work/.device/N/results.tgz
set -euo pipefail
cd "$(dirname "$0")/.."
[ ! -f scripts/gpu_slim.sh ] || bash scripts/gpu_slim.sh --restore
listing=$(tar tzf "$1")
mapfile -t grids < <(grep -oE '^results/[^/]+/paper/' <<<"$listing" | sort -u)
[ ${#grids[@]} -gt 0 ] || { echo "$1 holds no results/<experiment>/paper/ directory" >&2; exit 1; }
tar xzf "$1" "${grids[@]}"
for grid in "${grids[@]}"; do
  # only a grid the machine ran (its summary came back) says which parked runs it kept; a tarball of
  # estimates alone leaves them
  grep -qxF "${grid}summary.json" <<<"$listing" || continue
  for parked in "$grid"parked/*/; do
    [ -d "$parked" ] && ! grep -qxF "$parked" <<<"$listing" && rm -rf "$parked" && echo "kept there: removed $parked"
  done
done
"${PYTHON:-.venv/bin/python}" -m spectral_analysis.cli experiments --ledger --results results > /dev/null
printf 'unpacked %s\n' "${grids[@]}"
