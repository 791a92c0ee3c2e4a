"""The core on aarch64, without an ARM machine: tools/cross_check/aarch64.sh
cross-compiles the C++ sources (all but the Python bindings) with a C++
self-test (GEMM in every transpose and tail, pre-packed B, the fused
input-gradient update, Conv / Softmax / Gelu through the kernel registry,
each against double-precision loops) and runs it under qemu-user at 2
threads and at 1. The NEON level is the one that runs there.

Needs Debian's g++-aarch64-linux-gnu and qemu-user (.ci/run installs
them); skips and says so without them.
"""
import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.slow  # cross-compiles the core and runs it under qemu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tools", "cross_check", "aarch64.sh")


@pytest.mark.skipif(not (shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64")),
                    reason="needs the aarch64 cross compiler and qemu-user "
                           "(apt-get install g++-aarch64-linux-gnu qemu-user; .ci/run does)")
def test_core_selftest_on_aarch64(tmp_path):
    # Without IPUXL_ISA: a level forced for this run's x86 core (the suite at
    # IPUXL_ISA=avx2, say) is not a level of the aarch64 build, which then
    # refuses it; this test runs the NEON level whatever the suite forces.
    env = {k: v for k, v in os.environ.items() if k != "IPUXL_ISA"}
    r = subprocess.run(["bash", SCRIPT, str(tmp_path)], capture_output=True, text=True,
                       timeout=3600, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    # Both runs (2 threads, then 1) at the NEON level, with no failure.
    assert out.count("level neon, GEMM neon") == 2, out[-4000:]
    assert out.count("ok (0 failures)") == 2, out[-4000:]
