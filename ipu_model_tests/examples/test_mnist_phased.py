"""examples/mnist_phased.py: the phased program (tutorial 6: weights and
Adam state in remote buffers, batch-serialised phases, IO tiles) trains the
same weights as the same model without phasing, from the same start."""
import argparse

import numpy as np
import pytest

import ipuxl as popxl
from repo_modules import load

pytestmark = pytest.mark.slow  # trains whole examples

mnist_phased = load("examples/mnist_phased.py")


def _train(mode, io_mode, start, batches, ga, mb):
    opts = argparse.Namespace(mode=mode, io_mode=io_mode, micro_batch=mb,
                              gradient_accumulation=ga, lr=1e-3)
    np.random.seed(0)
    build = mnist_phased.phased_program if mode == "phased" else mnist_phased.unphased_program
    ir, images, labels, losses, weights = build(opts)
    session = popxl.Session(ir, "ipu_model")
    named = weights.named_tensors
    if start is not None:
        session.write_variables_data({named[k]: v for k, v in start.items()})
    out = []
    with session:
        for x, y in batches:
            out.append(session.run({images: x, labels: y})[losses])
    trained = session.get_tensors_data(list(named.values()))
    return {k: trained[t] for k, t in named.items()}, np.array(out)


@pytest.mark.parametrize("io_mode", ["io", "compute", "io_overlapped"])
def test_phased_training_matches_unphased(io_mode):
    ga, mb = 3, 4
    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((ga, mb, 784)).astype(np.float32),
                rng.integers(0, 10, (ga, mb)).astype(np.int32)) for _ in range(3)]
    start = {k: np.ascontiguousarray(v) for k, v in
             _train("unphased", io_mode, None, [], ga, mb)[0].items()}
    want, want_loss = _train("unphased", io_mode, start, batches, ga, mb)
    got, got_loss = _train("phased", io_mode, start, batches, ga, mb)
    assert sorted(got) == sorted(want)
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-4, atol=1e-5)
    for k in want:
        assert not np.array_equal(want[k], start[k]), k  # it trained
        np.testing.assert_allclose(got[k], want[k], rtol=1e-3, atol=2e-5, err_msg=k)


def test_phased_profile_keeps_the_weights_off_chip():
    opts = argparse.Namespace(mode="phased", io_mode="io", micro_batch=8,
                              gradient_accumulation=4, lr=1e-3)
    ir = mnist_phased.phased_program(opts)[0]
    off = mnist_phased.unphased_program(opts)[0]
    from ipuxl.profile import profile_ir

    p, q = profile_ir(ir, "ipu2"), profile_ir(off, "ipu2")
    params = (784 * 512 + 512) + 2 * (512 * 512 + 512) + (512 * 10 + 10)
    # Weights (fp32) and Adam state (fp16 + fp32) of every layer in Streaming Memory.
    assert sum(b["streaming_bytes"] for b in p.remote_buffers) >= params * (4 + 2 + 4)
    assert p.target["num_io_tiles"] == 32
    assert p.totals["variables"] < 0.6 * q.totals["variables"]


def test_phased_step_views_streaming_memory_and_changes_no_bit():
    """The host pass view_remote_loads runs every load of weights and Adam
    state of the phased step without a copy (30 loads: 3 forward phases of
    2, 4 backward phases of 6), and the losses and every remote variable
    are bit for bit those of the program without host passes."""
    opts = argparse.Namespace(mode="phased", io_mode="io", micro_batch=4,
                              gradient_accumulation=2, lr=1e-3)
    rng = np.random.default_rng(2)
    batches = [(rng.standard_normal((2, 4, 784)).astype(np.float32),
                rng.integers(0, 10, (2, 4)).astype(np.int32)) for _ in range(2)]
    results = {}
    for passes in ("view_remote_loads", "none"):
        np.random.seed(0)
        ir, images, labels, losses, weights = mnist_phased.phased_program(opts)
        with popxl.Session(ir, "ipu_model", host_passes=passes) as s:
            loss = [s.run({images: x, labels: y})[losses] for x, y in batches]
            assert s._prog.host_passes.get("view_remote_loads", 0) == (30 if passes != "none"
                                                                       else 0)
            remote = s._prog.remote_variables
            values = s.get_tensors_data(remote)
            results[passes] = (np.array(loss), [values[v] for v in remote])
    (got_loss, got), (want_loss, want) = results["view_remote_loads"], results["none"]
    np.testing.assert_array_equal(got_loss, want_loss)
    assert len(got) == len(want) == 4 * 6
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
