"""Random-graph fuzzer: random PopXL graphs with gradients, checked against
PyTorch float64.

A graph is drawn from a seed as a small, backend-free *spec* (inputs,
constants and a list of op nodes, some of which hold sub-bodies for
``ops.call`` and ``ops.repeat``). The same spec is then interpreted twice:

* by :class:`IpuxlBackend`, which builds it with ``ipuxl.ops`` inside a
  graph, differentiates it with ``transforms.autodiff`` (the gradient of
  ``sum_k <out_k, seed_k>`` with respect to every input that reaches an
  output), calls the forward and gradient graphs from the main graph, runs
  an epilogue of in-place ops on the forward outputs and an SGD step
  ``x -= LR * grad`` on every input variable (half the graphs also store
  the gradients), and runs it all in one :class:`ipuxl.Session`;
* by :class:`TorchBackend`, in float64 (the oracle) and once more in float32
  with every op's result rounded to the graph's dtype (the rounding
  estimate), differentiated with ``torch.autograd``.

A result matches when ``|got - ref64| <= 8 |ref_lo - ref64| + rtol |ref64| +
atol max|ref64|`` element by element (rtol = atol = 2e-4 for float32 graphs,
2e-2 for float16): the rounding estimate widens the bound exactly where the
computation is ill-conditioned and nowhere else.

Graphs whose float64 values leave a safe range (overflow in float16, values
too close to a kink of relu/abs/max/clip/where, ties of a max reduction) are
redrawn from a derived seed, so every accepted graph has one right answer.

Outputs, stored gradients and updated variables are all compared.

``run_graph(seed, index, mode)`` runs one graph and returns a dict with its
outcome: ``ok``, ``mismatch`` (with the worst output), ``error`` (an
exception raised by ipuxl for a valid graph: a bug too, reported by type)
or ``fusion_mismatch`` (``IPUXL_CHECK_HOST_PASSES`` found that the host passes
changed a result). ``mode``: ``default`` (host passes on), ``off``
(``Session(host_passes="none")``) or ``checked`` (host passes on and
compared with the unfused program on every run, ``IPUXL_CHECK_HOST_PASSES``,
with the fused input-gradient/update kernel forced where eligible).

``repro_source(seed, index, mode)`` is a script that prints the graph (as
comments) and reruns it; ``tools/fuzz_graphs.py --repro SEED:INDEX`` does
the same from the command line.
"""
import functools
import math
import os
import traceback
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

MODES = ("default", "off", "checked")

# ---------------------------------------------------------------- the spec
#
# A value reference is an int: index into the value table of the body being
# built (inputs first, then each node's results in order). Constants are
# nodes ("const", [], {"value": array}).
#
# Node: (op, [refs], attrs). Ops with several results ("call") name their
# count in attrs["n_out"]; all others have one.

UNARY = ("relu", "gelu", "geluerf", "swish", "tanh", "sin", "cos", "negate", "abs", "exp",
         "sqrt_pos", "log_pos", "clip", "cast_round")
INPLACE_UNARY = ("relu_", "gelu_", "swish_", "exp_")
BINARY = ("add", "sub", "mul", "div_pos", "maximum")
INPLACE_BINARY = ("add_", "sub_", "mul_")
REDUCE = ("sum", "mean", "max", "min", "logsumexp", "sumsquare", "l2")
KINKED = ("relu", "relu_", "abs", "clip", "maximum", "max", "sqrt_pos", "log_pos", "div_pos")


class Reject(Exception):
    """The drawn graph is outside the safe range: draw another."""


class Body:
    def __init__(self, n_inputs: int, shapes: List[Tuple[int, ...]]):
        self.n_inputs = n_inputs
        self.shapes: List[Tuple[int, ...]] = list(shapes)
        self.nodes: List[Tuple[str, List[int], Dict[str, Any]]] = []
        self.uses: List[int] = [0] * n_inputs
        self.dead: set = set()  # overwritten in place: never read again
        self.outputs: List[int] = []
        self.producer: List[str] = ["arg"] * n_inputs
        self.nonfloat: set = set()  # index and condition constants

    def add(self, op, args, attrs, out_shapes):
        for a in args:
            self.uses[a] += 1
        self.nodes.append((op, list(args), attrs))
        first = len(self.shapes)
        for s in out_shapes:
            self.shapes.append(tuple(s))
            self.uses.append(0)
            self.producer.append(op)
        return list(range(first, first + len(out_shapes)))

    def live(self):
        return [i for i in range(len(self.shapes)) if i not in self.dead and
                i not in self.nonfloat]


def _broadcast(a, b):
    return tuple(np.broadcast_shapes(tuple(a), tuple(b)))


