"""Test harness for gradients: run ipuxl's autodiff on a function of tensors
and return the gradients (first or second order) as numpy arrays, for
comparison with PyTorch autograd or finite differences.

``grads_of(fn, *arrays)``: forward outputs and d(sum_k <out_k, seed_k>)/d(input)
for every float input, seeds drawn from a fixed RNG (or given).

``second_order_of(fn, *arrays, v=...)``: d/dx of sum_i <dL/dx_i, v_i> where
L = sum_k <out_k, seed_k>: a Hessian-vector product, computed by
differentiating a graph that calls the forward graph and its gradient graph.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import transforms

_FLOAT = (np.float16, np.float32, np.float64)


def _is_float(a):
    return np.asarray(a).dtype.type in _FLOAT


def default_seeds(shapes_dtypes, seed=1234):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(d) for s, d in shapes_dtypes]


def _store(t):
    s = popxl.d2h_stream(t.shape, t.dtype)
    ops.host_store(s, t)
    return s


def _vars(arrays):
    out = []
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        out.append(popxl.variable(a, popxl.dtypes.dtype.as_dtype(a.dtype), name=f"in{i}",
                                  downcast=False))
    return out


def _as_list(r):
    return [r] if isinstance(r, popxl.Tensor) else list(r)


def grads_of(fn, *arrays, seeds=None, device="ipu_model"):
    """Returns ``(outputs, grads)``; grads[i] is None for non-float inputs."""
    ir = popxl.Ir()
    with ir.main_graph:
        xs = _vars(arrays)
        g = ir.create_graph(lambda *a: fn(*a), *[x.spec for x in xs])
        info = ops.call_with_info(g, *xs)
        n_out = len(info.outputs)
        fwd_outs = list(info.outputs[:n_out])
        if seeds is None:
            seeds = default_seeds([(t.shape, t.dtype.as_numpy()) for t in fwd_outs])
        float_idx = [i for i, a in enumerate(arrays) if _is_float(a)]
        gi = transforms.autodiff(g, grads_provided=list(g.outputs[:n_out]),
                                 grads_required=[g.inputs[i] for i in float_idx])
        seed_ts = [popxl.constant(s, name=f"seed{k}") for k, s in enumerate(seeds)]
        grads = ops.call(gi.graph, *seed_ts, inputs_dict=gi.inputs_dict(info))
        out_s = [_store(t) for t in fwd_outs]
        grad_s = [_store(t) for t in grads]
    with popxl.Session(ir, device) as sess:
        r = sess.run()
    outs = [r[s] for s in out_s]
    gr = [None] * len(arrays)
    for i, s in zip(float_idx, grad_s):
        gr[i] = r[s]
    return outs, gr


def second_order_of(fn, *arrays, seeds=None, v=None, device="ipu_model"):
    """Returns the gradient of ``sum_i <dL/dx_i, v_i>`` with respect to every
    float input (None for the others)."""
    float_idx = [i for i, a in enumerate(arrays) if _is_float(a)]
    ir = popxl.Ir()
    with ir.main_graph:
        xs = _vars(arrays)
        specs = [x.spec for x in xs]
        g = ir.create_graph(lambda *a: fn(*a), *specs)
        n_out = len(g.outputs)
        if seeds is None:
            seeds = default_seeds([(t.shape, t.dtype.as_numpy()) for t in g.outputs])
        if v is None:
            v = default_seeds([(arrays[i].shape, np.asarray(arrays[i]).dtype) for i in float_idx],
                              seed=99)
        gi = transforms.autodiff(g, grads_provided=list(g.outputs),
                                 grads_required=[g.inputs[i] for i in float_idx])

        def joint(*a):
            info = ops.call_with_info(g, *a)
            seed_ts = [popxl.constant(s, name=f"seed{k}") for k, s in enumerate(seeds)]
            grads = ops.call(gi.graph, *seed_ts, inputs_dict=gi.inputs_dict(info))
            total = None
            for k, gr in enumerate(grads):
                term = ops.sum(gr * popxl.constant(v[k], name=f"v{k}"))
                total = term if total is None else total + term
            return total

        jg = ir.create_graph(joint, *specs)
        jinfo_call = ops.call_with_info(jg, *xs)
        ji = transforms.autodiff(jg, grads_provided=[jg.outputs[0]],
                                 grads_required=[jg.inputs[i] for i in float_idx])
        one = popxl.constant(np.ones(jg.outputs[0].shape, jg.outputs[0].dtype.as_numpy()))
        second = ops.call(ji.graph, one, inputs_dict=ji.inputs_dict(jinfo_call))
        ss = [_store(t) for t in second]
    with popxl.Session(ir, device) as sess:
        r = sess.run()
    out = [None] * len(arrays)
    for i, s in zip(float_idx, ss):
        out[i] = r[s]
    del n_out
    return out, seeds, v


def torch_grads(fn, *arrays, seeds):
    """PyTorch reference for ``grads_of``: fn takes torch tensors."""
    import torch

    ts = [torch.tensor(np.asarray(a), requires_grad=_is_float(a)) for a in arrays]
    outs = fn(*ts)
    outs = [outs] if isinstance(outs, torch.Tensor) else list(outs)
    diff = [t for t in ts if t.requires_grad]
    gs = torch.autograd.grad(outs, diff, [torch.tensor(s) for s in seeds], allow_unused=True)
    res, k = [], 0
    for t in ts:
        if t.requires_grad:
            gk = gs[k]
            res.append(np.zeros(t.shape, t.detach().numpy().dtype) if gk is None else gk.numpy())
            k += 1
        else:
            res.append(None)
    return [o.detach().numpy() for o in outs], res


def torch_second_order(fn, *arrays, seeds, v):
    import torch

    ts = [torch.tensor(np.asarray(a), requires_grad=_is_float(a)) for a in arrays]
    outs = fn(*ts)
    outs = [outs] if isinstance(outs, torch.Tensor) else list(outs)
    diff = [t for t in ts if t.requires_grad]
    first = torch.autograd.grad(outs, diff, [torch.tensor(s) for s in seeds], create_graph=True)
    total = sum((f * torch.tensor(vk)).sum() for f, vk in zip(first, v))
    second = torch.autograd.grad(total, diff, allow_unused=True)
    res, k = [], 0
    for t in ts:
        if t.requires_grad:
            s = second[k]
            res.append(np.zeros(t.shape, t.detach().numpy().dtype) if s is None else s.numpy())
            k += 1
        else:
            res.append(None)
    return res
