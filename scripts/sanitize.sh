#!/usr/bin/env bash
# Builds the core with AddressSanitizer and UndefinedBehaviorSanitizer into
# build/asan (or $1) and runs a subset of the tests against it:
#   scripts/sanitize.sh              # build + ops, engine, session tests + a short fuzz
#   scripts/sanitize.sh build/asan -k matmul   # extra pytest arguments after the dir
# Python itself is not instrumented: the ASan runtime is preloaded
# (LD_PRELOAD) and leak checking is off (the interpreter's own allocations
# at exit are not leaks of the core). Any report fails the run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-build/asan}
shift || true
cd "$here"
python3 -c "import pybind11" 2>/dev/null || \
  python3 -m pip install --quiet --disable-pip-version-check "pybind11>=2.12" ninja cmake
if [ ! -f "$dir/build.ninja" ]; then
  cmake -S "$here" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DIPUXL_SANITIZE=address,undefined \
    -Dpybind11_DIR="$(python3 -c 'import pybind11; print(pybind11.get_cmake_dir())')" \
    -DPython_EXECUTABLE="$(command -v python3)" >/dev/null
fi
cmake --build "$dir" -j "${JOBS:-2}"

cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt")
asan=$("${cxx:-c++}" -print-file-name=libasan.so)
ubsan=$("${cxx:-c++}" -print-file-name=libubsan.so)
export LD_PRELOAD="$asan:$ubsan"
# Reports also go to files (pytest captures the test's stderr, and an
# aborted process leaves no captured output behind).
reports=${IPUXL_SANITIZE_REPORTS:-$dir/reports}
mkdir -p "$reports"
rm -f "$reports"/asan.* "$reports"/ubsan.*
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:allocator_may_return_null=1:detect_stack_use_after_return=0:log_path=$reports/asan:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan:${UBSAN_OPTIONS:-}"
export IPUXL_CORE_DIR="$dir" PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
# The subset: every op family, the engine (GEMM paths, replicas, ISA
# levels), sessions (streams, checkpoints, remote buffers, weight sharing,
# the reliability cases), the bad-input catalogue and a short fuzz run in
# each host-pass mode. Left out: the timing-based kill test and the
# 10,000-deep programs (minutes under ASan, no code of their own).
subset=(ipu_model_tests/ops ipu_model_tests/engine
        ipu_model_tests/session/test_session.py ipu_model_tests/session/test_streams.py
        ipu_model_tests/session/test_reliability.py ipu_model_tests/session/test_remote_buffers.py
        ipu_model_tests/session/test_checkpoint.py ipu_model_tests/session/test_host_weight_sharing.py
        ipu_model_tests/session/test_determinism.py
        ipu_model_tests/fuzz ipu_model_tests/catalogue)
status=0
IPUXL_FUZZ_CI_GRAPHS=${IPUXL_FUZZ_CI_GRAPHS:-40} \
  python3 -m pytest "${subset[@]}" -q -p no:cacheprovider -x "$@" || status=$?
# Warnings alone (a refused huge allocation, which the tests expect to
# surface as MemoryError) are listed; errors fail the run.
found=$(find "$reports" -maxdepth 1 \( -name 'asan.*' -o -name 'ubsan.*' \) | sort)
if [ -n "$found" ]; then
  echo "sanitizer reports in $reports:"
  # shellcheck disable=SC2086
  cat $found | head -200
  # shellcheck disable=SC2086
  if grep -qE "ERROR|runtime error" $found; then
    status=1
  fi
fi
echo "sanitize.sh: exit status $status"
exit $status
