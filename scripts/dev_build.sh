#!/usr/bin/env bash
# Developer build of the C++ core into its own directory, without pip:
#   scripts/dev_build.sh build/dev-me
#   IPUXL_CORE_DIR=build/dev-me PYTHONPATH=python python -m pytest ipu_model_tests -q
# Several developers can build at once, each into their own directory.
set -euo pipefail
dir=${1:-build/dev}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
# The build tools (the project's "dev" extra), installed from PyPI if missing.
python3 -c "import pybind11" 2>/dev/null || \
  python3 -m pip install --quiet --disable-pip-version-check "pybind11>=2.12" ninja cmake
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S "$here" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -Dpybind11_DIR="$(python3 -c 'import pybind11; print(pybind11.get_cmake_dir())')" \
    -DPython_EXECUTABLE="$(command -v python3)" >/dev/null
fi
cmake --build "$dir" -j "${JOBS:-2}"
