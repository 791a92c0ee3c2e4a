"""How the core loads scipy-openblas32: single-threaded from the start (no
pool of spinning threads at import), without leaving its load-time
environment behind, and with the user's own OPENBLAS_NUM_THREADS kept."""
import json
import os
import subprocess
import sys

import pytest

_PROBE = r"""
import json, os
def _tasks():
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None
import numpy
before = _tasks()
import ipuxl
from ipuxl import _core_loader as cl
lib = getattr(cl._install_blas, "lib", None)
prefix = "scipy_"
get = None if lib is None else getattr(lib, prefix + "openblas_get_num_threads", None)
tasks = None if before is None else _tasks() - before  # threads ipuxl's import started
print(json.dumps({"env": os.environ.get("OPENBLAS_NUM_THREADS"), "tasks": tasks,
                  "threads": None if get is None else int(get()),
                  "loaded": lib is not None}))
"""


def _probe(extra_env):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env.update(extra_env)
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_blas_loads_single_threaded_and_restores_the_environment():
    got = _probe({})
    if not got["loaded"]:
        pytest.skip("scipy-openblas32 is not loaded on this CPU/build (the core's GEMM only)")
    assert got["env"] is None  # the load-time setting is not left behind
    assert got["threads"] == 1
    # No OpenBLAS worker threads were started: ipuxl's import adds as many
    # threads as when the user asks OpenBLAS for one thread before loading.
    if got["tasks"] is not None:
        assert got["tasks"] == _probe({"OPENBLAS_NUM_THREADS": "1"})["tasks"]


def test_users_openblas_num_threads_is_kept():
    got = _probe({"OPENBLAS_NUM_THREADS": "2"})
    assert got["env"] == "2"
