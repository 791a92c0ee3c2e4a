"""bench/gptj_step.py: its PyTorch layers against HuggingFace's GPTJBlock,
ipuxl's steps against the float64 reference, the driver's check failing a
peer outside tolerance, and the ``--quick`` run exiting 0. Not a timing
test."""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from repo_modules import ROOT, load

torch = pytest.importorskip("torch")  # the reference of every check

gs = load("bench/gptj_step.py", "bench/_peer.py", "bench/_stats.py", "bench/_step_bench.py")
sb = sys.modules["_step_bench"]


def _hf_block(size, weights, i):
    """transformers' GPTJBlock (float64, no dropout) with layer i's weights."""
    from transformers import GPTJConfig
    from transformers.models.gptj.modeling_gptj import GPTJBlock
    _, s, h, nh, r = gs.SIZES[size]
    cfg = GPTJConfig(n_embd=h, n_head=nh, rotary_dim=r, n_positions=s,
                     activation_function="gelu_new", layer_norm_epsilon=gs.EPS,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    blk = GPTJBlock(cfg).double().eval()
    w = {n: torch.from_numpy(weights[f"l{i}.{n}"]).double() for n in gs.LAYER_NAMES}
    # nn.Linear keeps (out, in): the transposes of the benchmark's matrices.
    pairs = [(blk.ln_1.weight, w["ln_w"]), (blk.ln_1.bias, w["ln_b"]),
             (blk.attn.q_proj.weight, w["wq"].T), (blk.attn.k_proj.weight, w["wk"].T),
             (blk.attn.v_proj.weight, w["wv"].T), (blk.attn.out_proj.weight, w["wo"].T),
             (blk.mlp.fc_in.weight, w["w_in"].T), (blk.mlp.fc_in.bias, w["b_in"]),
             (blk.mlp.fc_out.weight, w["w_out"].T), (blk.mlp.fc_out.bias, w["b_out"])]
    with torch.no_grad():
        for dst, src in pairs:
            dst.copy_(src)
    return blk


@pytest.mark.parametrize("size", ["tiny", "mid"])
def test_torch_layers_are_huggingface_gptj_blocks(size):
    pytest.importorskip("transformers")
    weights = gs.make_weights(size, 0)
    m = gs.TorchPeer(weights, size, {}, dtype=torch.float64)
    x = torch.from_numpy(gs.make_batches(size, 1, 1)[0][0]).double()
    with torch.no_grad():
        got = m.forward(x)
        want = x
        for i in range(gs.LAYERS):
            want = _hf_block(size, weights, i)(want)[0]
    # HuggingFace takes the attention scores (and its sin/cos) in float32.
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0,
                               atol=1e-5 * float(want.abs().max()))


def test_ipuxl_steps_match_float64_reference():
    opts = {"seed": 0, "pool": 2}
    ref_losses, ref_w = sb.reference(gs.BENCH, "tiny", 3, opts)
    m, data = sb._fresh(gs.BENCH, gs.IpuxlPeer, "tiny", opts)
    try:
        losses = [m.step(data[i % 2]) for i in range(3)]
        w = m.weights()
    finally:
        m.session.__exit__(None, None, None)
    np.testing.assert_allclose(losses, ref_losses, rtol=gs.LOSS_RTOL)
    assert sorted(w) == sorted(gs.NAMES)
    for n in gs.NAMES:
        np.testing.assert_allclose(w[n], ref_w[n], rtol=0, atol=gs.W_ATOL, err_msg=n)


class _FakePeer:
    """A driver handle whose check replies with the reference's own steps,
    one weight moved by ``shift``, or raises ``error``."""

    def __init__(self, name, shift=0.0, error=None):
        self.name, self.shift, self.error = name, shift, error

    def call(self, cmd, size, n):
        assert cmd == "check"
        if self.error:
            raise RuntimeError(self.error)
        losses, w = sb.reference(gs.BENCH, size, n, {"seed": 0, "pool": 2})
        w["l1.wo"] = w["l1.wo"] + self.shift
        return {"losses": list(losses), "weights": w}


def test_check_fails_a_peer_outside_tolerance_and_drops_a_failing_optional_one():
    peers = [_FakePeer("ipuxl"), _FakePeer("jax", shift=3 * gs.W_ATOL),
             _FakePeer("torch.compile", error="torch.compile: InductorError: no compiler")]
    ok, out, _, _, dtype, failed = sb.check(gs.BENCH, peers, "tiny", 2, {"seed": 0, "pool": 2})
    assert dtype == "float32" and not ok
    assert out["ipuxl"]["ok"] and out["ipuxl"]["weight_abs_diff"] == 0.0
    assert not out["jax"]["ok"] and out["jax"]["worst_weight"] == "l1.wo"
    assert failed == {"torch.compile": "fails: torch.compile: InductorError: no compiler"}
    with pytest.raises(RuntimeError, match="broken"):  # a peer that is not optional
        sb.check(gs.BENCH, [_FakePeer("torch", error="broken")], "tiny", 2,
                 {"seed": 0, "pool": 2})


@pytest.mark.slow  # 20-35 s: both sizes, a float64 reference, three peers
def test_quick_run_exits_0():
    peers = ["ipuxl"] + [p for p in ("jax", "torch") if importlib.util.find_spec(p)]
    env = dict(os.environ)
    for k in ("PYTHONPATH", "IPUXL_CORE_DIR"):  # the child runs in the repository root
        if env.get(k):
            env[k] = os.pathsep.join(os.path.abspath(p) for p in env[k].split(os.pathsep) if p)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gptj_step.py"), "--quick",
                           "--peers", ",".join(peers)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    assert "all peers agree" in proc.stdout
    for p in peers:
        assert proc.stdout.count(f"  {p:<13} max loss rel diff") == 2, p
