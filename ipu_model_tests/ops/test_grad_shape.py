"""Gradient rules of the shape, slicing and indexing ops (shape.py,
slicing.py, gather.py), checked against PyTorch autograd: first order over
several shapes/axes/dtypes, second order through f(x) = op(x * x)."""
import numpy as np
import pytest
import torch

import ipuxl as popxl
import ipuxl.ops as ops
from grad_harness import default_seeds, grads_of, second_order_of, torch_grads, torch_second_order

TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float16: dict(rtol=1e-2, atol=1e-2)}


def _arr(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def check(fn, tfn, *arrays, dtype=np.float32):
    """First-order gradients of ``fn`` (ipuxl) against ``tfn`` (torch, run in
    float32 with the same seeds)."""
    t32 = [a.astype(np.float32) if np.asarray(a).dtype == np.float16 else a for a in arrays]
    with torch.no_grad():
        ref_out = tfn(*[torch.tensor(np.asarray(a)) for a in t32])
    ref_out = [ref_out] if isinstance(ref_out, torch.Tensor) else list(ref_out)
    seeds = default_seeds([(tuple(o.shape), dtype) for o in ref_out])
    outs, grads = grads_of(fn, *arrays, seeds=seeds)
    r_outs, r_grads = torch_grads(tfn, *t32, seeds=[s.astype(np.float32) for s in seeds])
    tol = TOL[dtype]
    for o, r in zip(outs, r_outs):
        np.testing.assert_allclose(o.astype(np.float32), r, **tol)
    for a, g, r in zip(arrays, grads, r_grads):
        if r is None:
            assert g is None
            continue
        assert g.shape == np.asarray(a).shape and g.dtype == np.asarray(a).dtype
        np.testing.assert_allclose(g.astype(np.float32), r, **tol)
    return grads


def check2(fn, tfn, *arrays):
    """Second order (Hessian-vector product) against torch, float32."""
    got, seeds, v = second_order_of(fn, *arrays)
    ref = torch_second_order(tfn, *arrays, seeds=seeds, v=v)
    for g, r in zip(got, ref):
        if r is None:
            assert g is None
            continue
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


def _sq(f):
    return lambda x, *a: f(x * x, *a)


DTYPES = [np.float32, np.float16]


# ---------------------------------------------------------------- shape ops

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,new", [((2, 3, 4), (6, 4)), ((2, 3), (-1,)), ((1,), ()),
                                       ((0, 3), (3, 0))])
def test_reshape(shape, new, dtype):
    check(lambda x: ops.reshape(x, new), lambda x: x.reshape(new), _arr(shape, dtype), dtype=dtype)
    check(lambda x: ops.reshape_(x, new), lambda x: x.reshape(new), _arr(shape, dtype), dtype=dtype)


def test_squeeze_flatten():
    x = _arr((2, 1, 3, 1))
    check(lambda x: ops.squeeze(x, [-1]), lambda x: x.squeeze(-1), x)
    check(lambda x: ops.flatten(x), lambda x: x.flatten(), x)
    check(lambda x: ops.flatten_(x), lambda x: x.flatten(), x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,perm", [((2, 3, 4), (2, 0, 1)), ((2, 3, 4), None),
                                        ((3, 1, 2), (1, 0, 2)), ((2, 3), (-1, 0))])
def test_transpose(shape, perm, dtype):
    tp = tuple(p % len(shape) for p in perm) if perm else tuple(reversed(range(len(shape))))
    for f in (ops.transpose, ops.transpose_):
        check(lambda x: f(x, perm), lambda x: x.permute(tp), _arr(shape, dtype), dtype=dtype)


def test_shape_second_order():
    x = _arr((2, 3, 4))
    check2(_sq(lambda x: ops.transpose(ops.reshape(x, (6, 4)), (1, 0))),
           _sq(lambda x: x.reshape(6, 4).permute(1, 0)), x)


# ---------------------------------------------------------------- slicing

def _torch_slices(x, slices):
    """x sliced by {axis: python slice} (negative steps too) via index_select."""
    for a, s in slices.items():
        idx = list(range(*s.indices(x.shape[a])))
        x = torch.index_select(x, a, torch.tensor(idx, dtype=torch.long))
    return x


