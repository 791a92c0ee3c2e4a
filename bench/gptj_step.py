"""GPT-J block training step: ipuxl versus JAX jit, PyTorch eager and torch.compile.

Two GPT-J layers as HuggingFace transformers' ``GPTJBlock`` computes them
(no dropout, no cache), the same in every peer, float32. Each layer:

    h  = LayerNorm(x)                              (over the hidden axis, with bias)
    q, k, v = h Wq, h Wk, h Wv                     no biases; split into heads
    q, k = rope(q), rope(k)                        the first rotary_dim features of each head
    a  = softmax(causal(q k^T) / sqrt(d_head)) v   per batch and head
    x' = x + a Wo + (GELU_tanh(h W_in + b_in) W_out + b_out)

attention and MLP in parallel from the same ``h``, one residual sum
(``W_in``: 4 x hidden). ``rope`` is GPT-J's interleaved rotary embedding:
the feature pair (2i, 2i+1) at position m turns by the angle
m * 10000^(-2i / rotary_dim),

    (u, w) -> (u cos - w sin, w cos + u sin);

``causal`` leaves the scores of later positions out of the softmax. Then
loss = mean((y - target)^2) over the second layer's output and one plain
SGD step (lr ``LR``) on all 20 parameters, in place. Sizes (batch x seq x
hidden, heads, rotary_dim): 16 x 8 x 64 with 4 heads, rotary_dim 16
(``tiny``: the whole head rotates) and 4 x 128 x 512 with 8 heads,
rotary_dim 32 (``mid``: half of each head rotates, about 20 GFLOP a step).
The weights (seeded NumPy), the batches (a seeded pool of ``--pool`` per
size, cycled in the same order) and the rotary and mask tables are the
same for every peer; every step includes feeding the batch and reading
the loss back as a Python float.

The peers:

* ``ipuxl``: the model as a popxl_addons ``Module`` with one submodule a
  layer (PopXL API: ``ops.layer_norm`` on the (tokens, hidden) view,
  ``addons.ops.rotary_pos_embed`` on (batch, seq, heads, d_head), batched
  ``@``, the causal mask an additive constant, ``ops.softmax``,
  ``ops.gelu``), ``addons.autodiff``, the loss and its gradient in the main
  graph, ``ops.scaled_add_`` on every variable; one ``Session.run`` per
  step, ``share_host_weights=True``.
* ``jax``: one ``jax.jit`` step (``value_and_grad`` + SGD, parameters
  donated), CPU backend.
* ``torch``: PyTorch eager, autograd, ``torch.optim.SGD``.
* ``torch.compile``: the same with the loss (forward pass, hence its
  backward) under ``torch.compile`` (Inductor, static shapes). It compiles
  during the check (tens of seconds a size); the timed model reuses those
  kernels. Where it cannot compile (no C++ compiler, an Inductor failure)
  it is reported skipped with the reason.

The driver is ``bench/_step_bench.py``'s, as ``transformer_step.py``'s:
each peer in its own spawned worker process, alternating timed blocks over
``--reps`` repetitions, the paired ratios peer time / ipuxl time (above 1:
ipuxl faster), the CPU model, its SIMD flags, the ISA level and every
level's FMA peak; a fresh model of every peer runs ``--check-steps`` steps
against a float64 PyTorch run from the same start, and the script exits
with 1 if a peer is outside float32 tolerance.

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/gptj_step.py
    ... bench/gptj_step.py --isa avx2        # ipuxl's workers at IPUXL_ISA=avx2
    ... bench/gptj_step.py --quick           # a smoke test, not a measurement
    ... bench/gptj_step.py --json out.json
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _step_bench as sb  # noqa: E402 - the driver and peer bases, beside this file

LR = 0.05
EPS = 1e-5
LAYERS = 2
SIZES = {"tiny": (16, 8, 64, 4, 16),  # batch, seq, hidden, heads, rotary_dim
         "mid": (4, 128, 512, 8, 32)}
#: Added to the scores of later positions: exp of it underflows to exactly 0
#: in float32 and float64, as with HuggingFace's fill with the dtype's minimum.
MASK = -1e9
# Parameter names and order of one layer, "l<i>." + each for layer i.
LAYER_NAMES = ("ln_w", "ln_b", "wq", "wk", "wv", "wo", "w_in", "b_in", "w_out", "b_out")
NAMES = tuple(f"l{i}.{n}" for i in range(LAYERS) for n in LAYER_NAMES)
# Tolerances against the float64 reference after --check-steps steps.
LOSS_RTOL = 1e-4
W_ATOL = 2e-5


def size_label(size):
    b, s, h, nh, r = SIZES[size]
    return f"{b}x{s}x{h} ({nh} heads, rotary {r})"


def step_flops(size) -> float:
    """Multiply-add FLOPs (2 per MAC) of one training step's matmuls: per
    layer the forward's four projections, the MLP and the two attention
    products, and twice as many in the backward pass; the elementwise ops
    (rotary, softmax, GELU, LayerNorm) are left out."""
    b, s, h, _, _ = SIZES[size]
    t = b * s
    fwd = 4 * 2 * t * h * h + 2 * 2 * t * h * 4 * h + 2 * 2 * b * s * s * h
    return 3.0 * LAYERS * fwd


def rope_tables(size):
    """(sin, cos) of position * inv_freq, each (seq, rotary_dim / 2),
    float64; inv_freq_i = 1 / 10000^(2i / rotary_dim)."""
    _, s, _, _, r = SIZES[size]
    inv_freq = 1.0 / 10000.0 ** (np.arange(0, r, 2, dtype=np.float64) / r)
    angle = np.outer(np.arange(s, dtype=np.float64), inv_freq)
    return np.sin(angle), np.cos(angle)


def causal_mask(size):
    """(seq, seq): 0 where the key position is at or before the query's,
    ``MASK`` after it."""
    s = SIZES[size][1]
    return np.triu(np.full((s, s), MASK), k=1)


# --------------------------------------------------------------------------- data

def make_weights(size: str, seed: int):
    """{name: float32 array} of both layers (``_step_bench.draw_weight``)."""
    _, _, h, _, _ = SIZES[size]
    rng = np.random.default_rng([seed, h, LAYERS])
    f = 4 * h
    shapes = {"ln_w": (h,), "ln_b": (h,), "wq": (h, h), "wk": (h, h), "wv": (h, h),
              "wo": (h, h), "w_in": (h, f), "b_in": (f,), "w_out": (f, h), "b_out": (h,)}
    out = {}
    for name in NAMES:
        kind = name.split(".")[1]
        out[name] = sb.draw_weight(rng, shapes[kind], kind == "ln_w").astype(np.float32)
    return out


def make_batches(size: str, count: int, seed: int):
    """``count`` pairs (x, target), each (batch, seq, hidden) float32."""
    b, s, h, _, _ = SIZES[size]
    rng = np.random.default_rng([seed, b, s, h])
    x = rng.standard_normal((count, b, s, h)).astype(np.float32)
    t = rng.standard_normal((count, b, s, h)).astype(np.float32)
    return [(x[i], t[i]) for i in range(count)]


# --------------------------------------------------------------------------- peers

class TorchPeer(sb.TorchStep):
    """The layers in PyTorch eager, as HuggingFace's GPTJBlock computes them;
    float64 (``dtype``) for the reference."""

    def __init__(self, weights, size, opts, dtype=None):
        import torch
        super().__init__(weights, opts, dtype or torch.float32, LR)
        self.dims = SIZES[size]
        sin, cos = rope_tables(size)
        self.sin, self.cos, self.mask = (torch.tensor(a, dtype=self.dtype)
                                         for a in (sin, cos, causal_mask(size)))

    def rope(self, t):
        """GPT-J's rotary embedding of t (batch, seq, heads, d_head)."""
        r = self.dims[4]
        u, w = t[..., :r:2], t[..., 1:r:2]
        c, s = self.cos[None, :, None, :], self.sin[None, :, None, :]
        turned = self.torch.stack((u * c - w * s, w * c + u * s), dim=-1).flatten(-2)
        return self.torch.cat((turned, t[..., r:]), dim=-1)

    def layer(self, x, i):
        """Layer ``i`` (HuggingFace's GPTJBlock) of x (batch, seq, hidden)."""
        F = self.F
        p = {n: self.p[f"l{i}.{n}"] for n in LAYER_NAMES}
        b, s, h, nh, _ = self.dims
        dh = h // nh
        hn = F.layer_norm(x, (h,), p["ln_w"], p["ln_b"], EPS)
        q = self.rope((hn @ p["wq"]).reshape(b, s, nh, dh)).transpose(1, 2)
        k = self.rope((hn @ p["wk"]).reshape(b, s, nh, dh)).transpose(1, 2)
        v = (hn @ p["wv"]).reshape(b, s, nh, dh).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / np.sqrt(dh)) + self.mask
        a = (self.torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, h)
        m = F.gelu(hn @ p["w_in"] + p["b_in"], approximate="tanh")
        return x + a @ p["wo"] + (m @ p["w_out"] + p["b_out"])

    def forward(self, x):
        for i in range(LAYERS):
            x = self.layer(x, i)
        return x


