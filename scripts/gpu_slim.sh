#!/usr/bin/env bash
# Before a call to a lent GPU machine (docs/howto/experiments.md, "A machine without Ray"): a call carries
# every tracked file with `.gpu/` (15 MB) in at most 64 MiB, and results/ alone passed 54 MB on 2026-11-30.
# `gpu_slim.sh GRID...` leaves every results/<experiment>/ but the named grids' out of the call: it drops
# them from git's index (the files stay on disk) and ignores them in .git/info/exclude, then prints the
# size that travels. `gpu_slim.sh --restore` tracks them again; scripts/gpu_unpack.sh runs it first, and
# run it by hand before any commit if the call is not unpacked (`git add -A` would commit their deletion).
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=$(git rev-parse --git-path info/exclude)
begin='# gpu_slim.sh: begin' end='# gpu_slim.sh: end'

restore() {  # only the folders the block lists: someone's own staged results stay staged
  grep -qxF "$begin" "$exclude" 2>/dev/null || return 0
  mapfile -t left_out < <(sed -n "/^$begin\$/,/^$end\$/{s|^/\(results/.*\)/\$|\1|p}" "$exclude")
  [ ${#left_out[@]} -eq 0 ] || git reset -q -- "${left_out[@]}"
  sed -i "/^$begin\$/,/^$end\$/d" "$exclude"
  echo "results/ tracked again"
}

if [ "${1:-}" = --restore ]; then restore; exit 0; fi
[ $# -gt 0 ] || { echo "usage: gpu_slim.sh GRID... | --restore" >&2; exit 2; }
for grid in "$@"; do
  [ -d "results/$grid" ] || { echo "gpu_slim.sh: no results/$grid/" >&2; exit 2; }
done
restore  # a second call slims anew
git diff --cached --quiet -- results || { echo "gpu_slim.sh: results/ has staged changes; commit them first" >&2; exit 1; }
mkdir -p "$(dirname "$exclude")"
{
  echo "$begin"
  for dir in results/*/; do
    name=$(basename "$dir")
    [[ " $* " == *" $name "* ]] && continue
    [ -n "$(git ls-files -- "$dir" | head -n 1)" ] || continue
    git rm -r -q --cached -- "$dir"
    echo "/results/$name/"
  done
  echo "$end"
} >> "$exclude"
git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null |
  awk '{s += $1} END {printf "the tree that travels (tracked and untracked, not ignored): %.1f MiB\n", s / 2^20}'
if [ -d .gpu ]; then du -sb .gpu | awk '{printf ".gpu/, if carried: %.1f MiB\n", $1 / 2^20}'; fi
