"""popxl.ops.var_updates against NumPy: in-place updates of variables, read
back with session.get_tensor_data; mixed dtypes, scalar-Tensor factors and
bad inputs."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
import ipuxl.ops.var_updates as vu

RNG = np.random.default_rng(1234)
TOL = {np.float32: dict(rtol=1e-6, atol=1e-6), np.float16: dict(rtol=2e-3, atol=2e-3)}


def run_update(build, *arrays, factor_vars=()):
    """Make a variable per array (and per factor in factor_vars), call
    build(*vars, *factor_tensors) in the main graph, run once, return the
    arrays read back from the variables (same order)."""
    ir = popxl.Ir()
    with ir.main_graph:
        vs = [popxl.variable(a, popxl.dtypes.dtype.as_dtype(np.asarray(a).dtype), name=f"v{i}",
                             downcast=False) for i, a in enumerate(arrays)]
        fs = [popxl.variable(np.asarray(f, np.float32), popxl.float32, name=f"f{i}")
              for i, f in enumerate(factor_vars)]
        result = build(*vs, *fs)
    with popxl.Session(ir, "ipu_model") as session:
        session.run()
        got = [session.get_tensor_data(v) for v in vs]
    assert isinstance(result, popxl.Tensor)
    return got


def rand(shape, dtype):
    return RNG.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------ accumulate family

ACC_CASES = [
    # name, builder(t, X, f), reference(t, X, f)
    ("accumulate_", lambda t, x, f: vu.accumulate_(t, x, f), lambda t, x, f: t + f * x),
    ("accumulate_square_", lambda t, x, f: vu.accumulate_square_(t, x, f),
     lambda t, x, f: t + f * x * x),
    ("accumulate_moving_average_", lambda t, x, f: vu.accumulate_moving_average_(t, x, f),
     lambda t, x, f: f * t + (1 - f) * x),
    ("accumulate_moving_average_square_",
     lambda t, x, f: vu.accumulate_moving_average_square_(t, x, f),
     lambda t, x, f: f * t + (1 - f) * x * x),
    ("accumulate_mean_", lambda t, x, f: vu.accumulate_mean_(t, x, f),
     lambda t, x, f: f / (f + 1) * t + x / (f + 1)),
]


@pytest.mark.parametrize("name,build,ref", ACC_CASES, ids=[c[0] for c in ACC_CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(), (7,), (3, 4, 5)])
@pytest.mark.parametrize("tensor_factor", [False, True])
def test_accumulate_family(name, build, ref, dtype, shape, tensor_factor):
    t, x = rand(shape, dtype), rand(shape, dtype)
    f = 0.75 if name != "accumulate_mean_" else 3.0
    if tensor_factor:
        got_t, _ = run_update(lambda a, b, fv: build(a, b, fv), t, x, factor_vars=[f])
    else:
        got_t, _ = run_update(lambda a, b: build(a, b, f), t, x)
    want = ref(t.astype(np.float64), x.astype(np.float64), f).astype(dtype)
    np.testing.assert_allclose(got_t, want, **TOL[dtype])


def test_accumulate_no_factor_and_returns_alias():
    t, x = rand((4, 3), np.float32), rand((4, 3), np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(t, name="a")
        b = popxl.variable(x, name="b")
        out = vu.accumulate_(a, b)
        assert out.shape == a.shape and out.dtype == a.dtype
        op = out.producer
        assert op.type == "Accumulate" and op.aliases == [(0, 0)] and op.modified == {0}
        # Tensor count as in PopXL: a float factor is an attribute, not a constant.
        c = vu.accumulate_(a, b, 0.5)
        assert len(ir.main_graph.constants) == 0
        s = popxl.d2h_stream(c.shape, c.dtype, name="s")
        ops.host_store(s, c)
    with popxl.Session(ir, "ipu_model") as session:
        outs = session.run()
        got = session.get_tensor_data(a)
    want = (t + x) + 0.5 * x
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(outs[s], want, rtol=1e-6)


def test_accumulate_mixed_dtypes():
    # float16 accumulator, float32 update (mixed precision as in PopART).
    t = rand((16,), np.float16)
    x = rand((16,), np.float32)
    got, _ = run_update(lambda a, b: vu.accumulate_(a, b, 0.25), t, x)
    np.testing.assert_allclose(got, (t.astype(np.float64) + 0.25 * x).astype(np.float16),
                               rtol=2e-3, atol=2e-3)


def test_accumulate_int32():
    t = np.array([1, 2, 3], np.int32)
    x = np.array([10, 20, 30], np.int32)
    got, _ = run_update(lambda a, b: vu.accumulate_(a, b), t, x)
    np.testing.assert_array_equal(got, t + x)


def test_accumulate_repeated_runs_accumulate():
    t = np.zeros((3,), np.float32)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(t, name="a")
        b = popxl.constant(x, name="b")
        vu.accumulate_(a, b, 2.0)
    with popxl.Session(ir, "ipu_model") as session:
        for _ in range(3):
            session.run()
        got = session.get_tensor_data(a)
    np.testing.assert_allclose(got, 6 * x)


def test_accumulate_mean_series():
    # The PopXL docstring example: mean of 1 and 2 is 1.5.
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        acc = popxl.variable(0, dtype=popxl.float32, name="acc")
        a = popxl.variable(1, dtype=popxl.float32)
        b = popxl.variable(2, dtype=popxl.float32)
        vu.accumulate_mean_(acc, a, 0.0)
        vu.accumulate_mean_(acc, b, 1.0)
        assert len(ir.main_graph.constants) == 2  # float steps become float32 constants
    with popxl.Session(ir, "ipu_model") as session:
        session.run()
        assert session.get_tensor_data(acc) == pytest.approx(1.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("tensor_factor", [False, True])
def test_accumulator_scale(dtype, tensor_factor):
    t = rand((5, 6), dtype)
    if tensor_factor:
        got, = run_update(lambda a, f: vu.accumulator_scale_(a, f), t, factor_vars=[0.125])
    else:
        got, = run_update(lambda a: vu.accumulator_scale_(a, 0.125), t)
    np.testing.assert_allclose(got, (t * np.asarray(0.125, dtype)), **TOL[dtype])


def test_accumulator_zero_clears_nan():
    t = np.array([1.0, np.nan, np.inf, -2.0], np.float32)
    got, = run_update(lambda a: vu.accumulator_zero_(a), t)
    np.testing.assert_array_equal(got, np.zeros(4, np.float32))


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("with_factor", [False, True])
def test_sparse_accumulate(axis, with_factor):
    t = rand((5, 4), np.float32)
    idx = np.array([3, 0, 3, 9], np.int32)  # repeated index accumulates, 9 is out of range
    xshape = (4, 4) if axis == 0 else (5, 4)
    x = rand(xshape, np.float32)
    f = 0.5 if with_factor else None
    ir = popxl.Ir()
    with ir.main_graph:
        tv = popxl.variable(t, name="t")
        xv = popxl.variable(x, name="x")
        iv = popxl.constant(idx, name="idx")
        vu.sparse_accumulate_(tv, xv, iv, axis=axis, f=f)
    with popxl.Session(ir, "ipu_model") as session:
        session.run()
        got = session.get_tensor_data(tv)
    want = t.astype(np.float64).copy()
    scale = 1.0 if f is None else f
    for k, i in enumerate(idx):
        if 0 <= i < t.shape[axis]:
            if axis == 0:
                want[i] += scale * x[k]
            else:
                want[:, i] += scale * x[:, k]
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_copy_var_update(dtype):
    t = (rand((3, 2), np.float32) * 10).astype(dtype)
    x = (rand((3, 2), np.float32) * 10).astype(dtype)
    got_t, got_x = run_update(lambda a, b: vu.copy_var_update_(a, b), t, x)
    np.testing.assert_array_equal(got_t, x)
    np.testing.assert_array_equal(got_x, x)


# ------------------------------------------------------------------ adam family

def np_updater(m, v, w=None, step=None, wd=0.0, b1=None, b2=None, eps=1e-7, mode="adam"):
    m, v = m.astype(np.float64), v.astype(np.float64)
    if step is not None:
        step = step + 1
        m = m / (1 - b1 ** step)
        if mode != "adamax":
            v = v / (1 - b2 ** step)
    denom = v if mode == "adamax" else np.sqrt(v)
    x = m / (denom + eps)
    if wd:
        x = x + wd * w.astype(np.float64)
    return x, step


def run_updater(fn, m, v, w=None, step=None):
    ir = popxl.Ir()
    with ir.main_graph:
        mv = popxl.variable(m, name="m")
        vv = popxl.variable(v, name="v")
        wv = popxl.variable(w, name="w") if w is not None else None
        sv = popxl.variable(step, popxl.float32, name="step") if step is not None else None
        out = fn(mv, vv, wv, sv)
        s = popxl.d2h_stream(out.shape, out.dtype, name="out")
        ops.host_store(s, out)
    with popxl.Session(ir, "ipu_model") as session:
        res = session.run()[s]
        st = session.get_tensor_data(sv) if sv is not None else None
    return res, st


@pytest.mark.parametrize("updater,mode", [(vu.adam_updater, "adam"), (vu.lamb_updater, "lamb")])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adam_lamb_updater(updater, mode, bias, wd):
    m = rand((4, 5), np.float32)
    v = np.abs(rand((4, 5), np.float32))
    w = rand((4, 5), np.float32)
    step = np.float32(2.0) if bias else None

    def fn(mv, vv, wv, sv):
        return updater(mv, vv, weight=wv, time_step=sv, weight_decay=wd,
                       beta1=0.9 if bias else None, beta2=0.999 if bias else None, epsilon=1e-5)

    got, got_step = run_updater(fn, m, v, w, step)
    want, want_step = np_updater(m, v, w, step, wd, 0.9, 0.999, 1e-5, mode)
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-5, atol=1e-6)
    if bias:
        assert got_step == want_step == 3.0


def test_adam_updater_tensor_hyperparameters():
    m = rand((6,), np.float32)
    v = np.abs(rand((6,), np.float32))
    w = rand((6,), np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        mv, vv, wv = (popxl.variable(a, name=n) for a, n in ((m, "m"), (v, "v"), (w, "w")))
        step = popxl.variable(0.0, popxl.float32, name="step")
        wd = popxl.constant(0.2, popxl.float32, name="wd")
        b1 = popxl.variable(0.8, popxl.float32, name="b1")
        b2 = popxl.variable(0.99, popxl.float32, name="b2")
        eps = popxl.constant(1e-4, popxl.float32, name="eps")
        out = vu.adam_updater(mv, vv, wv, step, wd, b1, b2, eps)
        s = popxl.d2h_stream(out.shape, out.dtype, name="out")
        ops.host_store(s, out)
    with popxl.Session(ir, "ipu_model") as session:
        got1 = session.run()[s]
        got2 = session.run()[s]
        assert session.get_tensor_data(step) == 2.0
    b1f, b2f = float(np.float32(0.8)), float(np.float32(0.99))
    for got, t in ((got1, 0.0), (got2, 1.0)):
        want, _ = np_updater(m, v, w, t, float(np.float32(0.2)), b1f, b2f,
                             float(np.float32(1e-4)))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_adamax_updater():
    m = rand((3, 3), np.float32)
    v = np.abs(rand((3, 3), np.float32))
    w = rand((3, 3), np.float32)
    got, st = run_updater(lambda mv, vv, wv, sv: vu.adamax_updater(
        mv, vv, weight=wv, time_step=sv, weight_decay=0.05, beta1=0.8), m, v, w, np.float32(0))
    want, _ = np_updater(m, v, w, 0.0, 0.05, 0.8, None, 1e-7, "adamax")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert st == 1.0


def test_adam_updater_float16_moments():
    m = rand((8,), np.float16)
    v = np.abs(rand((8,), np.float32))
    got, _ = run_updater(lambda mv, vv, wv, sv: vu.adam_updater(mv, vv), m, v)
    assert got.dtype == np.float16
    want, _ = np_updater(m, v)
    np.testing.assert_allclose(got, want.astype(np.float16), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("r1,r2,mwn", [(4.0, 9.0, None), (4.0, 9.0, 1.5), (0.0, 9.0, 1.5),
                                       (4.0, 0.0, None), (16.0, 4.0, 0.0)])
@pytest.mark.parametrize("tensor_lr", [False, True])
def test_adam_var_update(r1, r2, mwn, tensor_lr):
    w = rand((3, 4), np.float32)
    x = rand((3, 4), np.float32)
    lr = 0.01
    ir = popxl.Ir()
    with ir.main_graph:
        wv = popxl.variable(w, name="w")
        xv = popxl.variable(x, name="x")
        r1t = popxl.constant(r1, popxl.float32, name="r1")
        r2t = popxl.constant(r2, popxl.float32, name="r2")
        lrv = popxl.variable(lr, popxl.float32, name="lr") if tensor_lr else lr
        out = vu.adam_var_update(wv, xv, r1t, r2t, lrv, mwn)
        assert out.producer.aliases == [(0, 0)]
    with popxl.Session(ir, "ipu_model") as session:
        session.run()
        got = session.get_tensor_data(wv)
    if r1 == 0 or r2 == 0 or mwn == 0:
        ratio = 1.0
    else:
        num = np.sqrt(r1) if mwn is None else min(np.sqrt(r1), mwn)
        ratio = num / np.sqrt(r2)
    lr32 = float(np.float32(lr))
    np.testing.assert_allclose(got, w - lr32 * ratio * x.astype(np.float64), rtol=1e-6, atol=1e-7)


def test_adam_training_step_against_numpy():
    # A full Adam step as in the PopXL optimizer tutorial: moments, updater,
    # scaled weight update, run for three steps.
    w0 = rand((4,), np.float32)
    g = rand((4,), np.float32)
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        w = popxl.variable(w0, name="w")
        grad = popxl.constant(g, name="g")
        m = popxl.variable(np.zeros(4, np.float32), name="m")
        v = popxl.variable(np.zeros(4, np.float32), name="v")
        step = popxl.variable(0.0, popxl.float32, name="step")
        vu.accumulate_moving_average_(m, grad, f=0.9)
        vu.accumulate_moving_average_square_(v, grad, f=0.999)
        upd = vu.adam_updater(m, v, time_step=step, beta1=0.9, beta2=0.999, epsilon=1e-8)
        zero = popxl.constant(0.0, popxl.float32, name="zero")
        vu.adam_var_update(w, upd, zero, zero, learning_rate=0.1)
    with popxl.Session(ir, "ipu_model") as session:
        for _ in range(3):
            session.run()
        got = session.get_tensor_data(w)
    wr, mr, vr = w0.astype(np.float64), np.zeros(4), np.zeros(4)
    for t in range(1, 4):
        mr = 0.9 * mr + 0.1 * g
        vr = 0.999 * vr + 0.001 * g * g
        wr = wr - 0.1 * (mr / (1 - 0.9 ** t)) / (np.sqrt(vr / (1 - 0.999 ** t)) + 1e-8)
    np.testing.assert_allclose(got, wr, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ graph structure

def test_graph_structure_as_popxl():
    ir = popxl.Ir()
    g = ir.main_graph
    with g:
        a = popxl.variable(1)
        b = popxl.constant(2)
        vu.accumulate_(a, b, 0.9)
        assert len(g.tensors) == 3 and len(g.variables) == 1
        m = popxl.variable(1, name="m")
        v = popxl.variable(2, name="v")
        t = popxl.variable(2, name="t")
        n0 = len(g.tensors)
        vu.adam_updater(m, v, time_step=t, beta1=0.9, beta2=0.99)
        assert len(g.tensors) == n0 + 1
        up = vu.adamax_updater(m, v, time_step=t)
        assert up.producer.type == "AdamUpdater" and 3 in up.producer.modified
        seeds = ops.split_random_seed(popxl.variable(np.zeros(2, np.uint32), popxl.uint32))
        assert len(seeds) == 2


# ------------------------------------------------------------------ bad inputs

def test_bad_inputs():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.zeros((2, 3), np.float32), name="a")
        b = popxl.variable(np.zeros((3, 2), np.float32), name="b")
        c = popxl.variable(np.zeros((2, 3), np.float32), name="c")
        flags = popxl.variable(np.zeros((2, 3), np.bool_), name="flags")
        i32 = popxl.variable(np.zeros((2, 3), np.int32), name="i32")
        fvec = popxl.variable(np.zeros((2,), np.float32), name="fvec")
        with pytest.raises(ValueError, match="accumulate_: X .* has shape"):
            vu.accumulate_(a, b)
        with pytest.raises(ValueError, match="does not broadcast"):
            vu.accumulate_moving_average_(a, popxl.variable(np.zeros((1, 3), np.float32)), 0.9)
        with pytest.raises(TypeError, match="accumulate_square_: .*bool"):
            vu.accumulate_square_(a, flags)
        with pytest.raises(ValueError, match="f .* must be a scalar tensor"):
            vu.accumulate_(a, c, fvec)
        with pytest.raises(TypeError, match="f must be a float or a scalar Tensor"):
            vu.accumulate_(a, c, "x")
        with pytest.raises(TypeError, match="accumulate_: argument 'X' must be a Tensor"):
            vu.accumulate_(a, np.zeros((2, 3)))
        with pytest.raises(TypeError, match="copy_var_update_: X .* has dtype int32"):
            vu.copy_var_update_(a, i32)
        with pytest.raises(ValueError, match="copy_var_update_: X .* has shape"):
            vu.copy_var_update_(a, b)
        with pytest.raises(ValueError, match="Weight decay requires weight to be not None."):
            vu.adam_updater(a, c, weight_decay=0.1)
        with pytest.raises(ValueError, match="Bias correction requires both beta1 and beta2"):
            vu.lamb_updater(a, c, time_step=popxl.variable(0.0), beta1=0.9)
        with pytest.raises(ValueError, match="AdaMax requires time_step not None."):
            vu.adamax_updater(a, c)
        with pytest.raises(ValueError, match="adam_updater: acc_second_order .* has shape"):
            vu.adam_updater(a, b)
        with pytest.raises(ValueError, match="adam_var_update: r1 .* must be a scalar"):
            vu.adam_var_update(a, c, fvec, popxl.constant(1.0), 0.1)
        with pytest.raises(ValueError, match="learning_rate is required"):
            vu.adam_var_update(a, c, popxl.constant(1.0), popxl.constant(1.0))
        with pytest.raises(ValueError, match="sparse_accumulate_: X .* expected"):
            vu.sparse_accumulate_(a, c, popxl.constant(np.array([0, 1, 1], np.int32)))
        with pytest.raises(TypeError, match="indices .* must have an integer dtype"):
            vu.sparse_accumulate_(a, c, popxl.constant(np.array([0.0, 1.0], np.float32)))
    with ir.main_graph:
        g = ir.create_graph(lambda x: x, a)
        with pytest.raises(ValueError, match="accumulate_: tensor .* is in graph"):
            vu.accumulate_(a, g.inputs[0])


def test_kernel_validates_ops_built_without_the_builders():
    # The C++ factories re-check what the builders check: a malformed op
    # fails when the session is created, never out of bounds at run time.
    from ipuxl.op import create_op
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.zeros((2, 3), np.float32), name="a")
        b = popxl.variable(np.zeros((3, 2), np.float32), name="b")
        create_op("Accumulate", [a, b], [("bad", a.shape, a.dtype)], {"mode": "add"})
    with pytest.raises(ValueError, match="Accumulate op .*no broadcasting"):
        popxl.Session(ir, "ipu_model")
    ir = popxl.Ir()
    with ir.main_graph:
        m = popxl.variable(np.zeros((2, 3), np.float32), name="m")
        create_op("AdamUpdater", [None, m, m, None], [("u", m.shape, m.dtype)], {"mode": "adam"})
    with pytest.raises(ValueError, match="needs the time step input"):
        popxl.Session(ir, "ipu_model")
