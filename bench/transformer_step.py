"""Transformer block training step: ipuxl versus JAX jit and PyTorch eager.

One pre-LN transformer block, the same in every peer, float32:

    h  = LayerNorm1(x)                                   (over the hidden axis)
    q, k, v = h Wq + bq, h Wk + bk, h Wv + bv            split into heads
    a  = softmax(q k^T / sqrt(d_head)) v                 per batch and head
    x1 = x + (a Wo + bo)
    y  = x1 + GELU_tanh(LayerNorm2(x1) W1 + b1) W2 + b2  (MLP 4 x hidden)
    loss = mean((y - target)^2)

and one plain SGD step (lr ``LR``) on all 16 parameters, in place. Sizes
(batch x seq x hidden, heads): 1 x 32 x 128 with 4 heads (``small``,
latency-bound), 4 x 64 x 256 with 4 heads (``large``, compute-bound) and
BERT-base's 8 x 128 x 768 with 12 heads (``bert``, about 45 GFLOP a step),
float32; ``bert16`` is the BERT-base block in float16: float16 weights,
activations and gradients, the matmuls accumulating in float32 (PopXL's
default float partials), the loss (the block's output cast to float32) in
float32 and its gradient cast back to float16, with a static loss scale
``LOSS_SCALE`` (the gradient of ``LOSS_SCALE * loss``, the step
``LR / LOSS_SCALE``, as the float16 PopXL applications train) so that the
gradients stay in float16's normal range; ``bert16h`` is ``bert16`` with
half partials (``partialsTypeMatMuls = "half"``, which every float16 PopXL
application in graphcore/examples sets): ipuxl's matmuls then accumulate in
float16 where the CPU has AVX512-FP16, while JAX and PyTorch, which have no
such option, run the ``bert16`` step. The initial weights are drawn once
with NumPy (seeded) and handed to every peer; inputs and targets come from a
seeded pool of ``--pool`` batches per size that every peer cycles through in
the same order. Every step includes feeding the batch and reading the loss
back as a Python float.

The peers:

* ``ipuxl``: the block as a popxl_addons ``Module`` (PopXL API:
  ``ops.layer_norm`` on the (tokens, hidden) view, batched ``@`` for the
  attention, ``ops.softmax``, ``ops.gelu``), ``addons.autodiff``, the loss
  and its gradient in the main graph, ``ops.scaled_add_`` on every variable;
  one ``Session.run`` per step, ``share_host_weights=True``.
* ``jax``: one ``jax.jit`` step (``value_and_grad`` + SGD, parameters
  donated), CPU backend.
* ``torch``: PyTorch eager, autograd, ``torch.optim.SGD``.

Each peer runs in its own spawned worker process; the driver alternates them
block by block (the starting peer rotating, ``--gap`` idle seconds and
``--warm-ms`` of the peer's untimed steps before each block) over
``--reps`` repetitions and reports medians and the ratios peer time /
ipuxl time (above 1: ipuxl faster), each the median of the per-repetition
ratios (paired: bench/_stats.py), with the CPU model, its SIMD
flags, the ISA level in use and every level's FMA peak.

Correctness: a fresh model of every peer runs ``--check-steps`` steps at each
size; its losses and final weights are compared with a float64 PyTorch run of
the same steps from the same start. The script exits with 1 if a peer is
outside float32 tolerance.

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/transformer_step.py
    ... bench/transformer_step.py --isa avx2        # ipuxl's workers at IPUXL_ISA=avx2
    ... bench/transformer_step.py --quick           # a smoke test, not a measurement
    ... bench/transformer_step.py --profile         # where ipuxl's step time goes
    ... bench/transformer_step.py --json out.json
"""
import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time

import numpy as np

from _peer import Peer  # bench/ is on sys.path when a script here runs
from _stats import paired_ratio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

LR = 0.05
EPS = 1e-5
GELU_K = float(np.sqrt(2.0 / np.pi))
GELU_A = 0.044715
SIZES = {"small": (1, 32, 128, 4), "large": (4, 64, 256, 4),  # batch, seq, hidden, heads
         "bert": (8, 128, 768, 12), "bert16": (8, 128, 768, 12), "bert16h": (8, 128, 768, 12)}
