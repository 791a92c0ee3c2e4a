"""Random ops: distribution statistics, determinism for equal seeds,
differences for different seeds, dropout keep ratio and scaling, shaped
dropout masks, split_random_seed, and bad inputs."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops


def run_with_seed(fn, seed, *arrays):
    """fn(seed_tensor, *loaded) -> tensor or tuple; returns numpy output(s)."""
    ir = popxl.Ir()
    with ir.main_graph:
        ss = popxl.h2d_stream((2,), popxl.uint32, name="seed")
        seed_t = ops.host_load(ss, "seed")
        feeds = {ss: np.asarray(seed, np.uint32)}
        loaded = []
        for i, a in enumerate(arrays):
            s = popxl.h2d_stream(a.shape, popxl.dtypes.dtype.as_dtype(a.dtype), name=f"in{i}")
            feeds[s] = a
            loaded.append(ops.host_load(s, f"in{i}"))
        res = fn(seed_t, *loaded)
        outs = [res] if isinstance(res, popxl.Tensor) else list(res)
        streams = []
        for j, t in enumerate(outs):
            d = popxl.d2h_stream(t.shape, t.dtype, name=f"out{j}")
            ops.host_store(d, t)
            streams.append(d)
    with popxl.Session(ir, "ipu_model") as session:
        got = session.run(feeds)
    vals = [got[s] for s in streams]
    return vals[0] if isinstance(res, popxl.Tensor) else vals


SEED = popxl.create_seeds(42)
SEED2 = popxl.create_seeds(43)


@pytest.mark.parametrize("dtype,np_dtype", [(popxl.float32, np.float32),
                                            (popxl.float16, np.float16),
                                            (popxl.float64, np.float64)])
def test_random_uniform_statistics(dtype, np_dtype):
    n = 200_000
    low, high = -2.0, 3.0
    x = run_with_seed(lambda s: ops.random_uniform(s, (n,), low, high, dtype), SEED)
    assert x.dtype == np_dtype and x.shape == (n,)
    assert x.min() >= low and x.max() < high
    x = x.astype(np.float64)
    # mean (high+low)/2, std (high-low)/sqrt(12); 5-sigma tolerances.
    assert abs(x.mean() - 0.5) < 5 * (5 / np.sqrt(12)) / np.sqrt(n)
    assert abs(x.std() - 5 / np.sqrt(12)) < 0.01
    hist, _ = np.histogram(x, bins=10, range=(low, high))
    assert np.all(np.abs(hist / n - 0.1) < 0.005)


def test_random_uniform_defaults_and_shape():
    x = run_with_seed(lambda s: ops.random_uniform(s, (3, 4, 5)), SEED)
    assert x.shape == (3, 4, 5) and x.dtype == np.float32
    assert x.min() >= 0.0 and x.max() < 1.0
    # Scalars, empty tensors and a degenerate range.
    s, e, c = run_with_seed(lambda s: (ops.random_uniform(s, ()), ops.random_uniform(s, (0, 3)),
                                       ops.random_uniform(s, (4,), 2.0, 2.0)), SEED)
    assert s.shape == () and 0 <= s < 1 and e.shape == (0, 3)
    np.testing.assert_array_equal(c, np.full(4, 2.0, np.float32))


@pytest.mark.parametrize("dtype,np_dtype", [(popxl.float32, np.float32),
                                            (popxl.float16, np.float16)])
def test_random_normal_statistics(dtype, np_dtype):
    n = 200_000
    x = run_with_seed(lambda s: ops.random_normal(s, (n,), 1.5, 2.0, dtype), SEED)
    assert x.dtype == np_dtype
    x = x.astype(np.float64)
    assert abs(x.mean() - 1.5) < 5 * 2.0 / np.sqrt(n)
    assert abs(x.std() - 2.0) < 0.02
    z = (x - 1.5) / 2.0
    # Standard-normal tail masses and moments.
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) < 0.005
    assert abs(np.mean(np.abs(z) < 2) - 0.9545) < 0.003
    assert abs(np.mean(z ** 3)) < 0.05
    assert abs(np.mean(z ** 4) - 3.0) < 0.1


def test_same_seed_same_numbers_different_seed_differs():
    def fn(s):
        return (ops.random_uniform(s, (1000,)), ops.random_normal(s, (1000,)))
    u1, n1 = run_with_seed(fn, SEED)
    u2, n2 = run_with_seed(fn, SEED)
    u3, n3 = run_with_seed(fn, SEED2)
    np.testing.assert_array_equal(u1, u2)
    np.testing.assert_array_equal(n1, n2)
    assert np.mean(u1 == u3) < 0.01 and np.mean(n1 == n3) < 0.01
    # Uniform and normal draws are not the same stream.
    assert abs(np.corrcoef(u1, n1)[0, 1]) < 0.1
    # Independence across positions: lag-1 correlation is tiny.
    assert abs(np.corrcoef(u1[:-1], u1[1:])[0, 1]) < 0.1


def test_known_values_are_stable():
    # Pins the generator: changing it would change every seeded program.
    got = run_with_seed(lambda s: ops.random_uniform(s, (4,)), np.array([0, 0], np.uint32))
    words = np.array([0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8], np.float64)
    want = ((words / 2.0 ** 32)).astype(np.float32)  # Philox4x32-10 known answer, key 0
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-7)


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("np_dtype", [np.float32, np.float16])
def test_dropout_keep_ratio_and_scale(p, np_dtype):
    n = 100_000
    x = (np.random.default_rng(0).uniform(0.5, 1.5, n)).astype(np_dtype)
    y = run_with_seed(lambda s, t: ops.dropout(t, s, p), SEED, x)
    assert y.dtype == np_dtype and y.shape == x.shape
    kept = y != 0
    assert abs(kept.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n) + 1e-9
    want = (x / np_dtype(1 - p)).astype(np_dtype)
    rtol = 1e-6 if np_dtype == np.float32 else 1e-3
    np.testing.assert_allclose(y[kept], want[kept], rtol=rtol)


def test_dropout_deterministic_and_seed_dependent():
    x = np.ones((64, 64), np.float32)
    a = run_with_seed(lambda s, t: ops.dropout(t, s, 0.5), SEED, x)
    b = run_with_seed(lambda s, t: ops.dropout(t, s, 0.5), SEED, x)
    c = run_with_seed(lambda s, t: ops.dropout(t, s, 0.5), SEED2, x)
    np.testing.assert_array_equal(a, b)
    assert np.mean((a == 0) != (c == 0)) > 0.3


def test_shaped_dropout_as_popxl_test():
    # Mirrors PopXL's integration test: mask of shape (8, 1) over (8, 2).
    t = np.random.default_rng(10).random((8, 2)).astype(np.float32)
    ratio = 0.5
    out = run_with_seed(lambda s, a: ops.shaped_dropout(a, s, [8, 1], ratio),
                        popxl.create_seeds(10), t)
    ref = t / (1.0 - ratio)
    ref[out == 0] = 0
    np.testing.assert_allclose(out, ref, rtol=0, atol=0)
    # Whole rows are dropped or kept together.
    assert np.all((out[:, 0] == 0) == (out[:, 1] == 0))


def test_shaped_dropout_broadcast_statistics():
    x = np.ones((4, 500, 6), np.float32)
    y = run_with_seed(lambda s, a: ops.shaped_dropout(a, s, (500, 1), 0.3), SEED, x)
    row_kept = y[..., 0] != 0
    # Same mask for every leading index and along the last axis.
    assert np.all(row_kept == row_kept[0])
    assert np.all((y != 0) == row_kept[..., None])
    assert abs(row_kept[0].mean() - 0.7) < 0.1


def test_split_random_seed():
    def fn(s):
        a, b, c = ops.split_random_seed(s, 3)
        return (a, b, c, ops.random_uniform(a, (100,)), ops.random_uniform(b, (100,)))
    a, b, c, ua, ub = run_with_seed(fn, SEED)
    a2, *_ = run_with_seed(fn, SEED)
    a3, *_ = run_with_seed(fn, SEED2)
    assert a.dtype == np.uint32 and a.shape == (2,)
    seeds = {tuple(a), tuple(b), tuple(c), tuple(SEED)}
    assert len(seeds) == 4
    np.testing.assert_array_equal(a, a2)
    assert tuple(a) != tuple(a3)
    assert not np.array_equal(ua, ub)


def test_seed_arithmetic_as_popxl_random_seed_test():
    # `seed + 1` on a uint32 seed tensor gives another valid seed.
    x = np.ones((1000,), np.float32)
    y1, y2 = run_with_seed(lambda s, t: (ops.dropout(t, s + 1, 0.1), ops.dropout(t, s + 2, 0.7)),
                           SEED, x)
    assert abs((y1 != 0).mean() - 0.9) < 0.05 and abs((y2 != 0).mean() - 0.3) < 0.05


def test_graph_structure():
    ir = popxl.Ir()
    g = ir.main_graph
    with g:
        seed = popxl.variable(SEED, popxl.uint32, name="seed")
        x = popxl.variable(np.zeros((2, 3), np.float32), name="x")
        y = ops.dropout(x, seed, 0.1)
        assert y.producer.type == "Dropout" and y.shape == x.shape
        n = len(g.tensors)
        seeds = ops.split_random_seed(seed, 3)
        assert len(seeds) == 3 and len(g.tensors) == n + 6  # 3 modifiers + 3 seeds
        assert all(s.producer.type == "ModifyRandomSeed" for s in seeds)
        u = ops.random_uniform(seed, [2, 2], dtype=popxl.float16)
        assert u.dtype == popxl.float16 and u.shape == (2, 2)


def test_bad_inputs():
    ir = popxl.Ir()
    with ir.main_graph:
        seed = popxl.variable(SEED, popxl.uint32, name="seed")
        bad_dtype = popxl.variable(np.zeros(2, np.int32), name="bad_dtype")
        bad_shape = popxl.variable(np.zeros(3, np.uint32), popxl.uint32, name="bad_shape")
        x = popxl.variable(np.zeros((2, 3), np.float32), name="x")
        xi = popxl.variable(np.zeros((2, 3), np.int32), name="xi")
        with pytest.raises(ValueError, match="random_uniform: seed_tensor .* uint32 of shape"):
            ops.random_uniform(bad_dtype, (2,))
        with pytest.raises(ValueError, match="random_normal: seed_tensor .* uint32 of shape"):
            ops.random_normal(bad_shape, (2,))
        with pytest.raises(ValueError, match="low .* must not exceed high"):
            ops.random_uniform(seed, (2,), 1.0, 0.0)
        with pytest.raises(ValueError, match="std must be >= 0"):
            ops.random_normal(seed, (2,), 0.0, -1.0)
        with pytest.raises(ValueError, match="negative dimension"):
            ops.random_uniform(seed, (2, -1))
        with pytest.raises(TypeError, match="dtype must be one of float16"):
            ops.random_uniform(seed, (2,), dtype=popxl.int32)
        with pytest.raises(TypeError, match="shape must be a sequence of ints"):
            ops.random_normal(seed, (2.5,))
        with pytest.raises(ValueError, match=r"dropout: p must be in \[0, 1\)"):
            ops.dropout(x, seed, 1.0)
        with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
            ops.dropout(x, seed, -0.1)
        with pytest.raises(TypeError, match="dropout: tensor 'xi' has dtype int32"):
            ops.dropout(xi, seed, 0.5)
        with pytest.raises(TypeError, match="dropout: argument 'seed_tensor' must be a Tensor"):
            ops.dropout(x, SEED, 0.5)
        with pytest.raises(ValueError, match="shaped_dropout: the mask shape .* does not"):
            ops.shaped_dropout(x, seed, (4, 1), 0.5)
        with pytest.raises(ValueError, match="shaped_dropout: ratio must be in"):
            ops.shaped_dropout(x, seed, (2, 1), 1.5)
        with pytest.raises(ValueError, match="split_random_seed: n must be >= 1"):
            ops.split_random_seed(seed, 0)
        with pytest.raises(ValueError, match="seed Tensor must be shape=\\(2,\\) dtype=uint32"):
            ops.create_random_seed(bad_dtype, popxl.constant(0, popxl.uint32))


def test_kernel_validates_ops_built_without_the_builders():
    from ipuxl.op import create_op
    ir = popxl.Ir()
    with ir.main_graph:
        seed = popxl.variable(np.zeros(3, np.uint32), popxl.uint32, name="seed")
        create_op("RandomUniform", [seed], [("u", (2,), popxl.float32)],
                  {"low": 0.0, "high": 1.0, "shape": [2], "_dtype": popxl.float32})
    with pytest.raises(ValueError, match="RandomUniform op .*uint32 of shape"):
        popxl.Session(ir, "ipu_model")
    ir = popxl.Ir()
    with ir.main_graph:
        seed = popxl.variable(SEED, popxl.uint32, name="seed")
        x = popxl.variable(np.zeros(4, np.float32), name="x")
        create_op("Dropout", [x, seed], [("d", (4,), popxl.float32)], {"ratio": 1.0})
    with pytest.raises(ValueError, match=r"ratio .* is not in \[0, 1\)"):
        popxl.Session(ir, "ipu_model")


@pytest.mark.parametrize("shaped", [False, True])
def test_dropout_gradient_reuses_the_mask(shaped):
    x = np.random.default_rng(3).uniform(1, 2, (6, 8)).astype(np.float32)

    def module(t, seed):
        if shaped:
            return ops.shaped_dropout(t, seed, (6, 1), 0.4)
        return ops.dropout(t, seed, 0.4)

    ir = popxl.Ir()
    with ir.main_graph:
        xv = popxl.variable(x, name="x")
        seed = popxl.variable(SEED, popxl.uint32, name="seed")
        graph = ir.create_graph(module, xv, seed)
        dgraph = popxl.transforms.autodiff(graph, grads_required=[graph.inputs[0]])
        info = ops.call_with_info(graph, xv, seed)
        y, = info.outputs
        gy = popxl.constant(np.ones_like(x), name="gy")
        (dx,) = ops.call(dgraph.graph, gy, inputs_dict=dgraph.inputs_dict(info))
        streams = []
        for t, n in ((y, "y"), (dx, "dx")):
            s = popxl.d2h_stream(t.shape, t.dtype, name=n)
            ops.host_store(s, t)
            streams.append(s)
    with popxl.Session(ir, "ipu_model") as session:
        out = session.run()
    yv, dxv = out[streams[0]], out[streams[1]]
    kept = yv != 0
    np.testing.assert_array_equal(dxv != 0, kept)
    np.testing.assert_allclose(dxv[kept], np.float32(1) / np.float32(0.6), rtol=1e-6)
