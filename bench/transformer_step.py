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

The driver (bench/_step_bench.py, shared with gptj_step.py) runs each peer
in its own spawned worker process and alternates them block by block (the
starting peer rotating, ``--gap`` idle seconds and ``--warm-ms`` of the
peer's untimed steps before each block) over
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
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _step_bench  # noqa: E402 - after the path insert
from _step_bench import (IpuxlStep, JaxStep, StepBench, StepGroup, TorchStep,  # noqa: E402
                         draw_weight, jax_layer_norm, serve)

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
    """{name: array} (float32; bert16: float16), each drawn by
    ``_step_bench.draw_weight``."""
    _, _, h, _ = SIZES[size]
    rng = np.random.default_rng([seed, h])
    f = 4 * h
    shapes = {"ln1_w": (h,), "ln1_b": (h,), "wq": (h, h), "bq": (h,), "wk": (h, h), "bk": (h,),
              "wv": (h, h), "bv": (h,), "wo": (h, h), "bo": (h,), "ln2_w": (h,), "ln2_b": (h,),
              "w1": (h, f), "b1": (f,), "w2": (f, h), "b2": (h,)}
    out = {}
    for n in NAMES:
        v = draw_weight(rng, shapes[n], n.startswith("ln") and n.endswith("_w"))
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

class TorchPeer(TorchStep):
    """PyTorch eager (autograd, torch.optim.SGD); with dtype float64 it is the
    reference."""

    def __init__(self, weights, size, opts, dtype=None):
        import torch
        dtype = dtype or (torch.float16 if size in FLOAT16_SIZES else torch.float32)
        super().__init__(weights, opts, dtype, LR,
                         loss_scale(size) if dtype == torch.float16 else 1.0)
        self.b, self.s, self.h, self.nh = SIZES[size]

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


class JaxPeer(JaxStep):
    """JAX: the whole step (value_and_grad + SGD) under one jax.jit, the
    parameters donated."""

    def __init__(self, weights, size, opts):
        import jax
        import jax.numpy as jnp
        b, s, h, nh = SIZES[size]
        dh = h // nh

        def ln(x, w, bb):
            return jax_layer_norm(x, w, bb, EPS)

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

        self._jit(loss_fn, {n: weights[n] for n in NAMES}, LR, loss_scale(size))


class IpuxlPeer(IpuxlStep):
    """The block in ipuxl's PopXL API (popxl_addons Module + autodiff), one
    Session.run per step."""

    def __init__(self, weights, size, opts):
        import ipuxl as popxl
        import ipuxl.addons as addons
        import ipuxl.ops as ops

        b, s, h, nh = SIZES[size]
        dh = h // nh
        n_tok = b * s
        scale = float(1.0 / np.sqrt(dh))
        dt = popxl.float16 if size in FLOAT16_SIZES else popxl.float32

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

        self._build(Block(), (b, s, h), dt, LR, loss_scale(size), opts, NAMES,
                    half_partials=size in HALF_PARTIALS_SIZES)


PEER_CLASSES = {"ipuxl": IpuxlPeer, "jax": JaxPeer, "torch": TorchPeer}
BENCH = StepBench(
    doc=__doc__, title="Transformer block training step",
    model="pre-LN transformer block (LN, MHSA softmax, residual, LN, "
          "MLP 4x GELU(tanh), residual), MSE loss, SGD lr 0.05, float32 (bert16: "
          f"float16, loss scale {LOSS_SCALE:g}; bert16h: with half partials)",
    sizes=tuple(SIZES), default_sizes="small,large",
    sizes_help="small (1x32x128), large (4x64x256), bert (8x128x768, 12 heads), "
               "bert16 (bert in float16), bert16h (bert16 with half partials)",
    names=NAMES, peer_classes=PEER_CLASSES, reference_peer=TorchPeer,
    make_weights=make_weights, make_batches=make_batches, size_label=size_label,
    size_dtype=size_dtype, step_flops=step_flops, tolerances=TOLERANCES,
    groups=(StepGroup("small", ("small",), 200, 5, "small size", "small"),
            StepGroup("large", ("large",), 30, 2, "large size", "large"),
            StepGroup("bert", ("bert", "bert16", "bert16h"), 6, 1, "bert sizes", "bert sizes", 40)),
    first_step=(("jax", "trace + compile"),))


def worker(name, conn, opts):
    """Serve the driver's commands for one peer until "exit" (bench/_step_bench.py)."""
    serve(BENCH, name, conn, opts)


def reference(size, n, opts):
    """Losses and weights of n float64 PyTorch steps from the same start."""
    return _step_bench.reference(BENCH, size, n, opts)


def main(argv=None) -> int:
    return _step_bench.main(BENCH, argv, worker)


if __name__ == "__main__":
    sys.exit(main())