#: Sizes that run in float16 (every other: float32).
FLOAT16_SIZES = ("bert16", "bert16h")
#: Float16 sizes whose matmuls take half partials (``partialsTypeMatMuls =
#: "half"``, as Graphcore's float16 PopXL applications set it); the peers
#: have no such option and run the same step as ``bert16``.
HALF_PARTIALS_SIZES = ("bert16h",)
#: The float16 step's static loss scale (exact in every dtype: a power of 2).
LOSS_SCALE = 1024.0
PEERS = ("ipuxl", "jax", "torch")
INSTALL = {
    "ipuxl": "build the core (scripts/dev_build.sh build/dev) and run with "
             "IPUXL_CORE_DIR=build/dev PYTHONPATH=python, or pip install the project",
    "torch": "pip install torch==2.13.0",
    "jax": "pip install jax jaxlib",
}
# Parameter names and order, shared by every peer.
NAMES = ("ln1_w", "ln1_b", "wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo",
         "ln2_w", "ln2_b", "w1", "b1", "w2", "b2")
# Tolerances against the float64 reference after --check-steps steps
# (float16: a few units of its rounding, 2**-11 relative).
LOSS_RTOL = 1e-4
W_ATOL = 2e-5
TOLERANCES = {"float32": (LOSS_RTOL, W_ATOL), "float16": (1e-2, 3e-3)}  # (loss rel, weights abs)


def size_dtype(size) -> str:
    return "float16" if size in FLOAT16_SIZES else "float32"


def size_label(size):
    b, s, h, nh = SIZES[size]
    dt = " fp16" if size in FLOAT16_SIZES else ""
    return f"{b}x{s}x{h} ({nh} heads){dt}{' half partials' if size in HALF_PARTIALS_SIZES else ''}"


def step_flops(size) -> float:
    """Multiply-add FLOPs (2 per MAC) of one training step's matmuls: the
    forward's projections, MLP and attention products, and twice as many
    in the backward pass (input and weight gradients); the elementwise ops
    are left out (a few percent at these sizes)."""
    b, s, h, nh = SIZES[size]
    t = b * s
    fwd = 4 * 2 * t * h * h + 2 * 2 * t * h * 4 * h + 2 * 2 * b * s * s * h
    return 3.0 * fwd


def loss_scale(size) -> float:
    return LOSS_SCALE if size in FLOAT16_SIZES else 1.0


# --------------------------------------------------------------------------- data

def make_weights(size: str, seed: int):
    """{name: float32 array}. Matrices ~ N(0, 1/fan_in); LayerNorm scales
    1 + N(0, 0.1), shifts and biases N(0, 0.02) (non-trivial, so that a wrong
    gradient of any of them shows)."""
    _, _, h, _ = SIZES[size]
    rng = np.random.default_rng([seed, h])
    f = 4 * h
    shapes = {"ln1_w": (h,), "ln1_b": (h,), "wq": (h, h), "bq": (h,), "wk": (h, h), "bk": (h,),
              "wv": (h, h), "bv": (h,), "wo": (h, h), "bo": (h,), "ln2_w": (h,), "ln2_b": (h,),
              "w1": (h, f), "b1": (f,), "w2": (f, h), "b2": (h,)}
    out = {}
    for n in NAMES:
        shp = shapes[n]
        if len(shp) == 2:
            v = rng.normal(0.0, 1.0 / np.sqrt(shp[0]), shp)
        elif n.startswith("ln") and n.endswith("_w"):
            v = 1.0 + rng.normal(0.0, 0.1, shp)
        else:
            v = rng.normal(0.0, 0.02, shp)
        out[n] = v.astype(np.float16 if size in FLOAT16_SIZES else np.float32)
    return out


def make_batches(size: str, count: int, seed: int):
    """``count`` pairs (x, target), each (batch, seq, hidden) float32."""
    b, s, h, _ = SIZES[size]
    rng = np.random.default_rng([seed, b, s, h])
    dt = np.float16 if size in FLOAT16_SIZES else np.float32
    x = rng.standard_normal((count, b, s, h)).astype(dt)
    t = rng.standard_normal((count, b, s, h)).astype(np.float32)  # the loss is float32
    return [(x[i], t[i]) for i in range(count)]


