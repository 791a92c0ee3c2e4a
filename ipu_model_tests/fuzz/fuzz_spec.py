"""The fuzzer's graphs as backend-free specs: inputs, constants and op
nodes (some holding sub-bodies for ``ops.call`` and ``ops.repeat``), drawn
from a seed by :func:`draw`. :mod:`graph_fuzz` interprets a spec with ipuxl
and with PyTorch and compares them."""
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
