#!/usr/bin/env bash
# The project's test command (README "Test"): install this checkout with its
# test dependencies, then run the whole suite on the ipu_model simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check ".[test]"
# Run from a directory outside the checkout's python/ folder so the installed
# package (with its compiled core) is the one imported.
exec python3 -m pytest ipu_model_tests -q "$@"
