"""Kill test (issue 13): the MNIST training example saves a checkpoint each
epoch and is killed with SIGKILL at random points, 20 times; every time the
last checkpoint loads and training resumes to exactly the weights of an
uninterrupted run."""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ipuxl.checkpoint import read_checkpoint

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "train_with_checkpoints.py"
TRIALS = 20
ARGS = ["--epochs", "4", "--samples", "512", "--batch", "32"]


def _env():
    env = dict(os.environ)
    if "IPUXL_CORE_DIR" in env:  # developer build: the same package as this process
        python_dir = str(Path(__file__).resolve().parents[2] / "python")
        env["PYTHONPATH"] = python_dir + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _data(tmp_path):
    from ipuxl.datasets import DatasetNotFoundError, load_mnist

    try:
        images, labels = load_mnist("train")
    except DatasetNotFoundError as e:
        pytest.skip(f"MNIST is not installed here ({e}); scripts/run_tests.sh installs it")
    path = tmp_path / "mnist_subset.npz"
    np.savez(path, images=images[:512], labels=labels[:512])
    return path


def _run(run_dir, data, kill_after=None):
    cmd = [sys.executable, str(SCRIPT), "--dir", str(run_dir), "--data", str(data)] + ARGS
    p = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if kill_after is None:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
        return True
    try:
        p.wait(timeout=kill_after)
        finished = True
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        p.wait()
        finished = False
    out, err = p.communicate()
    if finished:
        assert p.returncode == 0, err.decode()
    return finished


def _final(run_dir):
    with np.load(run_dir / "final.npz") as z:
        return {k: z[k] for k in z.files}


def test_killed_training_resumes_to_the_same_weights(tmp_path):
    data = _data(tmp_path)
    ref_dir = tmp_path / "reference"
    t0 = time.monotonic()
    _run(ref_dir, data)
    duration = time.monotonic() - t0
    reference = _final(ref_dir)
    rng = np.random.default_rng(2026)
    killed = 0
    for trial in range(TRIALS):
        run_dir = tmp_path / f"trial{trial}"
        # A kill at a random point of the run; if the run finished first (the
        # machine was faster this time), the trial starts again with an
        # earlier kill, so that every trial really is interrupted.
        t = float(rng.uniform(0.05, duration))
        for _ in range(8):
            if not _run(run_dir, data, kill_after=t):
                killed += 1
                break
            shutil.rmtree(run_dir)
            t /= 2
        # Whatever the moment of the kill, the checkpoint on disk (if any) is whole.
        if (run_dir / "checkpoint.npz").exists():
            read_checkpoint(run_dir / "checkpoint.npz")
        _run(run_dir, data)
        got = _final(run_dir)
        assert got.keys() == reference.keys()
        for k in reference:
            np.testing.assert_array_equal(got[k], reference[k], err_msg=f"trial {trial}: {k}")
    assert killed == TRIALS