# --------------------------------------------------------------------------- peers
# Each peer: __init__(weights, size, opts); prepare(x, target) -> its native
# batch; step(prepared) -> loss as a Python float; weights() -> {name: array}.

class TorchPeer:
    """PyTorch eager (autograd, torch.optim.SGD); with dtype float64 it is the
    reference."""

    name = "torch"

    def __init__(self, weights, size, opts, dtype=None):
        import torch
        import torch.nn.functional as F
        if opts.get("threads", 0) > 0:
            torch.set_num_threads(opts["threads"])
        self.torch, self.F = torch, F
        self.dtype = dtype or (torch.float16 if size in FLOAT16_SIZES else torch.float32)
        self.b, self.s, self.h, self.nh = SIZES[size]
        self.scale = loss_scale(size) if self.dtype == torch.float16 else 1.0
        self.p = {n: torch.tensor(weights[n], dtype=self.dtype, requires_grad=True)
                  for n in NAMES}
        self.opt = torch.optim.SGD(list(self.p.values()), lr=LR / self.scale)

    @staticmethod
    def version():
        import torch
        n = int(os.environ.get("OMP_NUM_THREADS", "0")) or torch.get_num_threads()
        return f"{torch.__version__} ({n} threads)"

    def prepare(self, x, t):
        loss_dtype = self.torch.float64 if self.dtype == self.torch.float64 else \
            self.torch.float32
        return (self.torch.from_numpy(x).to(self.dtype), self.torch.from_numpy(t).to(loss_dtype))

    def forward(self, x):
        F, p = self.F, self.p
        b, s, h, nh = self.b, self.s, self.h, self.nh
        dh = h // nh
        hn = F.layer_norm(x, (h,), p["ln1_w"], p["ln1_b"], EPS)
        q = (hn @ p["wq"] + p["bq"]).reshape(b, s, nh, dh).transpose(1, 2)
        k = (hn @ p["wk"] + p["bk"]).reshape(b, s, nh, dh).transpose(1, 2)
        v = (hn @ p["wv"] + p["bv"]).reshape(b, s, nh, dh).transpose(1, 2)
        att = self.torch.softmax((q @ k.transpose(-1, -2)) * (1.0 / np.sqrt(dh)), dim=-1)
        a = (att @ v).transpose(1, 2).reshape(b, s, h)
        x1 = x + (a @ p["wo"] + p["bo"])
        h2 = F.layer_norm(x1, (h,), p["ln2_w"], p["ln2_b"], EPS)
        m = F.gelu(h2 @ p["w1"] + p["b1"], approximate="tanh")
        return x1 + (m @ p["w2"] + p["b2"])

    def step(self, batch):
        x, t = batch
        y = self.forward(x).to(t.dtype)
        loss = ((y - t) ** 2).mean()
        self.opt.zero_grad(set_to_none=True)
        (loss * self.scale).backward()
        self.opt.step()
        return loss.item()

    def weights(self):
        return {n: v.detach().numpy().copy() for n, v in self.p.items()}