SLICES = [
    ((7,), dict(start=1, stop=6), {0: slice(1, 6)}),
    ((7,), dict(start=-2, stop=0, step=-1), {0: slice(-2, 0, -1)}),
    ((9, 5), dict(start=[1, None], stop=[None, -1], step=[3, 2]),
     {0: slice(1, None, 3), 1: slice(None, -1, 2)}),
    ((6, 8), dict(start=7, stop=None, step=-3, axis=-1), {1: slice(7, None, -3)}),
    ((6, 8), dict(start=[5, 0], stop=[None, 8], step=[-2, 1], axis=[0, 1]),
     {0: slice(5, None, -2)}),
    ((4, 3), dict(start=2, stop=2, axis=0), {0: slice(2, 2)}),   # empty result
    ((4, 3), dict(start=-100, stop=100, axis=1), {1: slice(-100, 100)}),
    ((5,), dict(start=3, stop=4, step=-1), {0: slice(3, 4, -1)}),  # empty, negative step
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,kw,ts", SLICES)
def test_slice(shape, kw, ts, dtype):
    x = _arr(shape, dtype)
    check(lambda x: ops.slice(x, **kw), lambda x: _torch_slices(x, ts), x, dtype=dtype)
    check(lambda x: ops.slice_(x, **kw), lambda x: _torch_slices(x, ts), x, dtype=dtype)


def test_getitem():
    x = _arr((5, 6, 4))
    check(lambda x: x[1:4, ::-2, 2], lambda x: _torch_slices(x, {0: slice(1, 4), 1: slice(None, None, -2)})[:, :, 2], x)
    check(lambda x: x[..., ::3], lambda x: x[..., ::3], x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,strides", [((7,), [2]), ((5, 6), [2, 3]), ((4, 3, 5), [1, 4, 5]),
                                           ((3, 1), [5, 1])])
def test_subsample(shape, strides, dtype):
    key = tuple(slice(None, None, s) for s in strides)
    check(lambda x: ops.subsample(x, strides), lambda x: x[key], _arr(shape, dtype), dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,splits,axis", [((6, 4), 3, 0), ((3, 7), [2, 0, 5], -1),
                                               ((2, 4, 3), [1, 3], 1)])
def test_split(shape, splits, axis, dtype):
    sizes = [shape[axis] // splits] * splits if isinstance(splits, int) else splits
    check(lambda x: ops.split(x, splits, axis), lambda x: torch.split(x, sizes, axis),
          _arr(shape, dtype), dtype=dtype)


def test_split_unused_outputs():
    # Outputs without a gradient contribute zeros.
    x = _arr((6, 3))
    check(lambda x: ops.split(x, 3, 0)[1] * 2.0, lambda x: torch.split(x, 2, 0)[1] * 2.0, x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes,axis", [([(2, 3), (4, 3)], 0), ([(2, 1), (2, 0), (2, 5)], -1),
                                         ([(3, 2, 2)], 1), ([(1, 2), (1, 2), (1, 2)], 1)])
def test_concat(shapes, axis, dtype):
    xs = [_arr(s, dtype, seed=i) for i, s in enumerate(shapes)]
    check(lambda *a: ops.concat(a, axis), lambda *a: torch.cat(a, axis), *xs, dtype=dtype)
    check(lambda *a: ops.concat_(a, axis), lambda *a: torch.cat(a, axis), *xs, dtype=dtype)


def test_concat_repeated_input():
    x = _arr((2, 3))
    check(lambda x: ops.concat([x, x * 3.0, x], 1), lambda x: torch.cat([x, x * 3.0, x], 1), x)


def test_slicing_second_order():
    x = _arr((9, 5))
    check2(_sq(lambda x: ops.slice(x, start=[7, 0], stop=[None, 5], step=[-3, 2])),
           _sq(lambda x: _torch_slices(x, {0: slice(7, None, -3), 1: slice(0, 5, 2)})), x)
    check2(_sq(lambda x: ops.subsample(x, [2, 3])), _sq(lambda x: x[::2, ::3]), x)
    check2(_sq(lambda x: ops.split(x, [4, 5], 0)[1]), _sq(lambda x: x[4:]), x)
    y = _arr((2, 5), seed=3)
    check2(lambda x, y: ops.concat([x * x, y * y], 0),
           lambda x, y: torch.cat([x * x, y * y], 0), x, y)


