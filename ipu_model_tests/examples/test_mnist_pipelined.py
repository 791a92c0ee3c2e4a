"""examples/mnist_pipelined.py: the pipelined program (tutorial 4: three
stages over two IPUs, stashes or recomputation) trains the same weights as
the same model run micro-batch after micro-batch, and its profile shows both
IPUs and the copies between them."""
import argparse

import numpy as np
import pytest

import ipuxl as popxl
from repo_modules import load

pytestmark = pytest.mark.slow  # trains whole examples

mnist_pipelined = load("examples/mnist_pipelined.py")


def _train(mode, recompute, batches, ga, mb):
    opts = argparse.Namespace(mode=mode, micro_batch=mb, gradient_accumulation=ga, lr=1e-3,
                              recomputation=recompute)
    np.random.seed(0)
    ir, images, labels, losses, weights = mnist_pipelined.train_program(opts)
    named = weights.named_tensors
    out = []
    with popxl.Session(ir, "ipu_model") as session:
        start = session.get_tensors_data(list(named.values()))
        start = {k: start[t].copy() for k, t in named.items()}
        for x, y in batches:
            out.append(session.run({images: x, labels: y})[losses])
        trained = session.get_tensors_data(list(named.values()))
    return start, {k: trained[t] for k, t in named.items()}, np.array(out)


@pytest.mark.parametrize("recompute", [False, True])
def test_pipelined_training_matches_unpipelined(recompute, monkeypatch):
    # Not under IPUXL_CHECK_HOST_PASSES: Adam's step is lr * g / (|g| + eps),
    # so for the few weights whose gradient is a cancellation near 0 the
    # summation order of a folded transpose (not a wrong value) moves the
    # weight by up to 4e-5 after one step (36 of fc1's 401,408 elements),
    # beyond the checker's elementwise tolerance. This test compares two
    # programs itself.
    monkeypatch.delenv("IPUXL_CHECK_HOST_PASSES", raising=False)
    ga, mb = 6, 4
    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((ga, mb, 784)).astype(np.float32),
                rng.integers(0, 10, (ga, mb)).astype(np.int32)) for _ in range(2)]
    start, want, want_loss = _train("unpipelined", False, batches, ga, mb)
    start2, got, got_loss = _train("pipelined", recompute, batches, ga, mb)
    assert sorted(got) == sorted(want)
    for k in start:
        np.testing.assert_array_equal(start[k], start2[k])
    # Loss per micro-batch, in order: the pipeline keeps the micro-batch order.
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-6, atol=1e-7)
    for k in want:
        assert not np.array_equal(want[k], start[k]), k  # it trained
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-7, err_msg=k)


def test_pipeline_needs_enough_micro_batches():
    opts = argparse.Namespace(mode="pipelined", micro_batch=2, gradient_accumulation=4,
                              lr=1e-3, recomputation=False)
    with pytest.raises(ValueError, match="gradient-accumulation >= 6"):
        mnist_pipelined.train_program(opts)


def test_pipelined_profile_has_both_ipus_and_the_copies():
    from ipuxl.profile import profile_ir

    opts = argparse.Namespace(mode="pipelined", micro_batch=5, gradient_accumulation=6,
                              lr=1e-3, recomputation=False)
    np.random.seed(0)
    ir = mnist_pipelined.train_program(opts)[0]
    prof = profile_ir(ir, "ipu2")
    assert prof.target["num_ipus"] == 2
    rows = prof.per_ipu()
    assert [r["ipu"] for r in rows] == [0, 1]
    # fc1 (784x512) and fc2 (512x512) with their Adam state are on IPU 0,
    # fc3 (512x512) and fc4 (512x10) on IPU 1.
    assert rows[0]["variables"] > rows[1]["variables"] > 0
    assert all(r["cycles"] > 0 and r["code"] > 0 for r in rows)
    copies = prof.ipu_copies()
    pairs = sorted({(c["source"], c["destination"]) for c in copies})
    assert pairs == [(0, 1), (1, 0)]
    # Activations (5x512 float32) both ways, in every cycle but the last:
    # 2 ramp-up + (6 - 2) main + 1 ramp-down cycles (one copies a dummy).
    assert all(c["bytes"] == 5 * 512 * 4 for c in copies)
    assert [c["executions"] for c in copies] == [7, 7]
    assert all(c["cycles"] > 500 for c in copies)  # a global sync, then the IPU-Links
    text = prof.summary()
    assert "copies between IPUs" in text and "busy cycles" in text