class Generator:
    """Draws a spec from ``rng``. ``dtype``: the graph's float dtype."""

    def __init__(self, rng: np.random.Generator, dtype):
        self.rng = rng
        self.dtype = np.dtype(dtype)
        self.inputs: List[np.ndarray] = []
        self.inplace_ok = False
        self.replicas = 1

    # -- helpers
    def r(self, n):
        return int(self.rng.integers(n))

    def chance(self, p):
        return self.rng.random() < p

    def shape(self, max_rank=3):
        """Mostly tiny dims; some up to 40 so that vector loops see their
        tails (at most 2048 elements)."""
        rank = self.r(max_rank + 1)
        dims = []
        for _ in range(rank):
            big = self.chance(0.15) and int(np.prod(dims, dtype=np.int64)) <= 64
            dims.append(int(self.rng.integers(5, 41)) if big else int(self.rng.integers(1, 5)))
        return tuple(dims)

    def new_input(self, body: Body, shape, top: Optional[Body]):
        """A fresh float input of the whole graph. Inside a sub-body it is a
        constant of that body instead (sub-bodies get their inputs from the
        caller)."""
        a = (self.rng.standard_normal(shape) * 0.8).astype(self.dtype)
        if body is top:
            self.inputs.append(a)
            idx = len(self.inputs) - 1
            return body.add("input", [], {"index": idx}, [shape])[0]
        return body.add("const", [], {"value": a}, [shape])[0]

    def const(self, body: Body, value: np.ndarray):
        i = body.add("const", [], {"value": value}, [value.shape])[0]
        body.nonfloat.add(i)
        return i

    def pick(self, body: Body, cond=lambda s: True):
        cands = [i for i in body.live() if cond(body.shapes[i])]
        if not cands:
            return None
        # Prefer recent values: deeper graphs.
        w = np.arange(1, len(cands) + 1, dtype=np.float64) ** 1.5
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    def broadcastable_shape(self, s):
        s = list(s)
        if s and self.chance(0.4):
            s = s[self.r(len(s) + 1):]
        s = [1 if (d > 1 and self.chance(0.3)) else d for d in s]
        if self.chance(0.15) and len(s) < 4:
            s = [1] + s
        return tuple(s)

    # -- nodes
    def node(self, body: Body, top: Body, depth: int, allow_inplace=True) -> None:
        kinds = ["unary"] * 6 + ["binary"] * 6 + ["matmul"] * 3 + ["reduce"] * 2 + ["dense"] * 2 + \
            ["reshape", "transpose", "slice", "concat", "gather", "softmax", "where", "view",
             "cumsum", "pow", "squeeze", "split", "subsample", "layer_norm", "scaled_add"]
        if allow_inplace and self.inplace_ok:
            kinds += ["inplace"] * 2
        if depth == 0:
            kinds += ["call", "repeat"]
        if allow_inplace and self.inplace_ok and body is getattr(self, "epi", None):
            # Side effects and in-place writes through control flow, in the
            # main graph (not differentiated): Streaming Memory round trips,
            # a conditional whose branches write their (by-value) input, a
            # call or repeat that writes a by-reference input, and (in
            # replicated graphs) collectives over replicas holding
            # different values.
            kinds += ["remote"] * 4 + ["cond"] * 4 + ["call_ref"] * 5
            if self.replicas > 1:
                kinds += ["collective"] * 8
        kind = kinds[self.r(len(kinds))]
        getattr(self, "n_" + kind)(body, top, depth)

    def n_unary(self, body, top, depth):
        x = self.pick(body)
        op = UNARY[self.r(len(UNARY))]
        attrs = {}
        if op == "clip":
            attrs = {"lo": float(self.rng.uniform(-1.5, -0.2)), "hi": float(self.rng.uniform(0.2, 1.5))}
        body.add(op, [x], attrs, [body.shapes[x]])

    def n_inplace(self, body, top, depth):
        # Only a value computed in this body and read by nothing else yet:
        # after the in-place op the old value is never read again.
        # (Not a view: writing through a view made by reshape_/transpose_/
        # slice_ is a documented ipuxl limitation, NotImplementedError.)
        cands = [i for i in body.live() if body.uses[i] == 0 and
                 body.producer[i] not in ("const", "input", "arg", "reshape_", "transpose_",
                                          "slice_")]
        if not cands:
            return self.n_unary(body, top, depth)
        x = cands[self.r(len(cands))]
        if self.chance(0.5):
            op = INPLACE_UNARY[self.r(len(INPLACE_UNARY))]
            out = body.add(op, [x], {}, [body.shapes[x]])[0]
        else:
            op = INPLACE_BINARY[self.r(len(INPLACE_BINARY))]
            y = self.pick(body, lambda s: _fits_into(s, body.shapes[x]))
            if y is None or y == x:
                s = self.broadcastable_shape(body.shapes[x])
                y = self.new_input(body, s if _fits_into(s, body.shapes[x]) else
                                   body.shapes[x], top)
            out = body.add(op, [x, y], {}, [body.shapes[x]])[0]
        body.dead.add(x)

    def n_binary(self, body, top, depth):
        x = self.pick(body)
        sx = body.shapes[x]
        y = None
        if self.chance(0.6):
            y = self.pick(body, lambda s: _compatible(s, sx))
        if y is None:
            s = self.broadcastable_shape(sx)
            if self.chance(0.5):
                s, sx = sx, s  # the new operand may be the larger one
                s = tuple([int(self.rng.integers(1, 4))] * self.chance(0.3)) + s
            y = self.new_input(body, s, top)
        op = BINARY[self.r(len(BINARY))]
        a, b = (x, y) if self.chance(0.5) else (y, x)
        body.add(op, [a, b], {}, [_broadcast(body.shapes[a], body.shapes[b])])

    def n_matmul(self, body, top, depth):
        x = self.pick(body, lambda s: len(s) >= 1)
        if x is None:
            x = self.new_input(body, (int(self.rng.integers(1, 5)),), top)
        sx = body.shapes[x]
        k = sx[-1]
        n = int(self.rng.integers(1, 5)) if self.chance(0.8) else int(self.rng.integers(5, 33))
        c = self.r(4)
        if c == 0:
            sy = (k,)
        elif c == 1 or len(sx) == 1:
            sy = (k, n) if not (len(sx) == 1 and self.chance(0.3)) else (2, k, n)
        else:
            batch = list(sx[:-2])
            batch = [1 if self.chance(0.3) else d for d in batch]
            if batch and self.chance(0.3):
                batch = batch[1:]
            sy = tuple(batch) + (k, n)
        y = self.pick(body, lambda s: s == sy) if self.chance(0.3) else None
        if y is None:
            y = self.new_input(body, sy, top)
        a, b = x, y
        sa, sb = body.shapes[a], body.shapes[b]
        out = np.matmul(np.zeros(sa, np.float32), np.zeros(sb, np.float32)).shape
        body.add("matmul", [a, b], {}, [out])

    def n_dense(self, body, top, depth):
        """``x @ W + b`` (then often gelu or relu): a layer, with W and b new
        inputs, the pattern the epilogue fusion and the weight-update
        passes look for."""
        x = self.pick(body, lambda s: len(s) == 2)
        if x is None:
            x = self.pick(body, lambda s: len(s) >= 1)
            if x is None:
                return self.n_matmul(body, top, depth)
            s = body.shapes[x]
            rows = int(np.prod(s[:-1], dtype=np.int64))
            x = body.add("reshape", [x], {"shape": [rows, s[-1]]}, [(rows, s[-1])])[0]
        m, k = body.shapes[x]
        n = int(self.rng.integers(1, 9)) if self.chance(0.6) else int(self.rng.integers(9, 40))
        w = self.new_input(body, (k, n), top)
        y = body.add("matmul", [x, w], {}, [(m, n)])[0]
        b = self.new_input(body, (n,) if self.chance(0.7) else (1, n), top)
        y = body.add("add", [y, b] if self.chance(0.8) else [b, y], {}, [(m, n)])[0]
        r = self.r(3)
        if r == 0:
            body.add("gelu", [y], {}, [(m, n)])
        elif r == 1:
            body.add("relu", [y], {}, [(m, n)])

    def n_reduce(self, body, top, depth):
        x = self.pick(body, lambda s: len(s) >= 1)
        if x is None:
            return self.n_unary(body, top, depth)
        s = body.shapes[x]
        op = REDUCE[self.r(len(REDUCE))]
        # max: ties have no unique gradient; they arise only from random
        # normal inputs (never equal) or values the kink check can see.
        axes = sorted({self.r(len(s)) for _ in range(1 + self.r(len(s)))})
        if self.chance(0.2):
            axes = list(range(len(s)))
        if self.chance(0.3):
            axes = [a - len(s) for a in axes]
        keep = bool(self.chance(0.5))
        norm = [a % len(s) for a in axes]
        out = tuple(1 if i in norm else d for i, d in enumerate(s)) if keep else \
            tuple(d for i, d in enumerate(s) if i not in norm)
        body.add(op, [x], {"axis": axes, "keepdims": keep}, [out])

    def n_reshape(self, body, top, depth):
        x = self.pick(body)
        n = int(np.prod(body.shapes[x], dtype=np.int64))
        dims = _factor(self.rng, n, self.r(4))
        if self.chance(0.2) and dims:
            spec = list(dims)
            spec[self.r(len(spec))] = -1
        else:
            spec = list(dims)
        body.add("reshape", [x], {"shape": spec}, [tuple(dims)])

    def n_transpose(self, body, top, depth):
        x = self.pick(body, lambda s: len(s) >= 2)
        if x is None:
            return self.n_reshape(body, top, depth)
        s = body.shapes[x]
        perm = [int(p) for p in self.rng.permutation(len(s))]
        body.add("transpose", [x], {"perm": perm}, [tuple(s[p] for p in perm)])

    def n_slice(self, body, top, depth):
        x = self.pick(body, lambda s: len(s) >= 1 and max(s) >= 2)
        if x is None:
            return self.n_unary(body, top, depth)
        s = body.shapes[x]
        axes = sorted({self.r(len(s)) for _ in range(1 + self.r(2))})
        starts, stops, steps, out = [], [], [], list(s)
        for a in axes:
            d = s[a]
            st = self.r(d)
            sp = int(self.rng.integers(st + 1, d + 1))
            step = 1 if self.chance(0.7) else 2
            if self.chance(0.2):
                st -= d  # negative start, numpy semantics
            starts.append(st)
            stops.append(sp)
            steps.append(step)
            out[a] = len(range(d)[slice(st, sp, step)])
        body.add("slice", [x], {"start": starts, "stop": stops, "step": steps, "axis": axes},
                 [tuple(out)])

    def n_concat(self, body, top, depth):
        x = self.pick(body, lambda s: len(s) >= 1)
        if x is None:
            return self.n_unary(body, top, depth)
        s = body.shapes[x]
        axis = self.r(len(s))
        y = self.pick(body, lambda t: len(t) == len(s) and
                      all(t[i] == s[i] for i in range(len(s)) if i != axis))
        if y is None or self.chance(0.4):
            t = list(s)
            t[axis] = int(self.rng.integers(1, 4))
            y = self.new_input(body, tuple(t), top)
        args = [x, y] if self.chance(0.5) else [y, x]
        out = list(s)
        out[axis] = body.shapes[args[0]][axis] + body.shapes[args[1]][axis]
        body.add("concat", args, {"axis": axis - len(s) if self.chance(0.3) else axis},
                 [tuple(out)])

    def n_gather(self, body, top, depth):
        x = self.pick(body, lambda s: len(s) >= 1)
        if x is None:
            return self.n_unary(body, top, depth)
        s = body.shapes[x]
        axis = self.r(len(s))
        ishape = self.shape(2)
        idx = self.rng.integers(0, s[axis], size=ishape).astype(np.int32)
        i = self.const(body, idx)
        out = s[:axis] + ishape + s[axis + 1:]
        body.add("gather", [x, i], {"axis": axis}, [out])

    def n_softmax(self, body, top, depth):
        x = self.pick(body, lambda s: len(s) >= 1)
        if x is None:
            return self.n_unary(body, top, depth)
        s = body.shapes[x]
        axis = self.r(len(s)) - (len(s) if self.chance(0.3) else 0)
        op = "softmax" if self.chance(0.5) else "log_softmax"
        body.add(op, [x], {"axis": axis}, [s])

    def n_where(self, body, top, depth):
        x = self.pick(body)
        sx = body.shapes[x]
        y = self.pick(body, lambda s: _compatible(s, sx))
        if y is None or self.chance(0.3):
            y = self.new_input(body, self.broadcastable_shape(sx), top)
        cs = self.broadcastable_shape(_broadcast(sx, body.shapes[y]))
        c = self.const(body, self.rng.random(cs) < 0.5)
        out = _broadcast(cs, _broadcast(sx, body.shapes[y]))
        body.add("where", [c, x, y], {}, [out])

    def n_view(self, body, top, depth):
        # Aliasing views (reshape_, transpose_, slice_), read but never
        # written through: the differentiated graph has no modifying ops.
        x = self.pick(body)
        s = body.shapes[x]
        k = self.r(3)
        if k == 0 or not s:
            n = int(np.prod(s, dtype=np.int64))
            dims = _factor(self.rng, n, self.r(4))
            body.add("reshape_", [x], {"shape": dims}, [tuple(dims)])
        elif k == 1:
            perm = [int(p) for p in self.rng.permutation(len(s))]
            body.add("transpose_", [x], {"perm": perm}, [tuple(s[p] for p in perm)])
        else:
            a = self.r(len(s))
            st = self.r(s[a])
            sp = int(self.rng.integers(st + 1, s[a] + 1))
            out = list(s)
            out[a] = sp - st
            body.add("slice_", [x], {"start": [st], "stop": [sp], "step": [1], "axis": [a]},
                     [tuple(out)])

    def n_cumsum(self, body, top, depth):
        x = self.pick(body, lambda s: len(s) >= 1)
        if x is None:
            return self.n_unary(body, top, depth)
        s = body.shapes[x]
        body.add("cumsum", [x], {"dim": self.r(len(s)) - (len(s) if self.chance(0.3) else 0)},
                 [s])

    def n_pow(self, body, top, depth):
        x = self.pick(body)
        body.add("pow", [x], {"e": float(2 + self.r(2))}, [body.shapes[x]])

    def n_squeeze(self, body, top, depth):
        x = self.pick(body, lambda s: 1 in s)
        if x is None:
            return self.n_reshape(body, top, depth)
        s = body.shapes[x]
        ones = [i for i, d in enumerate(s) if d == 1]
        axes = None if self.chance(0.4) else sorted(set(ones[:1 + self.r(len(ones))]))
        out = tuple(d for i, d in enumerate(s) if not (d == 1 and (axes is None or i in axes)))
        body.add("squeeze", [x], {"axes": axes}, [out])

    def n_split(self, body, top, depth):
        x = self.pick(body, lambda s: len(s) >= 1 and max(s) >= 2)
        if x is None:
            return self.n_unary(body, top, depth)
        s = body.shapes[x]
        a = int(self.rng.choice([i for i, d in enumerate(s) if d >= 2]))
        d = s[a]
        divs = [k for k in range(2, d + 1) if d % k == 0]
        if self.chance(0.5):
            splits = int(self.rng.choice(divs))
            lens = [d // splits] * splits
        else:
            cut = sorted(set(int(c) for c in self.rng.integers(1, d, size=1 + self.r(2))))
            lens = [b - a_ for a_, b in zip([0] + cut, cut + [d])]
            splits = lens
        outs = [tuple(n if i == a else e for i, e in enumerate(s)) for n in lens]
        body.add("split", [x], {"splits": splits, "axis": a, "n_out": len(outs)}, outs)

    def n_subsample(self, body, top, depth):
        x = self.pick(body, lambda s: len(s) >= 1)
        if x is None:
            return self.n_unary(body, top, depth)
        s = body.shapes[x]
        strides = [1 + self.r(3) for _ in range(1 + self.r(len(s)))]
        out = tuple(-(-d // (strides[i] if i < len(strides) else 1)) for i, d in enumerate(s))
        body.add("subsample", [x], {"strides": strides}, [out])

    def n_layer_norm(self, body, top, depth):
        x = self.pick(body, lambda s: len(s) >= 2 and int(np.prod(s[1:])) >= 2)
        if x is None:
            return self.n_unary(body, top, depth)
        s = body.shapes[x]
        w = self.new_input(body, (s[1],), top)
        b = self.new_input(body, (s[1],), top)
        body.add("layer_norm", [x, w, b], {}, [s])

    def n_scaled_add(self, body, top, depth):
        x = self.pick(body)
        y = self.pick(body, lambda s: s == body.shapes[x])
        if y is None or self.chance(0.3):
            y = self.new_input(body, body.shapes[x], top)
        # The scales as the graph's dtype holds them: a float16 graph scales
        # by float16 constants (as Poplar does), and a + b may cancel.
        a, b = (float(self.dtype.type(self.rng.uniform(-2, 2))) for _ in range(2))
        body.add("scaled_add", [x, y], {"a": a, "b": b}, [body.shapes[x]])

    # -- epilogue-only nodes (see node())
    def n_remote(self, body, top, depth):
        x = self.pick(body)
        entries = 1 + self.r(3)
        e = self.r(entries)
        others = [k for k in range(entries) if k != e]
        body.add("remote", [x], {"entries": entries, "entry": e,
                                 "other": others[self.r(len(others))] if others and
                                 self.chance(0.7) else None,
                                 "dynamic": bool(self.chance(0.5)),
                                 "inplace": bool(self.chance(0.5))}, [body.shapes[x]])

    def n_cond(self, body, top, depth):
        x = self.pick(body)
        steps = [self._inplace_steps(1 + self.r(2)) for _ in range(2)]
        # The condition: from the data (the sign of x's sum) or a constant.
        pred = ("data", "true", "false")[self.r(3)]
        s = body.shapes[x]
        body.add("cond", [x], {"then": steps[0], "else": steps[1], "pred": pred, "n_out": 2},
                 [s, s])

    def _inplace_steps(self, n, nested=True):
        """In-place updates by scalar constants (exact in float16): what a
        branch, call or repeat body does to its input."""
        steps = []
        for _ in range(n):
            if nested and self.chance(0.25):
                steps.append(("call_ref", self._inplace_steps(1 + self.r(2), nested=False)))
            else:
                op = ("add_", "sub_", "mul_")[self.r(3)]
                c = (0.5, 0.75, 1.25, -0.5, 1.5)[self.r(5)] if op == "mul_" else \
                    (0.25, -0.5, 1.0, 0.125)[self.r(4)]
                steps.append((op, c))
        return steps

    def n_call_ref(self, body, top, depth):
        # Writes reach the caller through a by-reference input: only a value
        # computed here and read by nothing yet (as n_inplace).
        cands = [i for i in body.live() if body.uses[i] == 0 and
                 body.producer[i] not in ("const", "input", "arg", "reshape_", "transpose_",
                                          "slice_")]
        if cands:
            x = cands[self.r(len(cands))]
        else:  # a fresh value to write
            y = self.pick(body)
            x = body.add("negate", [y], {}, [body.shapes[y]])[0]
        count = 1 if self.chance(0.5) else 1 + self.r(3)
        body.add("call_ref", [x], {"steps": self._inplace_steps(1 + self.r(3)),
                                   "count": count, "repeat": count > 1 or self.chance(0.3)},
                 [body.shapes[x]])
        body.dead.add(x)

    def n_collective(self, body, top, depth):
        x = self.pick(body)
        s = body.shapes[x]
        kind = ("all_reduce", "all_reduce", "all_gather", "rs_ag")[self.r(4)]
        if kind == "all_gather" and not s:
            kind = "all_reduce"
        op = ("add", "mean", "max", "min")[self.r(4)] if kind == "all_reduce" else "add"
        # Each replica scales x by its own factor (a replica-grouped
        # variable), so the replicas reduce different values.
        scales = [float(v) for v in self.rng.choice([0.5, 1.0, -1.0, 2.0, 0.25],
                                                    size=self.replicas)]
        n = int(np.prod(s, dtype=np.int64))
        R = self.replicas
        out = {"all_reduce": s, "all_gather": (R * s[0],) + tuple(s[1:]) if s else s,
               "rs_ag": (-(-n // R) * R,)}[kind]
        body.add("collective", [x], {"kind": kind, "op": op, "scales": scales}, [out])

    def n_call(self, body, top, depth):
        args = [self.pick(body)]
        if self.chance(0.5):
            a2 = self.pick(body)
            if a2 not in args:
                args.append(a2)
        sub = Body(len(args), [body.shapes[a] for a in args])
        for _ in range(1 + self.r(4)):
            self.node(sub, top, depth + 1)
        outs = _terminals(sub)[-2:]
        if not outs:
            sub.add("tanh", [0], {}, [sub.shapes[0]])
            outs = [len(sub.shapes) - 1]
        sub.outputs = outs
        body.add("call", args, {"body": sub, "n_out": len(outs)}, [sub.shapes[o] for o in outs])

    def n_repeat(self, body, top, depth):
        c = self.pick(body, lambda s: int(np.prod(s, dtype=np.int64)) <= 64)
        if c is None:
            return self.n_unary(body, top, depth)
        sc = body.shapes[c]
        args = [c]
        w = self.pick(body, lambda s: _fits_into(s, sc))
        if w is not None and w != c and self.chance(0.7):
            args.append(w)
        sub = Body(len(args), [body.shapes[a] for a in args])
        cur = 0
        for _ in range(1 + self.r(3)):
            k = self.r(3)
            if k == 0 or len(args) == 1:
                op = ("tanh", "sin", "swish", "gelu", "negate", "relu")[self.r(6)]
                cur = sub.add(op, [cur], {}, [sc])[0]
            else:
                op = ("add", "mul", "sub")[self.r(3)]
                ab = [cur, 1] if self.chance(0.5) else [1, cur]
                cur = sub.add(op, ab, {}, [sc])[0]
            if k == 2:
                cur = sub.add("tanh", [cur], {}, [sc])[0]
        sub.outputs = [cur]
        count = 1 + self.r(4)
        body.add("repeat", args, {"body": sub, "count": count, "n_out": 1}, [sc])


def _compatible(a, b):
    try:
        np.broadcast_shapes(tuple(a), tuple(b))
        return True
    except ValueError:
        return False


def _fits_into(s, target):
    """``s`` broadcasts to exactly ``target``."""
    return _compatible(s, target) and _broadcast(s, target) == tuple(target)


def _factor(rng, n, rank):
    if rank == 0:
        return [] if n == 1 else [n]
    dims = [1] * rank
    m = n
    for p in (2, 3, 5, 7, 11, 13):
        while m % p == 0:
            m //= p
            dims[int(rng.integers(rank))] *= p
    dims[int(rng.integers(rank))] *= m
    return dims


def _terminals(body: Body):
    # Outputs: values read by nothing, computed by a node (not raw inputs or
    # constants), and not overwritten in place.
    made = set()
    idx = body.n_inputs
    for op, args, attrs in body.nodes:
        n = attrs.get("n_out", 1)
        if op not in ("const", "input"):
            made.update(range(idx, idx + n))
        idx += n
    return [i for i in made if body.uses[i] == 0 and i not in body.dead]


class Spec:
    def __init__(self, dtype, inputs, body):
        self.dtype = np.dtype(dtype)
        self.inputs = inputs
        self.body = body
        self.replicas = 1

    def n_ops(self):
        def count(b):
            n = 0
            for op, _, attrs in b.nodes:
                if op not in ("const", "input"):
                    n += 1
                if "body" in attrs:
                    n += count(attrs["body"])
            return n
        return count(self.body)


def draw(seed: int, index: int, attempt: int = 0) -> Spec:
    rng = np.random.default_rng([seed, index, attempt])
    dtype = np.float16 if rng.random() < 0.2 else np.float32
    g = Generator(rng, dtype)
    top = Body(0, [])
    g.top = top
    for _ in range(1 + g.r(3)):
        g.new_input(top, g.shape(), top)
    n_nodes = 2 + g.r(9 if dtype == np.float32 else 5)
    for _ in range(n_nodes):
        # Autodiff refuses graphs with modifying ops (as PopXL does): the
        # differentiated graph is out of place, in-place ops go to the
        # epilogue.
        g.node(top, top, 0, allow_inplace=False)
    outs = _terminals(top)
    if not outs:
        top.add("tanh", [0], {}, [top.shapes[0]])
        outs = [len(top.shapes) - 1]
    top.outputs = sorted(outs)[-4:]
    spec = Spec(dtype, g.inputs, top)
    # The epilogue: in the main graph, on the forward outputs, not
    # differentiated; in-place ops on values it computes.
    epi = Body(len(top.outputs), [top.shapes[o] for o in top.outputs])
    g.inplace_ok = True
    g.epi = epi
    # Some graphs run on 2 replicas (every output checked on each): their
    # epilogue may hold collectives.
    g.replicas = spec.replicas = 2 if g.chance(0.2) else 1
    if g.replicas > 1:
        g.n_collective(epi, top, 1)
    if g.chance(0.6):
        for _ in range(1 + g.r(4)):
            g.node(epi, top, 1, allow_inplace=True)
            if g.chance(0.6):
                g.n_inplace(epi, top, 1)
    epi.outputs = sorted(_terminals(epi))[-4:]
    spec.epilogue = epi
    # Half the graphs store the gradients; the others only apply them (an
    # SGD step), so that a gradient read by nothing but its update can be
    # folded into it (fold_updates, fuse_input_grad_updates).
    spec.store_grads = bool(g.chance(0.5))
    return spec


# ---------------------------------------------------------------- backends

_ROUND = {}


def _round_both_ways(v, dtype):
    """``v`` rounded to ``dtype`` (kept in v's dtype), and its gradient too:
    the rounding estimate of a float16 graph stores every forward and every
    backward value in float16, as the graph does."""
    import torch

    fn = _ROUND.get(dtype)
    if fn is None:
        class Round(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.to(dtype).to(x.dtype)

            @staticmethod
            def backward(ctx, g):
                return g.to(dtype).to(g.dtype)

        fn = _ROUND[dtype] = Round.apply
    return fn(v)


class TorchBackend:
    """Interprets a spec with torch. ``dtype``: torch.float64 for the oracle;
    for the rounding estimate torch.float32 with every result rounded to
    ``round_to``. Checks the float64 values for kinks, ties and range."""

    def __init__(self, compute, round_to=None, check=False, limit=1e3):
        import torch
        self.t = torch
        self.compute = compute
        self.round_to = round_to
        self.check = check
        self.limit = limit
        self.margin = 1e-3
        self.lo = compute != torch.float64
        # The largest magnitude of any forward value and of any gradient
        # flowing into a value (recorded when ``check``): results that are
        # exactly zero are compared with a floor of rounding noise of these.
        self.fwd_mag = 0.0
        self.bwd_mag = 0.0

    def _note_bwd(self, g):
        if g is not None and g.numel():
            self.bwd_mag = max(self.bwd_mag, float(g.detach().abs().max()))

    def rnd(self, v):
        if self.round_to is not None and v.dtype != self.round_to:
            return _round_both_ways(v, self.round_to)
        return v

    def kink(self, v, at=0.0):
        if self.check and v.numel() and bool((v.detach() - at).abs().min() < self.margin):
            raise Reject("value near a kink")

    def run_body(self, body: Body, args: List):
        t = self.t
        vals = list(args)
        for op, refs, attrs in body.nodes:
            a = [vals[r] for r in refs]
            res = self.op(op, a, attrs)
            res = res if isinstance(res, list) else [res]
            for v in res:
                if self.check and v.is_floating_point() and v.numel():
                    m = float(v.detach().abs().max())
                    if not math.isfinite(m) or m > self.limit:
                        raise Reject("out of range")
                    self.fwd_mag = max(self.fwd_mag, m)
                    if v.requires_grad:
                        v.register_hook(self._note_bwd)
            vals.extend(res)
        return [vals[o] for o in body.outputs]

    def op(self, op, a, attrs):
        t = self.t
        F = t.nn.functional
        if op == "input":
            return self.inputs[attrs["index"]]
        if op == "const":
            v = t.from_numpy(np.array(attrs["value"], copy=True))  # keeps 0-d shapes
            return v.to(self.compute) if v.is_floating_point() else v
        if op in ("relu", "relu_"):
            self.kink(a[0])
            return self.rnd(F.relu(a[0]))
        if op in ("gelu", "gelu_"):
            return self.rnd(F.gelu(a[0], approximate="tanh"))
        if op == "geluerf":
            return self.rnd(F.gelu(a[0]))
        if op in ("swish", "swish_"):
            return self.rnd(F.silu(a[0]))
        if op in ("exp", "exp_"):
            return self.rnd(t.exp(a[0]))
        simple = {"tanh": t.tanh, "sin": t.sin, "cos": t.cos, "negate": t.neg}
        if op in simple:
            return self.rnd(simple[op](a[0]))
        if op == "abs":
            self.kink(a[0])
            return self.rnd(t.abs(a[0]))
        if op == "sqrt_pos":
            self.kink(a[0])
            return self.rnd(t.sqrt(self.rnd(t.abs(a[0]) + 0.5)))
        if op == "log_pos":
            self.kink(a[0])
            return self.rnd(t.log(self.rnd(t.abs(a[0]) + 0.5)))
        if op == "clip":
            self.kink(a[0], attrs["lo"])
            self.kink(a[0], attrs["hi"])
            return self.rnd(t.clamp(a[0], attrs["lo"], attrs["hi"]))
        if op == "cast_round":
            return a[0].to(t.float16).to(self.compute) if self.lo else a[0]
        if op in ("add", "add_"):
            return self.rnd(a[0] + a[1])
        if op in ("sub", "sub_"):
            return self.rnd(a[0] - a[1])
        if op in ("mul", "mul_"):
            return self.rnd(a[0] * a[1])
        if op == "div_pos":
            self.kink(a[1])
            return self.rnd(a[0] / self.rnd(t.abs(a[1]) + 1.0))
        if op == "maximum":
            self.kink(a[0] - a[1])
            return self.rnd(t.maximum(a[0], a[1]))
        if op == "matmul":
            return self.rnd(t.matmul(a[0], a[1]))
        if op in REDUCE:
            ax, keep = attrs["axis"], attrs["keepdims"]
            x = a[0]
            if op == "sum":
                return self.rnd(x.sum(dim=ax, keepdim=keep))
            if op == "mean":
                return self.rnd(x.mean(dim=ax, keepdim=keep))
            if op == "sumsquare":
                return self.rnd((x * x).sum(dim=ax, keepdim=keep))
            if op == "logsumexp":
                return self.rnd(t.logsumexp(x, dim=ax, keepdim=keep))
            if op == "l2":
                # The norm has a kink at 0 (over one element it is |x|), and
                # its gradient x/|x| is ill-conditioned near it.
                norm = t.sqrt((x * x).sum(dim=ax, keepdim=keep))
                self.kink(norm)
                return self.rnd(norm)
            if op in ("max", "min"):
                if self.check:
                    nd = x.dim()
                    axn = [q % nd for q in ax]
                    rest = [q for q in range(nd) if q not in axn]
                    y = (x if op == "max" else -x).detach().permute(rest + axn).reshape(
                        [x.shape[q] for q in rest] + [-1])
                    if y.shape[-1] > 1:
                        top2 = y.topk(2, dim=-1).values
                        if bool((top2[..., 0] - top2[..., 1]).min() < self.margin):
                            raise Reject("tie in a max reduction")
                f = t.amax if op == "max" else t.amin
                return self.rnd(f(x, dim=ax, keepdim=keep))
        if op in ("reshape", "reshape_"):
            return a[0].reshape(attrs["shape"])
        if op in ("transpose", "transpose_"):
            return a[0].permute(attrs["perm"])
        if op == "cumsum":
            return self.rnd(t.cumsum(a[0], dim=attrs["dim"]))
        if op == "pow":
            return self.rnd(a[0] ** attrs["e"])
        if op == "squeeze":
            s = tuple(a[0].shape)
            ax = attrs["axes"]
            return a[0].reshape(tuple(d for i, d in enumerate(s)
                                      if not (d == 1 and (ax is None or i in ax))))
        if op == "split":
            sp = attrs["splits"]
            n = a[0].shape[attrs["axis"]]
            lens = [n // sp] * sp if isinstance(sp, int) else sp
            return list(t.split(a[0], lens, dim=attrs["axis"]))
        if op == "subsample":
            idx = tuple(slice(None, None, st) for st in attrs["strides"])
            return a[0][idx]
        if op == "layer_norm":
            x = a[0]
            if self.check:
                v = x.detach().reshape(x.shape[0], -1).var(dim=1, unbiased=False)
                if bool(v.min() < 1e-2):
                    raise Reject("layer_norm of a nearly constant row")
            return self.rnd(F.group_norm(x, 1, a[1], a[2], eps=1e-5))
        if op == "scaled_add":
            return self.rnd(attrs["a"] * a[0] + attrs["b"] * a[1])
        if op in ("slice", "slice_"):
            idx = [slice(None)] * a[0].dim()
            for st, sp, sd, ax in zip(attrs["start"], attrs["stop"], attrs["step"], attrs["axis"]):
                idx[ax] = slice(st, sp, sd)
            return a[0][tuple(idx)]
        if op == "concat":
            return t.cat(a, dim=attrs["axis"])
        if op == "gather":
            x, i = a
            ax = attrs["axis"]
            out = x.index_select(ax, i.reshape(-1).long())
            return out.reshape(tuple(x.shape[:ax]) + tuple(i.shape) + tuple(x.shape[ax + 1:]))
        if op == "softmax":
            return self.rnd(t.softmax(a[0], dim=attrs["axis"]))
        if op == "log_softmax":
            s = self.rnd(t.softmax(a[0], dim=attrs["axis"]))
            return self.rnd(t.log(s))
        if op == "where":
            return t.where(a[0], a[1], a[2])
        if op == "remote":
            return a[0]  # stored, other entries written, loaded back
        if op == "cond":
            x = a[0]
            if attrs["pred"] == "data":
                total = x.sum()
                self.kink(total)
                taken = bool(total > 0)
            else:
                taken = attrs["pred"] == "true"
            return [self._steps(x, attrs["then" if taken else "else"]), -x]
        if op == "call_ref":
            v = a[0]
            for _ in range(attrs["count"]):
                v = self._steps(v, attrs["steps"])
            return v
        if op == "collective":
            ys = [self.rnd(a[0] * s) for s in attrs["scales"]]
            kind, red = attrs["kind"], attrs["op"]
            if kind == "all_gather":
                return t.cat(ys, dim=0)
            if kind == "rs_ag":
                R = len(ys)
                flat = [y.reshape(-1) for y in ys]
                n = flat[0].numel()
                pad = -(-n // R) * R - n
                return self.rnd(sum(F.pad(f, (0, pad)) for f in flat))
            if red in ("max", "min"):
                f = t.maximum if red == "max" else t.minimum
                out = ys[0]
                for y in ys[1:]:
                    out = f(out, y)
                return out
            total = sum(ys)
            return self.rnd(total / len(ys) if red == "mean" else total)
        if op == "call":
            return self.run_body(attrs["body"], a)
        if op == "repeat":
            sub = attrs["body"]
            state = list(a)
            for _ in range(attrs["count"]):
                out = self.run_body(sub, state)
                state = out + state[len(out):]
            return state[:len(sub.outputs)]
        raise AssertionError(f"torch backend: unknown op {op}")


def _torch_steps(self, v, steps):
    for op, c in steps:
        if op == "call_ref":
            v = self._steps(v, c)
        else:
            v = self.rnd({"add_": v + c, "sub_": v - c, "mul_": v * c}[op])
    return v


TorchBackend._steps = _torch_steps


def torch_reference(spec: Spec, compute, round_to, check, seeds):
    """Forward outputs and gradients (of ``sum <out, seed>``) w.r.t. inputs."""
    import torch
    be = TorchBackend(compute, round_to, check, limit=(1e2 if spec.dtype == np.float16 else 1e3))
    be.inputs = [torch.tensor(x.astype(np.float64), dtype=compute, requires_grad=True)
                 for x in spec.inputs]
    if check:
        be.fwd_mag = max([0.0] + [float(np.abs(x).max()) for x in spec.inputs if x.size])
    outs = be.run_body(spec.body, [])
    if seeds is None:
        return outs + be.run_body(spec.epilogue, outs), None, be.inputs
    loss = sum((o * torch.tensor(s.astype(np.float64), dtype=compute)).sum()
               for o, s in zip(outs, seeds))
    if not loss.requires_grad:
        raise Reject("no output depends on an input")
    grads = torch.autograd.grad(loss, be.inputs, allow_unused=True)
    with torch.no_grad():
        epi = be.run_body(spec.epilogue, [o.detach() for o in outs])
    return ([o.detach().numpy() for o in outs + epi],
            [None if g is None else g.numpy() for g in grads], be.inputs,
            (be.fwd_mag, be.bwd_mag))


class IpuxlBackend:
    def __init__(self, popxl, ops, dtype):
        self.popxl = popxl
        self.ops = ops
        self.dtype = dtype

    def run_body(self, body: Body, args: List):
        vals = list(args)
        for op, refs, attrs in body.nodes:
            res = self.op(op, [vals[r] for r in refs], attrs)
            vals.extend(res if isinstance(res, (list, tuple)) else [res])
        return [vals[o] for o in body.outputs]

    def scalar(self, v):
        return self.popxl.constant(np.array(v, dtype=self.dtype.as_numpy()))

    def op(self, op, a, attrs):
        ops, px = self.ops, self.popxl
        if op == "input":
            return self.inputs[attrs["index"]]
        if op == "const":
            return px.constant(attrs["value"])
        direct = {"relu": ops.relu, "gelu": ops.gelu, "geluerf": ops.geluerf,
                  "swish": ops.swish, "tanh": ops.tanh, "sin": ops.sin, "cos": ops.cos,
                  "negate": ops.negate, "abs": ops.abs, "exp": ops.exp, "relu_": ops.relu_,
                  "gelu_": ops.gelu_, "swish_": ops.swish_, "exp_": ops.exp_}
        if op in direct:
            return direct[op](a[0])
        if op == "sqrt_pos":
            return ops.sqrt(ops.abs(a[0]) + self.scalar(0.5))
        if op == "log_pos":
            return ops.log(ops.abs(a[0]) + 0.5)
        if op == "clip":
            return ops.clip(a[0], attrs["lo"], attrs["hi"])
        if op == "cast_round":
            return ops.cast(ops.cast(a[0], px.float16), a[0].dtype)
        binary = {"add": ops.add, "sub": ops.sub, "mul": ops.mul, "maximum": ops.maximum,
                  "add_": ops.add_, "sub_": ops.sub_, "mul_": ops.mul_, "matmul": ops.matmul}
        if op in binary:
            return binary[op](a[0], a[1])
        if op == "div_pos":
            return ops.div(a[0], ops.abs(a[1]) + 1.0)
        if op in REDUCE:
            f = {"sum": ops.sum, "mean": ops.mean, "max": ops.max, "min": ops.min,
                 "logsumexp": ops.logsumexp, "sumsquare": ops.sumsquare, "l2": ops.l2}[op]
            return f(a[0], attrs["axis"], attrs["keepdims"])
        if op == "reshape":
            return ops.reshape(a[0], tuple(attrs["shape"]))
        if op == "reshape_":
            return ops.reshape_(a[0], tuple(attrs["shape"]))
        if op == "transpose_":
            return ops.transpose_(a[0], attrs["perm"])
        if op == "slice_":
            return ops.slice_(a[0], attrs["start"], attrs["stop"], attrs["step"], attrs["axis"])
        if op == "cumsum":
            return ops.cumsum(a[0], attrs["dim"])
        if op == "pow":
            return ops.pow(a[0], attrs["e"])
        if op == "squeeze":
            return ops.squeeze(a[0], attrs["axes"])
        if op == "split":
            return list(ops.split(a[0], attrs["splits"], attrs["axis"]))
        if op == "subsample":
            return ops.subsample(a[0], attrs["strides"])
        if op == "layer_norm":
            return ops.layer_norm(a[0], a[1], a[2], 1e-5)
        if op == "scaled_add":
            return ops.scaled_add(a[0], a[1], attrs["a"], attrs["b"])
        if op == "transpose":
            return ops.transpose(a[0], attrs["perm"])
        if op == "slice":
            return ops.slice(a[0], attrs["start"], attrs["stop"], attrs["step"], attrs["axis"])
        if op == "concat":
            return ops.concat(a, attrs["axis"])
        if op == "gather":
            return ops.gather(a[0], a[1], attrs["axis"])
        if op == "softmax":
            return ops.softmax(a[0], attrs["axis"])
        if op == "log_softmax":
            return ops.log(ops.softmax(a[0], attrs["axis"]))
        if op == "where":
            return ops.where(a[0], a[1], a[2])
        if op == "remote":
            x = a[0]
            rb = px.remote_buffer(tuple(x.shape), x.dtype, attrs["entries"])
            off = px.constant(np.int32(attrs["entry"])) if attrs["dynamic"] else attrs["entry"]
            ops.remote_store(rb, off, x)
            if attrs["other"] is not None:  # another entry of the same buffer
                ops.remote_store(rb, attrs["other"], ops.mul(x, 2.0))
            if attrs["inplace"]:
                return ops.remote_load_(rb, off, ops.init(tuple(x.shape), x.dtype))
            return ops.remote_load(rb, off)
        if op == "cond":
            x = a[0]
            ir = px.gcg().ir
            branches = [self._steps_graph(ir, x, attrs[b], by_ref=False) for b in ("then", "else")]
            if attrs["pred"] == "data":
                pred = ops.greater(ops.sum(x), self.scalar(0.0))
            else:
                pred = px.constant(attrs["pred"] == "true")
            y, = ops.conditional(pred, branches[0], branches[1], [x], [x])
            # x itself is unchanged (a by-value input): read it again.
            return [y, ops.negate(x)]
        if op == "call_ref":
            x = a[0]
            g = self._steps_graph(px.gcg().ir, x, attrs["steps"], by_ref=True)
            if attrs["repeat"]:
                ops.repeat(g, attrs["count"], inputs_dict={g.inputs[0]: x})
            else:
                ops.call(g, x)
            return x  # written in place through the reference
        if op == "collective":
            x = a[0]
            ir = px.gcg().ir
            R = len(attrs["scales"])
            per = np.stack([np.full(tuple(x.shape), s, x.dtype.as_numpy())
                            for s in attrs["scales"]])
            with ir.main_graph:
                scale = px.variable(per, x.dtype, replica_grouping=ir.replica_grouping(
                    group_size=1))
            y = ops.mul(x, scale)
            if attrs["kind"] == "all_reduce":
                return ops.collectives.replicated_all_reduce(y, attrs["op"])
            if attrs["kind"] == "all_gather":
                return ops.collectives.replicated_all_gather(y, axis=0)
            shard = ops.collectives.replicated_reduce_scatter(y, "add")
            return ops.reshape(ops.collectives.replicated_all_gather(shard), (-1,))
        if op in ("call", "repeat"):
            sub = attrs["body"]
            ir = px.gcg().ir
            g = ir.create_graph(lambda *xs: self.run_body(sub, list(xs)), *[x.spec for x in a])
            if op == "call":
                return list(ops.call(g, *a))
            n = len(sub.outputs)
            return list(ops.repeat(g, attrs["count"], *a[:n], inputs_dict=dict(
                zip(g.inputs[n:], a[n:]))))
        raise AssertionError(f"ipuxl backend: unknown op {op}")


def _steps_graph(self, ir, x, steps, by_ref: bool):
    """A graph that applies ``steps`` in place to its one input (by
    reference or by value) and, by value, returns it."""
    px, ops = self.popxl, self.ops
    g = ir.create_empty_graph("steps")
    with g:
        a = px.graph_input(tuple(x.shape), x.dtype, "a", by_ref=by_ref)
        for op, c in steps:
            if op == "call_ref":
                ops.call(self._steps_graph(ir, a, c, by_ref=True), a)
            else:
                {"add_": ops.add_, "sub_": ops.sub_, "mul_": ops.mul_}[op](a, self.scalar(c))
        if not by_ref:
            px.graph_output(a)
    return g


IpuxlBackend._steps_graph = _steps_graph

LR = 0.125  # a power of two: the step adds no rounding of its own


def run_ipuxl(spec: Spec, seeds, mode: str, required=None):
    import ipuxl as popxl
    import ipuxl.ops as ops
    from ipuxl import transforms

    dt = popxl.float16 if spec.dtype == np.float16 else popxl.float32
    ir = popxl.Ir()
    ir.replication_factor = getattr(spec, "replicas", 1)
    be = IpuxlBackend(popxl, ops, dt)
    with ir.main_graph:
        xs = [popxl.variable(a, dt, name=f"x{i}") for i, a in enumerate(spec.inputs)]

        def fwd(*ins):
            be.inputs = list(ins)
            outs = be.run_body(spec.body, [])
            return outs[0] if len(outs) == 1 else tuple(outs)

        g = ir.create_graph(fwd, *[x.spec for x in xs])
        info = ops.call_with_info(g, *xs)
        n_out = len(spec.body.outputs)
        fwd_outs = list(info.outputs[:n_out])
        if required is None:
            required = range(len(xs))
        req = [g.inputs[i] for i in required]
        gi = transforms.autodiff(g, grads_provided=list(g.outputs[:n_out]), grads_required=req)
        # Bind the seeds by the forward output each gradient input is for.
        pos = {t: k for k, t in enumerate(g.outputs)}
        bind = gi.inputs_dict(info)
        for ec, t in zip(gi.expected_inputs, gi.graph.inputs):
            if ec.connection_type == transforms.ExpectedConnectionType.FwdGrad:
                k = pos[ec.fwd_tensor]
                bind[t] = popxl.constant(seeds[k], dt, name=f"seed{k}")
        grads = ops.call(gi.graph, inputs_dict=bind)
        epi = be.run_body(spec.epilogue, fwd_outs)
        n_out += len(epi)
        # An SGD step on every input that has a gradient: W = W - lr * dW
        # (the pattern of the update-folding passes); the new values are
        # read back after the run.
        for k, gr in zip(required, grads):
            ops.scaled_add_(xs[k], gr, 1.0, -LR)
        streams = []
        for t in fwd_outs + epi + (list(grads) if spec.store_grads else []):
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    host_passes = "none" if mode == "off" else None
    # checked: every run also runs the unfused program and compares; the
    # fused input-gradient/update kernel is used at every eligible shape,
    # not only where it was measured faster.
    checked = {"IPUXL_CHECK_HOST_PASSES": "1", "IPUXL_FUSED_UPDATE": "always"}
    old = {k: os.environ.get(k) for k in checked}
    for k, v in checked.items():
        if mode == "checked":
            os.environ[k] = v
        else:
            os.environ.pop(k, None)
    try:
        with popxl.Session(ir, "ipu_model", host_passes=host_passes) as sess:
            r = sess.run()
            updated = [np.array(sess.get_tensor_data(xs[k])) for k in required]
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    # One value per replica (every replica must give the reference's).
    R = ir.replication_factor
    vals = [[np.asarray(r[s])] if R == 1 else list(np.asarray(r[s])) for s in streams]
    return vals[:n_out], vals[n_out:], updated


# ---------------------------------------------------------------- one graph

TOL = {np.dtype(np.float32): 2e-4, np.dtype(np.float16): 2e-2}


# The floor of the bound is NOISE_ULPS ulps of the dtype times the largest
# magnitude of any forward value in the graph (for outputs) or of any
# gradient flowing into a value (for gradients): a result that is
# exactly zero in float64 (a gradient through a shift-invariant softmax, a
# layer_norm over two elements) comes out of any rounded computation as
# noise of that size, which the rounding estimate, itself rounded
# differently, need not reproduce.
# float16 keeps to 2 ulps (0.2% of the largest value), so that a 5% error
# in a small gradient of a graph with larger ones is still caught.
NOISE_ULPS = {np.dtype(np.float32): 8, np.dtype(np.float16): 2}


def _compare(got, ref, lo, tol, floor=0.0):
    got = np.asarray(got, np.float64)
    if got.shape != ref.shape:
        return math.inf, f"shape {got.shape} != {ref.shape}"
    finite = np.isfinite(got)
    if not finite.all():
        # A non-finite value matches only where the rounding estimate, which
        # rounds every value to the graph's dtype, gives the same one: the
        # dtype cannot represent the answer (the log of a float16 softmax
        # probability that underflows to 0 is -inf on an IPU too).
        same = (got == lo) | (np.isnan(got) & np.isnan(lo))
        if not np.all(finite | same):
            return math.inf, "non-finite result"
    # Where the estimate is not finite the dtype's own computation left its
    # range, so a finite result there has no bound; the rest are compared
    # (a NaN bound must not make the whole comparison vacuous).
    keep = finite & np.isfinite(lo)
    if not keep.all():
        got, ref, lo = got[keep], ref[keep], lo[keep]
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    bound = (8 * np.abs(lo - ref) + tol * np.abs(ref) + tol * max(scale, 1e-3)
             + floor)
    excess = np.abs(got - ref) / bound
    worst = float(excess.max()) if excess.size else 0.0
    return worst, ""


def _farther(a, b, ref):
    """Elementwise, whichever of the estimates ``a``, ``b`` is farther from
    ``ref`` (outputs and gradients)."""
    def pick(x, y, r):
        if r is None:
            return None
        x, y, r = (np.asarray(q, np.float64) for q in (x, y, r))
        y = np.where(np.isfinite(y), y, r)
        # A non-finite x (the float32 run with every value rounded to the
        # dtype overflowed or underflowed) is the farthest of all.
        return np.where(~np.isfinite(x) | (np.abs(x - r) >= np.abs(y - r)), x, y)
    return ([pick(x, y, r) for x, y, r in zip(a[0], b[0], ref[0])],
            [pick(x, y, r) for x, y, r in zip(a[1], b[1], ref[1])], None)


@functools.lru_cache(maxsize=2)
def prepare(seed: int, index: int):
    """The accepted spec for (seed, index), its seeds and references."""
    import torch
    for attempt in range(50):
        spec = draw(seed, index, attempt)
        rng = np.random.default_rng([seed, index, attempt, 7])
        seeds = [rng.standard_normal(spec.body.shapes[o]).astype(spec.dtype)
                 for o in spec.body.outputs]
        try:
            ref = torch_reference(spec, torch.float64, None, True, seeds)
        except Reject:
            continue
        lo_dt = torch.float16 if spec.dtype == np.float16 else None
        try:
            lo = torch_reference(spec, torch.float32, lo_dt, False, seeds)
            if spec.dtype == np.float16:
                # Also the whole computation (forward, backward and the
                # sums of gradient partials) in float16: the estimate is
                # the larger of the two differences from float64.
                try:
                    lo16 = torch_reference(spec, torch.float16, None, False, seeds)
                except RuntimeError:  # an op PyTorch has no float16 CPU kernel for
                    lo16 = None
                if lo16 is not None:
                    lo = _farther(lo, lo16, ref)
        except Reject:
            continue
        # The gradients must be in range too.
        if any(g is not None and (not np.all(np.isfinite(g)) or np.abs(g).max() >
                                   (1e3 if spec.dtype == np.float16 else 1e5))
               for g in ref[1]) or all(g is None for g in ref[1]):
            continue
        return spec, seeds, ref, lo, attempt
    raise RuntimeError(f"fuzz: no acceptable graph for seed {seed} index {index}")


def run_graph(seed: int, index: int, mode: str = "default") -> Dict[str, Any]:
    spec, seeds, ref, lo, attempt = prepare(seed, index)
    res = {"seed": seed, "index": index, "mode": mode, "attempt": attempt,
           "dtype": spec.dtype.name, "ops": spec.n_ops()}
    required = [k for k, gr in enumerate(ref[1]) if gr is not None]
    try:
        outs, grads, updated = run_ipuxl(spec, seeds, mode, required)
    except AssertionError as e:
        if "host passes changed a result" in str(e):
            res.update(outcome="fusion_mismatch", error=str(e)[:500])
            return res
        raise
    except Exception as e:  # noqa: BLE001 - every exception is reported
        res.update(outcome="error", error_type=type(e).__name__,
                   error=f"{type(e).__name__}: {e}"[:800],
                   trace=traceback.format_exc()[-2000:])
        return res
    tol = TOL[spec.dtype]
    eps = float(np.finfo(spec.dtype).eps)
    fwd_mag, bwd_mag = ref[3]
    worst, where = 0.0, ""
    def rep(vals, r):
        return f" (replica {r})" if len(vals) > 1 else ""

    items = [(f"output {k}{rep(outs[k], r)}", v, ref[0][k], lo[0][k], fwd_mag)
             for k in range(len(outs)) for r, v in enumerate(outs[k])]
    if spec.store_grads:
        items += [(f"grad of x{k}{rep(got, r)}", v, ref[1][k], lo[1][k], bwd_mag)
                  for k, got in zip(required, grads) for r, v in enumerate(got)]
    # The updated inputs: x - LR * grad (the estimate of the error is the
    # gradient's, scaled, plus the rounding of x itself).
    for k, got in zip(required, updated):
        x = spec.inputs[k].astype(np.float64)
        r = x - LR * np.asarray(ref[1][k], np.float64)
        l = x - LR * np.asarray(lo[1][k], np.float64)
        l = l + np.where(l >= r, 1, -1) * np.abs(r) * np.finfo(spec.dtype).eps
        items.append((f"updated x{k}", got, r, l, max(fwd_mag, LR * bwd_mag)))
    for name, got, r, l, mag in items:
        w, why = _compare(got, np.asarray(r, np.float64), np.asarray(l, np.float64), tol,
                          NOISE_ULPS[spec.dtype] * eps * mag)
        if w > worst:
            worst, where = w, f"{name} {why}".strip()
    res["worst"] = worst
    if worst > 1.0:
        res.update(outcome="mismatch", where=where)
    else:
        res["outcome"] = "ok"
    return res


# ---------------------------------------------------------------- repro

def describe(spec: Spec) -> str:
    lines = [f"dtype {spec.dtype.name}; inputs " +
             ", ".join(f"x{i}{tuple(a.shape)}" for i, a in enumerate(spec.inputs))]

    def walk(b: Body, ind):
        i = b.n_inputs
        for op, refs, attrs in b.nodes:
            n = attrs.get("n_out", 1)
            outs = ", ".join(f"v{j}{b.shapes[j]}" for j in range(i, i + n))
            at = {k: (v if not isinstance(v, np.ndarray) else f"array{v.shape}")
                  for k, v in attrs.items() if k not in ("body", "n_out")}
            lines.append(f"{ind}{outs} = {op}({', '.join(f'v{r}' for r in refs)}) {at or ''}")
            if "body" in attrs:
                walk(attrs["body"], ind + "    ")
                lines.append(f"{ind}    -> outputs {attrs['body'].outputs}")
            i += n
    walk(spec.body, "  ")
    lines.append(f"  outputs {spec.body.outputs}")
    lines.append("epilogue (main graph, on the outputs, not differentiated):")
    walk(spec.epilogue, "  ")
    lines.append(f"  outputs {spec.epilogue.outputs}")
    lines.append(f"gradients {'stored and ' if spec.store_grads else ''}applied: x -= {LR} * grad")
    return "\n".join(lines)


def repro_source(seed: int, index: int, mode: str) -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    spec = prepare(seed, index)[0]
    return (f"# Standalone repro of fuzz graph seed={seed} index={index} mode={mode}\n"
            f"# Graph:\n" + "\n".join("#" + l for l in describe(spec).splitlines()) + "\n"
            f"import sys; sys.path.insert(0, {here!r})\n"
            "import graph_fuzz\n"
            f"print(graph_fuzz.run_graph({seed}, {index}, {mode!r}))\n")