# ---------------------------------------------------------------- gather

def _torch_take(x, idx, axis, n, zero_oor):
    i = torch.tensor(np.asarray(idx).astype(np.int64))
    if zero_oor:
        valid = (i >= 0) & (i < n)
        j = torch.where(valid, i, torch.zeros_like(i))
    else:
        j = torch.clamp(torch.where(i < 0, i + n, i), 0, n - 1)
    out = torch.index_select(x, axis, j.reshape(-1))
    shape = x.shape[:axis] + tuple(i.shape) + x.shape[axis + 1:]
    out = out.reshape(shape)
    if zero_oor:
        m = valid.reshape((1,) * axis + tuple(i.shape) + (1,) * (x.dim() - axis - 1))
        out = out * m.to(out.dtype)
    return out


GATHERS = [
    ((5, 3), [0, 2, 2, 4, 2], 0, False),          # repeated indices accumulate
    ((4, 6), [[1, -1], [5, 5]], 1, False),        # negative, 2-D indices
    ((3, 4, 2), [-7, 9, 3], -2, False),           # out of range: clamped
    ((3, 4, 2), [-1, 9, 3, 0, 0], 1, True),       # zero_OOR
    ((6,), [], 0, False),                         # empty indices
    ((6,), 3, 0, False),                          # scalar index
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["gather", "tied_gather"])
@pytest.mark.parametrize("shape,idx,axis,zoor", GATHERS)
def test_gather(shape, idx, axis, zoor, kind, dtype):
    f = getattr(ops, kind)
    x = _arr(shape, dtype)
    idx = np.asarray(idx, np.int32)
    n = shape[axis]
    ax = axis % len(shape)
    tf = lambda x, *i: _torch_take(x, idx, ax, n, zoor)  # noqa: E731
    # constant indices (built into the graph) and run-time indices (a variable)
    check(lambda x: f(x, idx, axis, zero_OOR=zoor), tf, x, dtype=dtype)
    if idx.size:
        check(lambda x, i: f(x, i, axis, zero_OOR=zoor), tf, x, idx, dtype=dtype)


@pytest.mark.parametrize("zoor", [False, True])
@pytest.mark.parametrize("idx", [np.array([2**31 + 5, 1, 2**32 - 1, 1], np.uint32),
                                 np.array([2**32 + 2, -2, -(2**32) + 1, 3], np.int64)])
def test_gather_wide_indices(idx, zoor):
    # Run-time indices that a cast to int32 would bring into range.
    x = _arr((4, 3))
    check(lambda x, i: ops.gather(x, i, zero_OOR=zoor),
          lambda x, *i: _torch_take(x, idx, 0, 4, zoor), x, idx)


def test_getitem_int_index():
    x = _arr((4, 3))
    idx = np.array([3, 1, 3], np.int32)
    check(lambda x: x[idx], lambda x: x[torch.tensor(idx, dtype=torch.long)], x)


def test_gather_second_order():
    x = _arr((5, 3))
    idx = np.array([[0, 4], [4, 4], [2, -1]], np.int32)
    tf = _sq(lambda x, *i: _torch_take(x, idx, 0, 5, False))
    check2(_sq(lambda x: ops.gather(x, idx)), tf, x)
    check2(_sq(lambda x, i: ops.gather(x, i)), tf, x, idx)
    check2(_sq(lambda x, i: ops.gather(x, i, 1, zero_OOR=True)),
           _sq(lambda x, *i: _torch_take(x, [2, 3, 0], 1, 3, True)), x,
           np.array([2, 3, 0], np.int64))


# ---------------------------------------------------------------- scatter

