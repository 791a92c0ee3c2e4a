"""The transformer block of bench/transformer_step.py: its gradients (one SGD
step, recovered as (w0 - w1) / lr) and a few steps' losses and weights
against float64 PyTorch autograd, with and without the host passes. Not a
timing test."""
import numpy as np
import pytest

from repo_modules import load

pytestmark = pytest.mark.slow  # trains whole examples

torch = pytest.importorskip("torch")

ts = load("bench/transformer_step.py", "bench/_peer.py", "bench/_stats.py")


def _torch_grads(size, x, t):
    w = ts.make_weights(size, 0)
    m = ts.TorchPeer(w, size, {}, dtype=torch.float64)
    xb, tb = m.prepare(x, t)
    loss = ((m.forward(xb) - tb) ** 2).mean()
    loss.backward()
    return float(loss.detach()), {n: m.p[n].grad.numpy() for n in ts.NAMES}


@pytest.mark.parametrize("passes", ["all", "none"])
@pytest.mark.parametrize("size", ["small", "large"])
def test_block_gradients_match_torch(size, passes, monkeypatch):
    monkeypatch.setenv("IPUXL_HOST_PASSES", passes)
    x, t = ts.make_batches(size, 1, 1)[0]
    w0 = ts.make_weights(size, 0)
    m = ts.IpuxlPeer(w0, size, {})
    try:
        loss = m.step(m.prepare(x, t))
        w1 = m.weights()
    finally:
        m.session.__exit__(None, None, None)
    ref_loss, ref = _torch_grads(size, x, t)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    for n in ts.NAMES:
        got = (w0[n].astype(np.float64) - w1[n]) / ts.LR
        scale = float(np.max(np.abs(ref[n])))
        assert scale > 0, n
        # w1 is float32: (w0 - w1) / lr carries ~|w| * 6e-8 / lr of rounding.
        atol = 2e-3 * scale + 4.0 * float(np.max(np.abs(w0[n]))) * 6e-8 / ts.LR
        np.testing.assert_allclose(got, ref[n], rtol=0, atol=atol, err_msg=n)


def test_block_steps_match_float64_reference():
    opts = {"seed": 0, "pool": 2}
    ref_losses, ref_w = ts.reference("small", 4, opts)
    w0 = ts.make_weights("small", 0)
    m = ts.IpuxlPeer(w0, "small", {})
    try:
        d = [m.prepare(x, t) for x, t in ts.make_batches("small", 2, 1)]
        losses = [m.step(d[i % 2]) for i in range(4)]
        w = m.weights()
    finally:
        m.session.__exit__(None, None, None)
    np.testing.assert_allclose(losses, ref_losses, rtol=ts.LOSS_RTOL)
    for n in ts.NAMES:
        np.testing.assert_allclose(w[n], ref_w[n], rtol=0, atol=ts.W_ATOL, err_msg=n)
