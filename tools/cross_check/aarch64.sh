#!/usr/bin/env bash
# Builds the core's sources (everything but the Python bindings) with the
# C++ self-test for aarch64 and runs it under qemu-user: the NEON baseline
# kernels checked against double-precision loops without an ARM machine.
#   apt-get install g++-aarch64-linux-gnu qemu-user   # Debian packages
#   tools/cross_check/aarch64.sh [build-dir]
# With CXX=g++ QEMU= it builds and runs the same test natively (x86-64:
# the best level the CPU has).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$here/build/cross_check}
CXX=${CXX:-aarch64-linux-gnu-g++}
QEMU=${QEMU-qemu-aarch64}
mkdir -p "$out/obj"
flags=(-std=c++17 -O2 -fno-math-errno -fno-trapping-math -pthread -I "$here/cpp")
# One object per source, as many compilers at once as there are cores.
find "$here/cpp" -name '*.cpp' ! -name 'bindings*.cpp' -print0 | sort -z |
  xargs -0 -P "$(nproc)" -I{} bash -c \
    'o="$1/obj/$(echo "$2" | sed "s|/|_|g").o"; "$3" "${@:4}" -c "$2" -o "$o"' \
    bash "$out" {} "$CXX" "${flags[@]}"
# -static: qemu-user then needs no aarch64 libraries (the core loads a BLAS
# only when one is installed; none is, so its own GEMM runs).
"$CXX" "${flags[@]}" -static "$here/tools/cross_check/selftest.cpp" "$out"/obj/*.o \
  -o "$out/selftest" -ldl
if [ -n "$QEMU" ]; then
  "$QEMU" "$out/selftest"
  "$QEMU" "$out/selftest" 1
else
  "$out/selftest"
  "$out/selftest" 1
fi
