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

Graphs whose float64 values leave a safe range (overflow in float16, a
gradient the float16 estimate cannot represent, values
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

from fuzz_spec import (  # noqa: F401 - MODES and the generator are part of this API
    BINARY, INPLACE_BINARY, INPLACE_UNARY, KINKED, MODES, REDUCE, UNARY, Body, Generator, Reject,
    Spec, draw)

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
        # The gradients must be in range too, in float64 and in the dtype: a
        # gradient the rounding estimate cannot represent (the backward of a
        # float16 log(softmax) whose probability underflowed to 0) is inf or
        # NaN by the order of the operations, not by a right answer.
        if any(g is not None and (not np.all(np.isfinite(g)) or np.abs(g).max() >
                                   (1e3 if spec.dtype == np.float16 else 1e5))
               for g in ref[1]) or all(g is None for g in ref[1]):
            continue
        if any(g is not None and not np.all(np.isfinite(g)) for g in lo[1]):
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
