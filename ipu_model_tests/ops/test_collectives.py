"""popxl.ops.collectives on R replicas in one process, against NumPy
oracles (every reduction, groupings with stride 1 and > 1, group sizes 1
and R, float32 / float16 / int32), their gradients by finite differences,
and bad inputs."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.transforms import autodiff

C = ops.collectives

# (replicas, stride, group_size)
GROUPINGS = [(4, 1, 4), (4, 1, 2), (4, 2, 2), (4, 1, 1), (8, 2, 4), (8, 4, 2), (8, 2, 2),
             (2, 1, 2), (1, 1, 1)]


def members_of(assignment):
    groups = {}
    for r, g in enumerate(assignment):
        groups.setdefault(g, []).append(r)
    return [groups[g] for g in sorted(groups)]


def np_reduce(op, xs):
    xs = np.stack(xs).astype(np.float64)
    if op == "add":
        return xs.sum(0)
    if op == "mean":
        return xs.mean(0)
    if op == "mul":
        return xs.prod(0)
    if op == "min":
        return xs.min(0)
    if op == "max":
        return xs.max(0)
    if op == "and":
        return np.all(xs != 0, axis=0).astype(np.float64)
    if op == "or":
        return np.any(xs != 0, axis=0).astype(np.float64)
    if op == "square_add":
        return (xs ** 2).sum(0)
    raise AssertionError(op)


def run_replicated(R, shape, dtype, build, data, grouping=None):
    """Loads ``data`` (R, *shape) as each replica's input, applies
    ``build(x, group)`` and returns the stored outputs (R, *out_shape)."""
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        group = ir.replica_grouping(*grouping) if grouping else None
        s = popxl.h2d_stream(shape, dtype, name="x")
        x = ops.host_load(s, "x")
        outs = build(x, group)
        outs = [outs] if isinstance(outs, popxl.Tensor) else list(outs)
        streams = []
        for i, y in enumerate(outs):
            o = popxl.d2h_stream(y.shape, y.dtype, name=f"y{i}")
            ops.host_store(o, y)
            streams.append(o)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({s: data if R > 1 else data[0]})
    return [got[o].reshape((R,) + tuple(o.shape)) for o in streams], group, ir


def sample(R, shape, dtype, op, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == popxl.int32:
        lo, hi = (-2, 3) if op == "mul" else (-9, 10)
        return rng.integers(lo, hi, size=(R,) + shape).astype(np.int32)
    if op in ("and", "or"):
        return (rng.random((R,) + shape) < 0.5).astype(dtype.as_numpy())
    x = rng.uniform(0.5, 1.5, (R,) + shape) * rng.choice([-1, 1], (R,) + shape)
    return x.astype(dtype.as_numpy())


def tol(dtype):
    return dict(rtol=2e-3, atol=2e-3) if dtype == popxl.float16 else dict(rtol=1e-6, atol=1e-6)


OPS = ["add", "mean", "mul", "min", "max", "and", "or", "square_add"]


@pytest.mark.parametrize("R,stride,gsize", GROUPINGS)
@pytest.mark.parametrize("dtype", [popxl.float32, popxl.float16, popxl.int32])
def test_all_reduce_every_operator(R, stride, gsize, dtype):
    shape = (2, 3)
    data = {op: sample(R, shape, dtype, op, i) for i, op in enumerate(OPS)}
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        g = ir.replica_grouping(stride, gsize)
        streams, outs = {}, {}
        for op in OPS:
            s = popxl.h2d_stream(shape, dtype, name=f"x_{op}")
            x = ops.host_load(s)
            streams[op] = s
            for inplace in (False, True):
                y = (C.replicated_all_reduce_ if inplace else C.replicated_all_reduce)(
                    x if not inplace else x + 0, op, g)
                o = popxl.d2h_stream(y.shape, y.dtype)
                ops.host_store(o, y)
                outs[(op, inplace)] = o
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({streams[op]: data[op] if R > 1 else data[op][0] for op in OPS})
    for (op, inplace), o in outs.items():
        y = got[o].reshape((R,) + shape)
        for mem in members_of(g.assignment):
            want = np_reduce(op, [data[op][r] for r in mem])
            if dtype == popxl.int32:
                want = np.trunc(want) if op != "mean" else np.trunc(want)  # integer division
            for r in mem:
                np.testing.assert_allclose(y[r].astype(np.float64), want, **tol(dtype),
                                           err_msg=f"{op} inplace={inplace} replica {r}")



@pytest.mark.parametrize("R,stride,gsize", [(4, 1, 1), (4, 1, 2), (4, 2, 2), (4, 1, 4), (3, 1, 3)])
@pytest.mark.parametrize("dtype", [popxl.float32, popxl.float16, popxl.int32])
def test_all_reduce_bits_over_chunks(R, stride, gsize, dtype):
    """Long tensors (several of the reduction's chunks, a ragged last one):
    every output holds the bits of the member-order fold in double (int64
    for integers), rounded once (float16 through float32, as the core
    narrows), in place or not, for groups of 1 to 4."""
    n = 5003
    rng = np.random.default_rng(3)
    if dtype == popxl.int32:
        x = rng.integers(-1000, 1000, size=(R, n)).astype(np.int32)
    else:
        x = rng.uniform(0.5, 1.5, (R, n)).astype(dtype.as_numpy())
    ops_ = ["add", "mul", "min", "max", "square_add"] + ([] if dtype == popxl.int32 else ["mean"])
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        g = ir.replica_grouping(stride, gsize)
        s = popxl.h2d_stream((n,), dtype, name="x")
        t = ops.host_load(s)
        outs = {}
        for op in ops_:
            for inplace in (False, True):
                y = (C.replicated_all_reduce_ if inplace else C.replicated_all_reduce)(
                    t + 0 if inplace else t, op, g)
                o = popxl.d2h_stream(y.shape, y.dtype)
                ops.host_store(o, y)
                outs[(op, inplace)] = o
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({s: x})
    w = x.astype(np.int64 if dtype == popxl.int32 else np.float64)
    for (op, inplace), o in outs.items():
        y = got[o].reshape(R, n)
        for mem in members_of(g.assignment):
            v = w[mem[0]] * w[mem[0]] if op == "square_add" else w[mem[0]].copy()
            for r in mem[1:]:
                v = {"add": v + w[r], "mean": v + w[r], "mul": v * w[r], "min": np.minimum(v, w[r]),
                     "max": np.maximum(v, w[r]), "square_add": v + w[r] * w[r]}[op]
            if op == "mean":
                v = v / len(mem)
            if dtype == popxl.float16:
                v = v.astype(np.float32)
            want = v.astype(dtype.as_numpy())
            for r in mem:
                np.testing.assert_array_equal(y[r].view(np.uint8), want.view(np.uint8),
                                              err_msg=f"{op} inplace={inplace} replica {r}")

@pytest.mark.parametrize("R,stride,gsize", GROUPINGS)
@pytest.mark.parametrize("dtype", [popxl.float32, popxl.float16, popxl.int32])
def test_all_gather_modes(R, stride, gsize, dtype):
    shape = (2, 3)
    data = sample(R, shape, dtype, "add")

    def build(x, g):
        return [C.replicated_all_gather(x, 0, g, "new_axis"),
                C.replicated_all_gather(x, 0, g, "concat"),
                C.replicated_all_gather(x, 1, g, "concat"),
                C.replicated_all_gather(x, -1, g, "auto")]

    (new, cat0, cat1, auto), g, _ = run_replicated(R, shape, dtype, build, data,
                                                   (stride, gsize))
    for mem in members_of(g.assignment):
        parts = [data[r] for r in mem]
        for r in mem:
            np.testing.assert_array_equal(new[r], np.stack(parts))
            np.testing.assert_array_equal(cat0[r], np.concatenate(parts, 0))
            np.testing.assert_array_equal(cat1[r], np.concatenate(parts, 1))
            np.testing.assert_array_equal(auto[r], np.concatenate(parts, 1))


@pytest.mark.parametrize("R,stride,gsize", GROUPINGS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [7, 8])
def test_reduce_scatter_pads_and_shards(R, stride, gsize, op, n):
    dtype = popxl.float32
    data = sample(R, (n,), dtype, op)

    def build(x, g):
        return [C.replicated_reduce_scatter(x, op, g),
                C.replicated_reduce_scatter(x, op, g, True)]

    (rs, rts), g, _ = run_replicated(R, (n,), dtype, build, data, (stride, gsize))
    m = -(-n // gsize)
    assert rs.shape == (R, m)
    for mem in members_of(g.assignment):
        full = np.zeros(m * gsize)
        # The zero padding takes part in the reduction (as GCL pads).
        padded = [np.concatenate([data[r].astype(np.float64), np.zeros(m * gsize - n)])
                  for r in mem]
        full[:] = np_reduce(op, padded)
        for k, r in enumerate(mem):
            np.testing.assert_allclose(rs[r], full[k * m:(k + 1) * m], rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(rts[r], full[k * m:(k + 1) * m], rtol=1e-6, atol=1e-6)


def test_reduce_scatter_rts_output_has_meta_shape():
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        x = popxl.variable(np.zeros((3, 5), np.float32))
        y = C.replicated_reduce_scatter(x, configure_output_for_replicated_tensor_sharding=True)
        z = C.replicated_reduce_scatter(x)
        s = C.replica_sharded_slice(x)
    assert y.shape == (4,) and y.meta_shape == (3, 5)
    assert z.shape == (4,) and z.meta_shape == ()
    assert s.shape == (4,) and s.meta_shape == (3, 5)


@pytest.mark.parametrize("R,stride,gsize", GROUPINGS)
@pytest.mark.parametrize("dtype", [popxl.float32, popxl.float16, popxl.int32])
def test_sharded_slice_then_gather_round_trips(R, stride, gsize, dtype):
    shape = (3, 5)
    data = sample(R, shape, dtype, "add")

    def build(x, g):
        sl = C.replica_sharded_slice(x, g)
        return [sl, C.replicated_all_gather(sl, group=g)]  # auto: meta_shape

    (sl, back), g, _ = run_replicated(R, shape, dtype, build, data, (stride, gsize))
    m = -(-15 // gsize)
    for mem in members_of(g.assignment):
        for k, r in enumerate(mem):
            flat = np.concatenate([data[r].reshape(-1), np.zeros(m * gsize - 15, data.dtype)])
            np.testing.assert_array_equal(sl[r], flat[k * m:(k + 1) * m])
            # Gathered from every member's own shard k.
            want = np.concatenate([np.concatenate([data[q].reshape(-1),
                                                   np.zeros(m * gsize - 15, data.dtype)])
                                   [j * m:(j + 1) * m] for j, q in enumerate(mem)])[:15]
            np.testing.assert_array_equal(back[r], want.reshape(shape))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_replicated_slice_takes_each_rank_its_slice(axis):
    R = 4
    shape = (4, 8, 4)
    data = np.broadcast_to(np.arange(128, dtype=np.float32).reshape(shape), (R,) + shape).copy()
    (y,), g, _ = run_replicated(R, shape, popxl.float32,
                                lambda x, g: C.replicated_slice(x, axis, g), data, (1, 2))
    for mem in members_of(g.assignment):
        for k, r in enumerate(mem):
            want = np.split(data[r], 2, axis=axis)[k]
            np.testing.assert_array_equal(y[r], want)


def test_replicated_slice_size_one_slices_drop_the_axis():
    R = 4
    shape = (2, 4, 3)
    data = np.broadcast_to(np.arange(24, dtype=np.float32).reshape(shape), (R,) + shape).copy()
    (y,), g, _ = run_replicated(R, shape, popxl.float32,
                                lambda x, g: C.replicated_slice(x, 1, g), data, None)
    assert y.shape == (R, 2, 3)
    for r in range(R):
        np.testing.assert_array_equal(y[r], data[r][:, r, :])


# ---------------------------------------------------------------- gradients
def _grad_program(R, shape, fwd, grouping, dtype=popxl.float64):
    """Forward ``y = fwd(x, g)`` in a subgraph and its autodiff gradient
    graph called with a per-replica ``dy``; returns a runner
    ``(x, dy) -> (y, dx)`` over one Session."""
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        g = ir.replica_grouping(*grouping)
        xs = popxl.h2d_stream(shape, dtype, name="x")
        x = ops.host_load(xs, "x")
        graph = ir.create_graph(lambda t: fwd(t, g), x)
        ginfo = autodiff(graph)
        info = ops.call_with_info(graph, x)
        y = info.outputs[0]
        dys = popxl.h2d_stream(y.shape, dtype, name="dy")
        dy = ops.host_load(dys, "dy")
        (dx,) = ops.call(ginfo.graph, dy, inputs_dict=ginfo.inputs_dict(info))
        ys, dxs = popxl.d2h_stream(y.shape, dtype, name="y"), popxl.d2h_stream(dx.shape, dtype,
                                                                             name="dx")
        ops.host_store(ys, y)
        ops.host_store(dxs, dx)
    sess = popxl.Session(ir, "ipu_model")
    sess.__enter__()

    def run(xv, dyv):
        out = sess.run({xs: xv, dys: dyv})
        return out[ys].reshape((R,) + y.shape), out[dxs].reshape((R,) + dx.shape)
    return run, g, y.shape


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize("op", ["add", "mean"])
@pytest.mark.parametrize("grouping", [(1, 4), (2, 2), (1, 2)])
def test_all_reduce_grad_is_the_derivative_of_every_replicas_loss(op, grouping):
    """d(sum_k L_k)/dx_r with L_k = <dy_k, y_k>."""
    R, shape = 4, (3,)
    run, g, yshape = _grad_program(R, shape, lambda t, g: C.replicated_all_reduce(t, op, g),
                                   grouping)
    rng = np.random.default_rng(1)
    x, dy = rng.normal(size=(R,) + shape), rng.normal(size=(R,) + shape)
    _, dx = run(x, dy)
    total = lambda xv: float((run(xv, dy)[0] * dy).sum())
    np.testing.assert_allclose(dx, _fd(total, x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op", ["add", "mean"])
@pytest.mark.parametrize("grouping", [(1, 4), (2, 2)])
def test_reduce_scatter_grad_is_the_derivative_of_every_replicas_loss(op, grouping):
    R, shape = 4, (7,)
    run, g, yshape = _grad_program(R, shape, lambda t, g: C.replicated_reduce_scatter(t, op, g),
                                   grouping)
    rng = np.random.default_rng(2)
    x, dy = rng.normal(size=(R,) + shape), rng.normal(size=(R,) + yshape)
    _, dx = run(x, dy)
    total = lambda xv: float((run(xv, dy)[0] * dy).sum())
    np.testing.assert_allclose(dx, _fd(total, x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mode,axis", [("concat", 0), ("concat", 1), ("new_axis", 0)])
@pytest.mark.parametrize("grouping", [(1, 4), (2, 2)])
def test_all_gather_grad_is_each_replicas_own_derivative(mode, axis, grouping):
    """PopART's rule (a Local reduce-scatter): replica r's gradient is
    dL_r/dx_r, its own loss's derivative with respect to its own input."""
    R, shape = 4, (2, 3)
    run, g, yshape = _grad_program(
        R, shape, lambda t, g: C.replicated_all_gather(t, axis, g, mode), grouping)
    rng = np.random.default_rng(3)
    x, dy = rng.normal(size=(R,) + shape), rng.normal(size=(R,) + yshape)
    _, dx = run(x, dy)
    for r in range(R):
        def own(xr):
            xv = x.copy()
            xv[r] = xr
            return float((run(xv, dy)[0][r] * dy[r]).sum())
        np.testing.assert_allclose(dx[r], _fd(own, x[r]), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("which", ["replica_sharded_slice", "replicated_slice"])
def test_slice_grads_are_the_derivative_for_a_replica_identical_input(which):
    """PopART's rule (an all-gather): the derivative of every replica's loss
    with respect to an input all replicas share (a weight)."""
    R, shape = 4, (4, 3)
    fwd = (lambda t, g: C.replica_sharded_slice(t, g)) if which == "replica_sharded_slice" \
        else (lambda t, g: C.replicated_slice(t, 0, g))
    run, g, yshape = _grad_program(R, shape, fwd, (1, 4))
    rng = np.random.default_rng(4)
    w = rng.normal(size=shape)
    x = np.broadcast_to(w, (R,) + shape).copy()
    dy = rng.normal(size=(R,) + yshape)
    _, dx = run(x, dy)
    total = lambda wv: float((run(np.broadcast_to(wv, (R,) + shape).copy(), dy)[0] * dy).sum())
    want = _fd(total, w)
    for r in range(R):
        np.testing.assert_allclose(dx[r], want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op", ["min", "max", "mul"])
def test_non_linear_all_reduce_has_no_gradient(op):
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        x = popxl.variable(np.zeros(3, np.float32))
        graph = ir.create_graph(lambda t: C.replicated_all_reduce(t, op), x)
    with pytest.raises(NotImplementedError, match=f"ReplicatedAllReduce.*{op}"):
        autodiff(graph)


def test_reduce_scatter_max_has_no_gradient():
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        x = popxl.variable(np.zeros(3, np.float32))
        graph = ir.create_graph(lambda t: C.replicated_reduce_scatter(t, "max"), x)
    with pytest.raises(NotImplementedError, match="ReplicatedReduceScatter.*max"):
        autodiff(graph)


# ---------------------------------------------------------------- across IPUs
@pytest.mark.parametrize("op", OPS)
def test_all_reduce_across_ipus(op):
    rng = np.random.default_rng(5)
    xs = [rng.uniform(0.5, 2, (2, 3)).astype(np.float32) for _ in range(3)]
    if op in ("and", "or"):
        xs = [(a > 1.2).astype(np.float32) for a in xs]
    ir = popxl.Ir()
    with ir.main_graph:
        ts = []
        for i, a in enumerate(xs):
            with popxl.ipu(i):
                ts.append(popxl.variable(a, name=f"x{i}") + 0)
        outs = C.all_reduce(ts, op=op)
        ident = C.all_reduce_identical_inputs(ts, op=op)
        grad_in = C.all_reduce_identical_grad_inputs(ts, op=op)
        streams = []
        for t in outs + ident + grad_in:
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()
    want = np_reduce(op, xs)
    for i in range(3):
        np.testing.assert_allclose(got[streams[i]], want, rtol=1e-6)
        np.testing.assert_array_equal(got[streams[3 + i]], xs[i])  # identity forward
        np.testing.assert_allclose(got[streams[6 + i]], want, rtol=1e-6)


@pytest.mark.parametrize("variant", ["all_reduce", "all_reduce_identical_inputs",
                                     "all_reduce_identical_grad_inputs"])
def test_all_reduce_across_ipus_grads(variant):
    """all_reduce: every x_j feeds every output (dx_j = sum_i dy_i);
    identical_inputs: identity forward, all-reduce gradient; identical grad
    inputs: the gradient is the identity (as PopART)."""
    fn = getattr(C, variant)
    ir = popxl.Ir()
    rng = np.random.default_rng(6)
    dys = [rng.normal(size=(3,)).astype(np.float32) for _ in range(2)]
    with ir.main_graph:
        ins = [popxl.variable(np.zeros(3, np.float32), name=f"x{i}") for i in range(2)]
        graph = ir.create_graph(lambda a, b: fn([a, b], ipus=[0, 1]), *ins)
        ginfo = autodiff(graph)
        info = ops.call_with_info(graph, *ins)
        grads = ops.call(ginfo.graph, *[popxl.constant(d) for d in dys],
                         inputs_dict=ginfo.inputs_dict(info))
        streams = []
        for t in grads:
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()
    if variant == "all_reduce_identical_grad_inputs":
        want = dys
    else:
        want = [dys[0] + dys[1]] * 2
    for s, w in zip(streams, want):
        np.testing.assert_allclose(got[s], w, rtol=1e-6)


# ---------------------------------------------------------------- bad inputs
def test_unknown_operator_is_a_value_error():
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        x = popxl.variable(np.zeros(3, np.float32))
        with pytest.raises(ValueError, match="Not a valid op: local"):
            C.replicated_all_reduce(x, "local")
        with pytest.raises(ValueError, match="Not a valid op: sum"):
            C.replicated_reduce_scatter(x, "sum")


def test_bad_output_shape_and_axis():
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        x = popxl.variable(np.zeros((2, 3), np.float32))
        with pytest.raises(ValueError, match="output_shape must equal one of"):
            C.replicated_all_gather(x, output_shape="stack")
        with pytest.raises(ValueError, match="Axis should be an int"):
            C.replicated_all_gather(x, axis=1.0)
        with pytest.raises(ValueError, match="axis 2 is out of range"):
            C.replicated_all_gather(x, axis=2)
        with pytest.raises(ValueError, match="has no meta_shape"):
            C.replicated_all_gather(x, output_shape="meta_shape")
        with pytest.raises(ValueError, match="Replicated slice must equally divide axis"):
            C.replicated_slice(x, 1)


def test_groupings_checked():
    ir = popxl.Ir(replication=4)
    other = popxl.Ir(replication=4)
    with ir.main_graph:
        x = popxl.variable(np.zeros(3, np.float32))
        with pytest.raises(ValueError, match="another Ir"):
            C.replicated_all_reduce(x, group=other.replica_grouping())
        nonconst = ir.replica_grouping_from_assignments([0, 1, 1, 0])
        with pytest.raises(NotImplementedError, match="non-constant stride"):
            C.replicated_all_gather(x, group=nonconst)
        with pytest.raises(TypeError, match="ReplicaGrouping"):
            C.replicated_all_reduce(x, group=2)
    with pytest.raises(ValueError, match="Stride must be a factor"):
        ir.replica_grouping(stride=3)
    with pytest.raises(ValueError, match="Group size must be greater than zero"):
        ir.replica_grouping(group_size=8)


def test_reduction_of_bool_is_refused():
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        x = popxl.variable(np.zeros(3, np.bool_))
        with pytest.raises((TypeError, ValueError), match="replicated_all_reduce"):
            C.replicated_all_reduce(x)
        C.replicated_all_gather(x)  # moving bytes is fine


def test_collective_in_diverged_conditional_is_a_runtime_error():
    R = 2
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        cs = popxl.h2d_stream((), popxl.bool, name="c")
        c = ops.host_load(cs)
        x = popxl.variable(np.ones(3, np.float32))
        then_g = ir.create_graph(lambda t: C.replicated_all_reduce(t), x)
        else_g = ir.create_graph(lambda t: t + 0, x)
        (y,) = ops.conditional(c, then_g, else_g, then_inputs=[x], else_inputs=[x])
        ys = popxl.d2h_stream(y.shape, y.dtype)
        ops.host_store(ys, y)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run({cs: np.array([True, True])})
        np.testing.assert_array_equal(out[ys], np.full((2, 3), 2.0))
        with pytest.raises(RuntimeError, match="replicas took different branches"):
            sess.run({cs: np.array([True, False])})


def test_float8_tensors_are_gathered_and_sliced_but_not_reduced():
    R = 2
    codes = np.arange(12, dtype=np.uint8).reshape(R, 6) + 40
    ir = popxl.Ir(replication=R)
    with ir.main_graph:
        s = popxl.h2d_stream((6,), popxl.float8_143, name="x")
        x = ops.host_load(s)
        g = C.replicated_all_gather(x)
        sl = C.replica_sharded_slice(x)
        ops.print_tensor(x)  # float8 values print decoded (no crash)
        outs = [popxl.d2h_stream(t.shape, t.dtype) for t in (g, sl)]
        for o, t in zip(outs, (g, sl)):
            ops.host_store(o, t)
        with pytest.raises(TypeError, match="replicated_all_reduce"):
            C.replicated_all_reduce(x)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run({s: codes})
    gathered = got[outs[0]].view(np.uint8).reshape(R, 12)
    sliced = got[outs[1]].view(np.uint8).reshape(R, 3)
    for r in range(R):
        np.testing.assert_array_equal(gathered[r], codes.reshape(-1))
        np.testing.assert_array_equal(sliced[r], codes[r][3 * r:3 * r + 3])


@pytest.mark.parametrize("op", ["add", "mul", "min", "max"])
def test_two_replica_float32_all_reduce_is_the_double_result_rounded_once(op):
    """Two float32 replicas reduce in float32 (core fast path): the same
    bits as the double result rounded once, also for exponents far apart,
    subnormals, overflow, infinities, NaN and signed zeros."""
    rng = np.random.default_rng(3)
    tiny, big = np.finfo(np.float32).tiny, np.finfo(np.float32).max
    special = np.array([0.0, -0.0, 1.0, -1.0, 1e30, -1e-30, tiny, tiny / 8, -tiny / 3, big,
                        -big, np.inf, -np.inf, np.nan, 3.0e-39, 1 + 2 ** -23, 2 ** 24, 1e-8],
                       np.float32)
    a = np.concatenate([special, np.repeat(special, len(special)),
                        (rng.normal(size=500) * 10.0 ** rng.integers(-30, 30, 500))
                        .astype(np.float32)])
    b = np.concatenate([special[::-1], np.tile(special, len(special)),
                        (rng.normal(size=500) * 10.0 ** rng.integers(-30, 30, 500))
                        .astype(np.float32)])
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        xs = popxl.h2d_stream(a.shape, popxl.float32, "x")
        y = ops.collectives.replicated_all_reduce(ops.host_load(xs), op)
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
    with popxl.Session(ir, "ipu_model") as s:
        out = s.run({xs: np.stack([a, b])})[ys]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        want = {"add": a64 + b64, "mul": a64 * b64,
                "min": np.where(b64 < a64, b64, a64),
                "max": np.where(a64 < b64, b64, a64)}[op].astype(np.float32)
    for r in range(2):
        np.testing.assert_array_equal(out[r].view(np.uint32)[~np.isnan(want)],
                                      want.view(np.uint32)[~np.isnan(want)])
        assert np.isnan(out[r][np.isnan(want)]).all()
