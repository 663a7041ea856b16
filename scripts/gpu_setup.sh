# Sourced first in a call to a lent GPU machine (`source scripts/gpu_setup.sh`), with `.gpu` carried
# (scripts/gpu_carry.sh writes it): installs the carried wheels and MNIST's file under /tmp/site (once per
# machine: a warm machine keeps them) and puts the tree and /tmp/site on PYTHONPATH.
SITE=${GPU_SITE:-/tmp/site}  # GPU_SITE: another place (the tests use one)
if [ ! -f "$SITE/mnist/data/mnist.pkl.gz" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    .gpu/whl/*.whl || return 1
  mkdir -p "$SITE/mnist/data" && cp .gpu/mnist/__init__.py "$SITE/mnist/" || return 1
  python3 -c "import gzip, lzma, shutil, sys
with lzma.open(sys.argv[1], 'rb') as src, gzip.open(sys.argv[2], 'wb', compresslevel=1) as dst:
    shutil.copyfileobj(src, dst)" .gpu/mnist.pkl.xz "$SITE/mnist/data/mnist.pkl.gz.part" || return 1
  mv "$SITE/mnist/data/mnist.pkl.gz.part" "$SITE/mnist/data/mnist.pkl.gz"
fi
export PYTHONPATH="$PWD:$SITE"