class TorchCompilePeer(TorchPeer):
    """:class:`TorchPeer` with its loss (forward pass and, through
    AOTAutograd, backward) under torch.compile; the SGD update eager."""

    name = "torch.compile"
    optional = True  # dropped with the reason where Inductor fails

    def __init__(self, weights, size, opts, dtype=None):
        super().__init__(weights, size, opts, dtype)
        # dynamic=False: each size gets its own static-shape kernels.
        self.loss = self.torch.compile(self.loss, dynamic=False)

    @staticmethod
    def version():
        return sb.TorchStep.version() + ", Inductor"

    @staticmethod
    def probe():
        """None where torch.compile builds and runs a small step here, else why not."""
        try:
            import torch
            w = torch.ones(4, 4, requires_grad=True)
            f = torch.compile(lambda x: torch.tanh(x @ w).sum(), dynamic=False)
            f(torch.ones(2, 4)).backward()
        except Exception as e:  # noqa: BLE001 - any failure skips the peer
            first = str(e).strip().split("\n")[0]
            return f"torch.compile fails on this machine ({type(e).__name__}: {first})"
        return None


class JaxPeer(sb.JaxStep):
    """The layers in JAX, the step under one jax.jit (``JaxStep``)."""

    def __init__(self, weights, size, opts):
        import jax
        import jax.numpy as jnp
        b, s, h, nh, r = SIZES[size]
        dh = h // nh
        sin, cos = (jnp.asarray(a[None, :, None, :], jnp.float32) for a in rope_tables(size))
        mask = jnp.asarray(causal_mask(size), jnp.float32)

        def rope(t):
            u, w = t[..., :r:2], t[..., 1:r:2]
            turned = jnp.stack((u * cos - w * sin, w * cos + u * sin), axis=-1)
            return jnp.concatenate((turned.reshape(b, s, nh, r), t[..., r:]), axis=-1)

        def layer(p, x):
            hn = sb.jax_layer_norm(x, p["ln_w"], p["ln_b"], EPS)
            q = rope((hn @ p["wq"]).reshape(b, s, nh, dh)).transpose(0, 2, 1, 3)
            k = rope((hn @ p["wk"]).reshape(b, s, nh, dh)).transpose(0, 2, 1, 3)
            v = (hn @ p["wv"]).reshape(b, s, nh, dh).transpose(0, 2, 1, 3)
            att = jax.nn.softmax((q @ k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(dh)) + mask,
                                 axis=-1)
            a = (att @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
            m = jax.nn.gelu(hn @ p["w_in"] + p["b_in"], approximate=True)
            return x + a @ p["wo"] + (m @ p["w_out"] + p["b_out"])

        def loss_fn(p, x, t):
            for i in range(LAYERS):
                x = layer({n: p[f"l{i}.{n}"] for n in LAYER_NAMES}, x)
            return jnp.mean(jnp.square(x - t))

        self._jit(loss_fn, weights, LR)


class IpuxlPeer(sb.IpuxlStep):
    """The model in ipuxl's PopXL API (popxl_addons Module, a submodule per
    layer, + autodiff), one Session.run per step."""

    def __init__(self, weights, size, opts):
        import ipuxl as popxl
        import ipuxl.addons as addons
        import ipuxl.ops as ops
        from ipuxl.addons.ops.rotary_pos_embed import rotary_pos_embed

        b, s, h, nh, r = SIZES[size]
        dh = h // nh
        n_tok = b * s
        scale = float(1.0 / np.sqrt(dh))
        sin, cos = (a.astype(np.float32) for a in rope_tables(size))
        mask = causal_mask(size).astype(np.float32)

        class Layer(addons.Module):
            def __init__(self, i):
                super().__init__()
                self.i = i

            def build(self, x):
                def var(name):
                    data = weights[f"l{self.i}.{name}"]
                    return self.add_variable_input(name, lambda: data.copy(), x.dtype)

                def heads(t):  # (tokens, h) -> (b, s, nh, dh)
                    return ops.reshape(t, (b, s, nh, dh))

                def turned(t):
                    return rotary_pos_embed(t, popxl.constant(sin), popxl.constant(cos), r)

                hn = ops.layer_norm(x, var("ln_w"), var("ln_b"), EPS)
                q = ops.transpose(turned(heads(hn @ var("wq"))), (0, 2, 1, 3))  # (b, nh, s, dh)
                k = ops.transpose(turned(heads(hn @ var("wk"))), (0, 2, 3, 1))  # (b, nh, dh, s)
                v = ops.transpose(heads(hn @ var("wv")), (0, 2, 1, 3))          # (b, nh, s, dh)
                att = ops.softmax((q @ k) * scale + popxl.constant(mask), axis=3)
                a = ops.reshape(ops.transpose(att @ v, (0, 2, 1, 3)), (n_tok, h))
                m = ops.gelu(hn @ var("w_in") + var("b_in"))
                return x + a @ var("wo") + (m @ var("w_out") + var("b_out"))

        class Model(addons.Module):
            def __init__(self):
                super().__init__()
                for i in range(LAYERS):
                    setattr(self, f"l{i}", Layer(i))

            def build(self, x):
                for i in range(LAYERS):
                    x = getattr(self, f"l{i}")(x)
                return x

        self._build(Model(), (b, s, h), popxl.float32, LR, 1.0, opts, NAMES)


PEER_CLASSES = {"ipuxl": IpuxlPeer, "jax": JaxPeer, "torch": TorchPeer,
                "torch.compile": TorchCompilePeer}
BENCH = sb.StepBench(
    doc=__doc__, title="GPT-J block training step",
    model=f"{LAYERS} GPT-J layers (LN; rotary MHSA, causal softmax, and MLP 4x GELU(tanh) "
          "in parallel; one residual sum), MSE loss, SGD lr 0.05, float32",
    sizes=tuple(SIZES), default_sizes="tiny,mid",
    sizes_help="tiny (16x8x64, 4 heads, rotary_dim 16), mid (4x128x512, 8 heads, "
               "rotary_dim 32)",
    names=NAMES, peer_classes=PEER_CLASSES, reference_peer=TorchPeer,
    make_weights=make_weights, make_batches=make_batches, size_label=size_label,
    size_dtype=lambda size: "float32", step_flops=step_flops,
    tolerances={"float32": (LOSS_RTOL, W_ATOL)},
    groups=(sb.StepGroup("tiny", ("tiny",), 200, 5, "tiny size", "tiny"),
            sb.StepGroup("mid", ("mid",), 10, 1, "mid size", "mid", 20)),
    first_step=(("jax", "trace + compile"),), column=40)


def worker(name, conn, opts):
    """A peer's worker process (spawned by the driver: a module-level function)."""
    sb.serve(BENCH, name, conn, opts)


if __name__ == "__main__":
    sys.exit(sb.main(BENCH, sys.argv[1:], worker))