class JaxPeer:
    """JAX: the whole step (value_and_grad + SGD) under one jax.jit, the
    parameters donated."""

    name = "jax"

    def __init__(self, weights, size, opts):
        import jax
        import jax.numpy as jnp
        b, s, h, nh = SIZES[size]
        dh = h // nh

        def ln(x, w, bb):
            m = jnp.mean(x, axis=-1, keepdims=True)
            var = jnp.mean(jnp.square(x - m), axis=-1, keepdims=True)
            return (x - m) * jax.lax.rsqrt(var + EPS) * w + bb

        def loss_fn(p, x, t):
            hn = ln(x, p["ln1_w"], p["ln1_b"])
            q = (hn @ p["wq"] + p["bq"]).reshape(b, s, nh, dh).transpose(0, 2, 1, 3)
            k = (hn @ p["wk"] + p["bk"]).reshape(b, s, nh, dh).transpose(0, 2, 1, 3)
            v = (hn @ p["wv"] + p["bv"]).reshape(b, s, nh, dh).transpose(0, 2, 1, 3)
            att = jax.nn.softmax((q @ k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(dh)), axis=-1)
            a = (att @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
            x1 = x + (a @ p["wo"] + p["bo"])
            h2 = ln(x1, p["ln2_w"], p["ln2_b"])
            m = jax.nn.gelu(h2 @ p["w1"] + p["b1"], approximate=True)
            y = x1 + (m @ p["w2"] + p["b2"])
            return jnp.mean(jnp.square(y.astype(jnp.float32) - t))

        scale = loss_scale(size)

        def train_step(p, x, t):
            loss, g = jax.value_and_grad(lambda *a: loss_fn(*a) * scale)(p, x, t)
            return jax.tree_util.tree_map(lambda a, d: a - (LR / scale) * d, p, g), loss / scale

        self._step = jax.jit(train_step, donate_argnums=0)
        self.p = {n: jnp.asarray(weights[n]) for n in NAMES}

    @staticmethod
    def version():
        import jax
        import jaxlib
        return f"{jax.__version__} (jaxlib {jaxlib.__version__}, {jax.default_backend()})"

    def prepare(self, x, t):
        return x, t  # NumPy: every call transfers them (the feed)

    def step(self, batch):
        self.p, loss = self._step(self.p, *batch)
        return float(loss)

    def weights(self):
        return {n: np.array(v) for n, v in self.p.items()}


class IpuxlPeer:
    """The block in ipuxl's PopXL API (popxl_addons Module + autodiff), one
    Session.run per step."""

    name = "ipuxl"

    def __init__(self, weights, size, opts):
        import ipuxl as popxl
        import ipuxl.addons as addons
        import ipuxl.ops as ops

        b, s, h, nh = SIZES[size]
        dh = h // nh
        n_tok = b * s
        scale = float(1.0 / np.sqrt(dh))
        dt = popxl.float16 if size in FLOAT16_SIZES else popxl.float32
        ls = loss_scale(size)
        t0 = time.perf_counter()

        class Block(addons.Module):
            def build(self, x):
                def var(name):
                    return self.add_variable_input(name, lambda: weights[name].copy(), x.dtype)

                def heads(t, perm):  # (tokens, h) -> per-head layout
                    return ops.transpose(ops.reshape(t, (b, s, nh, dh)), perm)

                hn = ops.layer_norm(x, var("ln1_w"), var("ln1_b"), EPS)
                q = heads(hn @ var("wq") + var("bq"), (0, 2, 1, 3))      # (b, nh, s, dh)
                k = heads(hn @ var("wk") + var("bk"), (0, 2, 1, 3))      # (b, nh, s, dh)
                v = heads(hn @ var("wv") + var("bv"), (0, 2, 1, 3))      # (b, nh, s, dh)
                att = ops.softmax((q @ ops.transpose(k, (0, 1, 3, 2))) * scale, axis=3)
                a = ops.reshape(ops.transpose(att @ v, (0, 2, 1, 3)), (n_tok, h))
                x1 = x + (a @ var("wo") + var("bo"))
                h2 = ops.layer_norm(x1, var("ln2_w"), var("ln2_b"), EPS)
                m = ops.gelu(h2 @ var("w1") + var("b1"))
                return x1 + (m @ var("w2") + var("b2"))

        ir = popxl.Ir(replication=1)
        if size in HALF_PARTIALS_SIZES:
            ir._pb_ir.getSessionOptions().partialsTypeMatMuls = "half"
        with ir.main_graph:
            x_stream = popxl.h2d_stream((b, s, h), dt, "x")
            t_stream = popxl.h2d_stream((b, s, h), popxl.float32, "target")
            x = ops.reshape(ops.host_load(x_stream, "x"), (n_tok, h))
            tgt = ops.reshape(ops.host_load(t_stream, "target"), (n_tok, h))
            facts, fwd = Block().create_graph(x)
            bwd = addons.autodiff(fwd)
            variables = facts.init()
            fwd_info = fwd.bind(variables).call_with_info(x)
            y = fwd_info.outputs[0]
            diff = (ops.cast(y, popxl.float32) if dt != popxl.float32 else y) - tgt
            loss = ops.mean(diff * diff)
            dy = diff * (2.0 * ls / (n_tok * h))
            if dt != popxl.float32:
                dy = ops.cast(dy, dt)
            loss_stream = popxl.d2h_stream(loss.shape, loss.dtype, "loss")
            ops.host_store(loss_stream, loss)
            acts = bwd.grad_graph_info.inputs_dict(fwd_info)
            bwd_info = bwd.call_with_info(dy, args=acts)
            grads = bwd.grad_graph_info.fwd_parent_ins_to_grad_parent_outs(fwd_info, bwd_info)
            for w in variables.tensors:
                ops.scaled_add_(w, grads[w], b=-LR / ls)
        ir.num_host_transfers = 1
        self.ir_build_s = time.perf_counter() - t0
        self.session_start = time.perf_counter()
        self.session = popxl.Session(ir, opts.get("device", "ipu_model"), share_host_weights=True)
        self.session.__enter__()
        self.x_stream, self.t_stream, self.loss_stream = x_stream, t_stream, loss_stream
        self.vars = variables.to_dict()

    @staticmethod
    def version():
        import ipuxl
        from ipuxl._core_loader import blas_backend, core
        blas = blas_backend.split(" (")[0]
        return f"{ipuxl.__version__} ({core.num_threads()} core threads, level {core.isa()}, GEMM {blas})"

    def prepare(self, x, t):
        return {self.x_stream: x, self.t_stream: t}

    def step(self, feeds):
        return float(self.session.run(feeds)[self.loss_stream])

    def weights(self):
        data = self.session.get_tensors_data([self.vars[n] for n in NAMES])
        return {n: np.array(data[self.vars[n]]) for n in NAMES}


PEER_CLASSES = {"ipuxl": IpuxlPeer, "jax": JaxPeer, "torch": TorchPeer}


# --------------------------------------------------------------------------- worker

def _import_check(name):
    try:
        if name == "ipuxl":
            import ipuxl.addons  # noqa: F401
        elif name == "torch":
            import torch  # noqa: F401
        elif name == "jax":
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
            import jax  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure skips the peer
        return f"not available ({type(e).__name__}: {e}); install: {INSTALL[name]}"
    return None


def _run_steps(model, data, n):
    k = len(data)
    t0 = time.perf_counter()
    for i in range(n):
        model.step(data[i % k])
    return time.perf_counter() - t0


def worker(name, conn, opts):
    """Serve the driver's commands for one peer until "exit"."""
    note = _import_check(name)
    cls = PEER_CLASSES[name]
    conn.send({"note": note, "version": None if note else cls.version()})
    if note:
        conn.close()
        return
    models, data = {}, {}
    while True:
        cmd, *a = conn.recv()
        try:
            if cmd == "exit":
                break
            if cmd == "setup":
                (size,) = a
                pool = make_batches(size, opts["pool"], opts["seed"] + 1)
                t0 = time.perf_counter()
                m = cls(make_weights(size, opts["seed"]), size, opts)
                d = [m.prepare(x, t) for x, t in pool]
                m.step(d[0])
                t1 = time.perf_counter()
                models[size], data[size] = m, d
                info = {"first_step_s": t1 - t0}
                if hasattr(m, "session_start"):
                    info["compile_s"] = t1 - m.session_start
                    info["ir_build_s"] = m.ir_build_s
                conn.send(info)
            elif cmd == "run":
                size, n, *warm = a
                from mnist_step import _warm_up  # noqa: PLC0415
                _warm_up(models[size], data[size], warm[0] if warm else 0.0)
                # Process CPU time (all threads) too: on a shared machine it
                # shows the work a peer does, whatever the others' load.
                c0 = time.process_time()
                wall = _run_steps(models[size], data[size], n)
                conn.send((wall, time.process_time() - c0))
            elif cmd == "check":
                size, n = a
                pool = make_batches(size, opts["pool"], opts["seed"] + 1)
                m = cls(make_weights(size, opts["seed"]), size, opts)
                d = [m.prepare(x, t) for x, t in pool]
                losses = [m.step(d[i % len(d)]) for i in range(n)]
                conn.send({"losses": losses, "weights": m.weights()})
            elif cmd == "profile":
                size, n = a
                from mnist_step import _profile  # noqa: PLC0415
                conn.send(_profile(models[size], data[size], n))
            else:
                raise ValueError(f"unknown command {cmd!r}")
        except Exception as e:  # noqa: BLE001 - reported to the driver
            import traceback
            conn.send({"error": f"{name}: {type(e).__name__}: {e}\n{traceback.format_exc()}"})
    conn.close()


# --------------------------------------------------------------------------- driver

def reference(size, n, opts):
    """Losses and weights of n float64 PyTorch steps from the same start."""
    import torch
    m = TorchPeer(make_weights(size, opts["seed"]), size, opts, dtype=torch.float64)
    pool = make_batches(size, opts["pool"], opts["seed"] + 1)
    d = [m.prepare(x, t) for x, t in pool]
    losses = np.array([m.step(d[i % len(d)]) for i in range(n)])
    return losses, {k: v.astype(np.float64) for k, v in m.weights().items()}


def check(peers, size, n, opts):
    ref_losses, ref_w = reference(size, n, opts)
    w0 = make_weights(size, opts["seed"])
    moved = max(float(np.max(np.abs(ref_w[k] - w0[k].astype(np.float64)))) for k in NAMES)
    dtype = size_dtype(size)
    out, ok = {}, True
    for p in peers:
        r = p.call("check", size, n)
        losses = np.array(r["losses"])
        dl = float(np.max(np.abs(losses - ref_losses) / np.abs(ref_losses)))
        got = {k: r["weights"][k].astype(np.float64) for k in NAMES}
        worst = max(NAMES, key=lambda k: float(np.max(np.abs(got[k] - ref_w[k]))))
        dw = float(np.max(np.abs(got[worst] - ref_w[worst])))
        good = bool(np.all(np.isfinite(losses))) and dl <= TOLERANCES[dtype][0] and \
            dw <= TOLERANCES[dtype][1]
        ok &= good
        out[p.name] = {"loss_rel_diff": dl, "weight_abs_diff": dw, "worst_weight": worst,
                       "ok": good}
    return ok, out, ref_losses, moved, dtype


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a smoke test, not a measurement")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers to this JSON file")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="comma-separated subset of " + ",".join(PEERS) + " (ipuxl always runs)")
    ap.add_argument("--sizes", default="small,large",
                    help="small (1x32x128), large (4x64x256), bert (8x128x768, 12 heads), "
                         "bert16 (bert in float16), bert16h (bert16 with half partials)")
    ap.add_argument("--isa", choices=("sse", "avx2", "avx512"),
                    help="force ipuxl's instruction-set level (IPUXL_ISA) in its worker "
                         "process; the peers keep their own best kernels")
    ap.add_argument("--device", default="ipu_model")
    ap.add_argument("--reps", type=int, default=7, help="interleaved timed repetitions")
    ap.add_argument("--steps-small", type=int, default=200, help="steps per block, small size")
    ap.add_argument("--steps-large", type=int, default=30, help="steps per block, large size")
    ap.add_argument("--steps-bert", type=int, default=6, help="steps per block, bert sizes")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps per peer and size")
    ap.add_argument("--check-steps", type=int, default=10, help="steps of the correctness check")
    ap.add_argument("--pool", type=int, default=8, help="distinct batches per size")
    ap.add_argument("--gap", type=float, default=0.3, help="idle seconds before each block")
    ap.add_argument("--warm-ms", type=float, default=100.0,
                    help="untimed steps of a peer right before each timed block "
                         "(bench/mnist_step.py's _warm_up says why)")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads per peer (0: library defaults); sets OMP/OPENBLAS/"
                         "IPUXL_NUM_THREADS, torch threads, XLA single-thread flags for 1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="also profile ipuxl's step")
    ap.add_argument("--profile-steps", type=int, default=200)
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.steps_small, args.steps_large, args.warmup = 2, 5, 2, 1
        args.check_steps, args.pool, args.gap, args.profile_steps = 3, 2, 0.0, 5
        args.steps_bert = 1
        args.warm_ms = 0.0
    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    bad = [p for p in wanted if p not in PEERS]
    if bad:
        ap.error(f"unknown peers {bad}; choose from {PEERS}")
    if "ipuxl" not in wanted:
        wanted.insert(0, "ipuxl")
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    if any(s not in SIZES for s in sizes):
        ap.error(f"sizes must be among {list(SIZES)}")
    if args.isa:
        os.environ["IPUXL_ISA"] = args.isa  # the spawned workers inherit it
    if args.threads > 0:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "IPUXL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
        if args.threads == 1:
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                       " --xla_cpu_multi_thread_eigen=false"
                                       " intra_op_parallelism_threads=1").strip()
    opts = {"seed": args.seed, "pool": args.pool, "device": args.device,
            "threads": args.threads}
    from mnist_step import compile_bytecode, print_profile  # noqa: PLC0415
    compile_bytecode()
    ctx = mp.get_context("spawn")
    peers = [Peer(n, opts, ctx, worker) for n in wanted]
    skipped = {p.name: p.note for p in peers if p.note}
    peers = [p for p in peers if p.note is None]
    names = [p.name for p in peers]
    if "ipuxl" not in names:
        print(f"ipuxl: {skipped['ipuxl']}", file=sys.stderr)
        return 2

    from fma_peak import machine_lines  # noqa: PLC0415
    from ipuxl import _core  # noqa: PLC0415 - after IPUXL_ISA is set
    lines, peaks = machine_lines(_core)
    result = {"cores": os.cpu_count(), "load_before": os.getloadavg(),
              "threads": args.threads or "library defaults",
              "versions": {"python": platform.python_version(),
                           **{p.name: p.version for p in peers}},
              "skipped": skipped, "quick": args.quick,
              "machine": {"lines": lines, "fma_peak_gflops": peaks, "isa": _core.isa()},
              "model": "pre-LN transformer block (LN, MHSA softmax, residual, LN, "
                       "MLP 4x GELU(tanh), residual), MSE loss, SGD lr 0.05, float32 (bert16: "
                       f"float16, loss scale {LOSS_SCALE:g}; bert16h: with half partials)"}
    print(f"Transformer block training step: {result['model']}")
    print(f"cores: {result['cores']}; threads per peer: {result['threads']}; load average "
          "before: " + " ".join(f"{x:.2f}" for x in result["load_before"]))
    for k, v in result["versions"].items():
        print(f"  {k:<6} {v}")
    for k, v in skipped.items():
        print(f"  {k:<6} skipped: {v}")
    for line in lines:
        print(line)
    print(flush=True)

    ok = True
    try:
        result["check"] = {}
        for size in sizes:
            good, chk, ref_losses, moved, dtype = check(peers, size, args.check_steps, opts)
            ok &= good
            result["check"][size] = {"peers": chk, "max_weight_change": moved}
            print(f"check {size_label(size)}: {args.check_steps} steps against float64 PyTorch "
                  f"(loss {ref_losses[0]:.4f} -> {ref_losses[-1]:.4f}; weights moved up to "
                  f"{moved:.2e}; tolerances loss {TOLERANCES[dtype][0]:g} rel, weights "
                  f"{TOLERANCES[dtype][1]:g} abs)")
            for n, c in chk.items():
                print(f"  {n:<6} max loss rel diff {c['loss_rel_diff']:.2e}  max weight abs diff "
                      f"{c['weight_abs_diff']:.2e} ({c['worst_weight']})  "
                      f"{'ok' if c['ok'] else 'DISAGREES'}")
        print(flush=True)

        setup = {}
        for size in sizes:
            for p in peers:
                setup.setdefault(p.name, {})[size] = p.call("setup", size)
                p.call("run", size, args.warmup)
        result["setup"] = setup

        steps = {"small": args.steps_small, "large": args.steps_large,
                 "bert": args.steps_bert, "bert16": args.steps_bert, "bert16h": args.steps_bert}
        times = {s: {n: [] for n in names} for s in sizes}
        cpu = {s: {n: [] for n in names} for s in sizes}
        for r in range(args.reps):
            for size in sizes:
                order = peers[r % len(peers):] + peers[:r % len(peers)]
                for p in order:
                    time.sleep(args.gap)
                    t, c = p.call("run", size, steps[size], args.warm_ms * 1e-3)
                    times[size][p.name].append(t / steps[size])
                    cpu[size][p.name].append(c / steps[size])
        med = {s: {n: statistics.median(ts) for n, ts in per.items()} for s, per in times.items()}

        prof = {}
        if args.profile:
            ip = next(p for p in peers if p.name == "ipuxl")
            for size in sizes:
                n_prof = args.profile_steps if size in ("small", "large") else \
                    max(3, args.profile_steps // 40)
                prof[size] = ip.call("profile", size, n_prof)
    finally:
        for p in peers:
            p.close()
    result["load_after"] = os.getloadavg()

    print(f"timing: {args.reps} interleaved repetitions of {args.steps_small} (small) / "
          f"{args.steps_large} (large) / {args.steps_bert} (bert sizes) steps per peer, "
          f"{args.gap} s idle and "
          f"{args.warm_ms:.0f} ms of untimed steps before each block; medians; "
          "ratio = peer time / ipuxl time (above 1: ipuxl faster), median of the "
          "per-repetition ratios")
    table = {}
    hdr = f"{'peer':<7}" + "".join(f"{size_label(s) + ' steps/s':>30}{'ratio':>7}"
                                   for s in sizes)
    print(hdr)
    for n in names:
        row = {}
        line = f"{n:<7}"
        for s in sizes:
            row[s] = {"steps_per_s": 1.0 / med[s][n],
                      "ratio": paired_ratio(times[s][n], times[s]["ipuxl"]),
                      "ratio_of_medians": med[s][n] / med[s]["ipuxl"],
                      "samples_s": times[s][n]}
            sps = row[s]["steps_per_s"]
            line += f"{sps:>30.{1 if sps >= 10 else 3}f}{row[s]['ratio']:>7.2f}"
        table[n] = row
        print(line)
    peak = peaks[_core.isa()][1]
    for s in sizes:
        gf = step_flops(s) / 1e9
        print(f"  {size_label(s)}: {gf:.{1 if gf >= 1 else 3}f} GFLOP of matmuls a step; GFLOP/s and share of the "
              f"{_core.isa()} all-core FMA peak ({peak:.0f} GFLOP/s): " + "; ".join(
                  f"{n} {gf * table[n][s]['steps_per_s']:.0f} "
                  f"({100 * gf * table[n][s]['steps_per_s'] / peak:.0f}%)" for n in names))
    for s in sizes:
        print(f"  per repetition {size_label(s)} steps/s: " + "; ".join(
            "/".join(f"{1.0 / times[s][n][r]:.{0 if times[s][n][r] < 0.1 else 2}f}"
                     for n in names) for r in range(args.reps))
            + f"  ({'/'.join(names)})")
    for s in sizes:
        print(f"  {size_label(s)} process CPU s/step (all threads, median): " + "; ".join(
            f"{n} {statistics.median(cpu[s][n]):.3f}" for n in names))
        for n in names:
            table[n][s]["cpu_s_per_step"] = statistics.median(cpu[s][n])
    from fma_peak import cpu_peaks  # noqa: PLC0415
    cpk = cpu_peaks(_core)
    if cpk:
        result["machine"]["fma_peak_cpu_gflops"] = cpk
        pc = cpk[_core.isa()]
        for s in sizes:
            gf = step_flops(s) / 1e9
            print(f"  {size_label(s)}: GFLOP per process CPU-second and share of the {_core.isa()} "
                  f"FMA peak per CPU-second ({pc:.0f}; descheduled time not counted): " + "; ".join(
                      f"{n} {gf / table[n][s]['cpu_s_per_step']:.0f} "
                      f"({100 * gf / table[n][s]['cpu_s_per_step'] / pc:.0f}%)" for n in names))
    for s in sizes:
        st = setup["ipuxl"][s]
        print(f"ipuxl {size_label(s)}: IR build {st['ir_build_s']:.3f} s, compile + first step "
              f"{st['compile_s']:.3f} s; jax first step (trace + compile) "
              f"{setup.get('jax', {}).get(s, {}).get('first_step_s', float('nan')):.3f} s")
    print("load average after: " + " ".join(f"{x:.2f}" for x in result["load_after"]))
    result.update({"table": table, "options": vars(args)})
    if prof:
        result["profile"] = {}
        for s, pr in prof.items():
            result["profile"][s] = {k: v for k, v in pr.items() if k != "describe"}
            print_profile(size_label(s), pr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=float)
        print(f"wrote {args.json}")
    print()
    print("all peers agree" if ok else "PEERS DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