def _ref_scatter(t, idx, vals, axis):
    """Numpy/torch-free reference of ipuxl's scatter with last-writer-wins."""
    idx = np.asarray(idx)
    out = t.clone()
    n = t.shape[axis]
    for p in np.ndindex(*idx.shape):
        i = int(idx[p])
        i = i + n if i < 0 else i
        if 0 <= i < n:
            q = list(p)
            q[axis] = i
            out = out.index_put((tuple(torch.tensor([c]) for c in q)), vals[p].reshape(1))
    return out


SCATTERS = [
    ((4, 3), [[1, 0, 3], [2, 3, 0]], 0),
    ((3, 5), [[4, -1], [0, 2]], -1),               # negative index, partial extent
    ((5,), [3, 3, 1, 3, 9], 0),                    # repeated (last wins) and out of range
    ((2, 3, 4), [[[0, 2, 1]], [[2, 2, 0]]], 1),    # repeated in one column
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,idx,axis", SCATTERS)
def test_scatter(shape, idx, axis, dtype):
    idx = np.asarray(idx, np.int32)
    t = _arr(shape, dtype)
    v = _arr(idx.shape, dtype, seed=5)
    ax = axis % len(shape)
    tf = lambda t, v, *i: _ref_scatter(t, idx, v, ax)  # noqa: E731
    check(lambda t, v: ops.scatter(t, idx, v, axis), tf, t, v, dtype=dtype)
    check(lambda t, v, i: ops.scatter(t, i, v, axis), tf, t, v, idx, dtype=dtype)


def test_scatter_wide_indices():
    idx = np.array([[2**32 + 1, -1, 0], [1, 2**33, -(2**32) + 2]], np.int64)
    t, v = _arr((3, 3)), _arr((2, 3), seed=2)
    check(lambda t, v, i: ops.scatter(t, i, v), lambda t, v, *i: _ref_scatter(t, idx, v, 0),
          t, v, idx)


def test_scatter_second_order():
    idx = np.array([[1, 0, 1], [2, 1, 0]], np.int32)
    t, v = _arr((3, 3)), _arr((2, 3), seed=2)
    tf = lambda t, v, *i: _ref_scatter(t * t, idx, v * v, 0)  # noqa: E731
    check2(lambda t, v: ops.scatter(t * t, idx, v * v), tf, t, v)
    check2(lambda t, v, i: ops.scatter(t * t, i, v * v), tf, t, v, idx)


# ---------------------------------------------------------------- scatter_reduce

def _torch_sr(data, idx, red, axis, n, init, index_shape):
    """torch scatter_reduce reference; indices outside [0, n) are dropped."""
    i = torch.tensor(np.broadcast_to(np.asarray(idx).reshape(index_shape), data.shape).copy(),
                     dtype=torch.long)
    valid = (i >= 0) & (i < n)
    shape = list(data.shape)
    shape[axis] = n + 1  # an extra bin for the dropped elements
    i = torch.where(valid, i, torch.full_like(i, n))
    tred = {"sum": "sum", "max": "amax", "min": "amin"}[red]
    if init is not None:
        base = torch.cat([init, torch.zeros_like(init.narrow(axis, 0, 1))], axis)
        return base.scatter_reduce(axis, i, data, tred).narrow(axis, 0, n)
    # Without initial values nothing but data takes part; untouched positions
    # are 0. (A NaN base: torch's amax/amin backward would otherwise share
    # gradients with a base value equal to the result even when
    # include_self=False.)
    base = torch.full(shape, float("nan"), dtype=data.dtype)
    out = base.scatter_reduce(axis, i, data, tred, include_self=False).narrow(axis, 0, n)
    return torch.where(torch.isnan(out), torch.zeros_like(out), out)


SRS = [
    ((4, 3), [[0, 2, 2], [1, 0, 2], [2, 2, 0], [0, 0, 5]], 0, 3, (4, 3)),
    ((3, 5), [1, 1, 0, 3, -1], 1, 4, (1, 5)),      # index broadcast along axis 1
    ((6,), [2, 0, 2, 2, 1, 0], 0, 3, (6,)),
]


@pytest.mark.parametrize("with_init", [False, True])
@pytest.mark.parametrize("red", ["sum", "max", "min"])
@pytest.mark.parametrize("shape,idx,axis,n,ishape", SRS)
def test_scatter_reduce(shape, idx, axis, n, ishape, red, with_init):
    idx = np.asarray(idx, np.int32)
    rng = np.random.default_rng(7)
    data = rng.integers(-3, 3, size=shape).astype(np.float32)  # ties
    oshape = list(shape)
    oshape[axis] = n
    init = rng.integers(-3, 3, size=oshape).astype(np.float32)
    arrays = (data, init) if with_init else (data,)

    def tf(d, *rest):
        return _torch_sr(d, idx, red, axis, n, rest[0] if with_init else None, ishape)

    def f(d, *rest):
        return ops.scatter_reduce(d, idx, red, initial_values=rest[0] if with_init else None,
                                  axis=axis, axis_size=n)

    def f_rt(d, *rest):
        return ops.scatter_reduce(d, rest[-1], red, initial_values=rest[0] if with_init else None,
                                  axis=axis, axis_size=n)

    check(f, tf, *arrays)
    check(f_rt, tf, *arrays, idx)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_reduce_sum_f16(dtype):
    idx = np.array([0, 2, 2, 1, 2], np.int32)
    check(lambda d: ops.scatter_reduce(d, idx, "sum", axis=1, axis_size=3),
          lambda d: _torch_sr(d, idx, "sum", 1, 3, None, (1, 5)), _arr((2, 5), dtype),
          dtype=dtype)


def test_scatter_reduce_none():
    idx = np.array([[1, 0], [1, 2], [0, 2]], np.int32)   # column 0: 1 twice (last wins)
    d, init = _arr((3, 2)), _arr((3, 2), seed=1)

    def tf(d, init, *i):
        return _ref_scatter(init, idx, d, 0)

    check(lambda d, init: ops.scatter_reduce(d, idx, "none", initial_values=init), tf, d, init)
    check(lambda d, init, i: ops.scatter_reduce(d, i, "none", initial_values=init), tf, d, init,
          idx)


@pytest.mark.parametrize("red", ["max", "min", "none"])
def test_scatter_reduce_second_order_other(red):
    idx = np.array([[0, 2], [1, 0], [2, 0]], np.int32)
    d, init = _arr((3, 2)), _arr((3, 2), seed=4)

    def tf(d, init, *i):
        if red == "none":
            return _ref_scatter(init * init, idx, d * d, 0)
        return _torch_sr(d * d, idx, red, 0, 3, init * init, (3, 2))

    check2(lambda d, init: ops.scatter_reduce(d * d, idx, red, initial_values=init * init),
           tf, d, init)
    check2(lambda d, init, i: ops.scatter_reduce(d * d, i, red, initial_values=init * init),
           tf, d, init, idx)


def test_scatter_reduce_mul_raises():
    idx = np.array([0, 1, 0], np.int32)
    with pytest.raises(NotImplementedError, match="mul"):
        grads_of(lambda d: ops.scatter_reduce(d, idx, "mul", axis_size=2), _arr((3,)))


def test_scatter_reduce_second_order():
    idx = np.array([[0, 2], [1, 0], [2, 2]], np.int32)
    d, init = _arr((3, 2)), _arr((3, 2), seed=4)
    tf = lambda d, init, *i: _torch_sr(d * d, idx, "sum", 0, 3, init * init, (3, 2))  # noqa
    check2(lambda d, init: ops.scatter_reduce(d * d, idx, "sum", initial_values=init * init),
           tf, d, init)
    check2(lambda d, init, i: ops.scatter_reduce(d * d, i, "sum", initial_values=init * init),
           tf, d, init, idx)


# ---------------------------------------------------------------- dynamic slice / update

def _wrap_index(x, axes, offsets, sizes):
    idx = []
    for a, o, s in zip(axes, offsets, sizes):
        n = x.shape[a]
        o = o if 0 <= o < n else 0
        idx.append((a, [(o + q) % n for q in range(s)]))
    return idx


def _torch_dyn_slice(x, axes, offsets, sizes):
    for a, ii in _wrap_index(x, axes, offsets, sizes):
        x = torch.index_select(x, a, torch.tensor(ii, dtype=torch.long))
    return x


def _torch_dyn_update(x, u, axes, offsets, sizes):
    grids = [torch.arange(d) for d in x.shape]
    for a, ii in _wrap_index(x, axes, offsets, sizes):
        grids[a] = torch.tensor(ii, dtype=torch.long)
    mesh = torch.meshgrid(*grids, indexing="ij")
    return x.index_put(mesh, u)


DYNS = [((5, 4), [0], [3], [2]), ((5, 4), [1, 0], [3, 4], [2, 3]),   # wraps round
        ((6,), [0], [9], [4]), ((3, 2, 4), [-1], [1], [0])]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axes,offs,sizes", DYNS)
def test_dynamic_slice_update(shape, axes, offs, sizes, dtype):
    offs_a = np.asarray(offs, np.uint32)
    ax = [a % len(shape) for a in axes]
    x = _arr(shape, dtype)
    check(lambda x, i: ops.dynamic_slice(x, i, axes, sizes, True),
          lambda x, *i: _torch_dyn_slice(x, ax, offs, sizes), x, offs_a, dtype=dtype)
    ushape = list(shape)
    for a, s in zip(ax, sizes):
        ushape[a] = s
    u = _arr(tuple(ushape), dtype, seed=3)
    check(lambda x, u, i: ops.dynamic_update(x, i, u, axes, sizes, False),
          lambda x, u, *i: _torch_dyn_update(x, u, ax, offs, sizes), x, u, offs_a, dtype=dtype)


def test_dynamic_second_order():
    x, u = _arr((5, 4)), _arr((2, 4), seed=1)
    i = np.array([4], np.uint32)
    check2(lambda x, i: ops.dynamic_slice(x * x, i, [0], [2], True),
           lambda x, *a: _torch_dyn_slice(x * x, [0], [4], [2]), x, i)
    check2(lambda x, u, i: ops.dynamic_update(x * x, i, u * u, [0], [2], True),
           lambda x, u, *a: _torch_dyn_update(x * x, u * u, [0], [4], [2]), x, u, i)


# ---------------------------------------------------------------- onehot

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("idx,depth,axis", [([0, 3, 1, 3], 4, 1), ([[2, -1], [5, 0]], 3, 0)])
def test_onehot(idx, depth, axis, dtype):
    idx = np.asarray(idx, np.int32)
    vals = np.array([0.25, 2.0], dtype)

    def tf(v, *i):
        j = torch.tensor(idx, dtype=torch.long)
        j = torch.where(j < 0, j + depth, j)
        valid = (j >= 0) & (j < depth)
        h = torch.nn.functional.one_hot(torch.where(valid, j, torch.zeros_like(j)), depth)
        h = (h * valid.unsqueeze(-1)).to(v.dtype)
        h = torch.movedim(h, -1, axis)
        return v[0] + h * (v[1] - v[0])

    check(lambda v, i: ops.onehot(i, popxl.constant(np.int32(depth)), v, axis), tf, vals, idx,
          dtype=dtype)


def test_onehot_float_indices_no_grad():
    # Float indices are truncated and never carry a gradient.
    from ipuxl.grad import nondiff_inputs

    assert nondiff_inputs("Onehot") == {0, 1}
    vals = np.array([-1.0, 3.0], np.float32)
    fidx = np.array([0.0, 2.7, 1.2], np.float32)

    def tf(v):
        h = torch.nn.functional.one_hot(torch.tensor([0, 2, 1]), 3).to(v.dtype)
        return v[0] + h * (v[1] - v[0])

    check(lambda v: ops.onehot(popxl.constant(fidx), popxl.constant(np.int32(3)), v, 1), tf,
          vals)


def test_onehot_second_order():
    idx = np.array([1, 0, 2], np.int32)

    def tf(v, *i):
        h = torch.nn.functional.one_hot(torch.tensor(idx, dtype=torch.long), 3).to(v.dtype)
        w = v * v
        return w[0] + h * (w[1] - w[0])

    check2(lambda v: ops.onehot(popxl.constant(idx), popxl.constant(np.int32(3)), v * v, 1), tf,
           np.array([0.5, -1.5], np.float32))
