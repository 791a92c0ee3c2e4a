"""The popxl_addons ops that upstream builds from custom IPU codelets:
group_quantize_decompress (+ LinearGQ), static_sparse_ops, linear_layout,
rotary_pos_embed. Oracles: NumPy and PyTorch written here."""
import numpy as np
import pytest
import torch

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import transforms
from ipuxl.addons.layers.linear_gq import LinearGQ
from ipuxl.addons.ops.group_quantize_decompress import (group_quantize_compress_numpy,
                                                        group_quantize_decompress,
                                                        group_quantize_decompress_numpy)
from ipuxl.addons.ops.linear_layout import linear_layout
from ipuxl.addons.ops.rotary_pos_embed import rotary_pos_embed, trig_tables
from ipuxl.addons.ops.static_sparse_ops import dense_const_sparse_matmul, random_sparse
from ipuxl.addons.testing_utils import TensorInput, run_module
from harness import run_fn


def _run_vars(fn, *arrays, grads_for=(), seed_grad=None):
    """Run fn on variables; with grads_for, also the gradients of
    sum(out * seed_grad) for those input indices (ipuxl autodiff)."""
    ir = popxl.Ir()
    with ir.main_graph:
        xs = [popxl.variable(a, popxl.dtypes.dtype.as_dtype(np.asarray(a).dtype), name=f"x{i}",
                             downcast=False) for i, a in enumerate(arrays)]
        g = ir.create_graph(fn, *[x.spec for x in xs])
        info = ops.call_with_info(g, *xs)
        (y,) = info.outputs
        outs = [y]
        if grads_for:
            dg = transforms.autodiff(g, grads_required=[g.inputs[i] for i in grads_for])
            seed = popxl.constant(seed_grad, y.dtype)
            outs += list(ops.call(dg.graph, seed, inputs_dict=dg.inputs_dict(info)))
        streams = []
        for t in outs:
            s = popxl.d2h_stream(t.shape, t.dtype)
            ops.host_store(s, t)
            streams.append(s)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()
    return [got[s] for s in streams]


# --- group quantisation ---------------------------------------------------

def _unpack_reference(packed, scale, bias):
    """Independent NumPy decoding: ids from bits 15..12, 11..8, 7..4, 3..0."""
    rows, groups, ids = packed.shape
    out = np.empty((rows, groups, ids * 4), scale.dtype)
    for j, shift in enumerate((12, 8, 4, 0)):
        lvl = ((packed.astype(np.int64) >> shift) & 0xF).astype(scale.dtype)
        out[:, :, j::4] = lvl * scale + bias  # two roundings in scale's dtype, as the IPU map
    return out.reshape(rows, groups * ids * 4)


def _random_packed(rng, rows, groups, ids, dtype):
    packed = rng.integers(0, 2**16, size=(rows, groups, ids), dtype=np.uint16)
    scale = (rng.random((rows, groups, 1)) * 0.2 + 0.01).astype(dtype)
    bias = rng.standard_normal((rows, groups, 1)).astype(dtype)
    return packed, scale, bias


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("shape", [(3, 2, 4), (16, 8, 16), (1, 1, 1)])
def test_group_quantize_decompress_matches_numpy(dtype, shape):
    rng = np.random.default_rng(7)
    packed, scale, bias = _random_packed(rng, *shape, dtype)
    out = run_fn(lambda t, s, b: group_quantize_decompress(t, s, b), packed, scale, bias)
    want = _unpack_reference(packed, scale, bias)
    assert out.dtype == dtype and out.shape == want.shape
    np.testing.assert_array_equal(out, want)


def test_group_quantize_decompress_rank2_scale_and_dim0():
    rng = np.random.default_rng(3)
    packed, scale, bias = _random_packed(rng, 4, 3, 2, np.float16)
    out = run_fn(lambda t, s, b: group_quantize_decompress(t, s, b, dim=0),
                 packed, scale[..., 0], bias[..., 0])
    np.testing.assert_array_equal(out, _unpack_reference(packed, scale, bias).T)


def test_group_quantize_numpy_round_trip():
    rng = np.random.default_rng(5)
    t = rng.standard_normal((6, 32)).astype(np.float16)
    packed, scale, bias = group_quantize_compress_numpy(t, 8, dim=-1)
    assert packed.shape == (6, 4, 2) and packed.dtype == np.uint16
    assert scale.shape == bias.shape == (6, 4, 1)
    rec = _unpack_reference(packed, scale, bias)
    # nearest of 16 levels: within half a step (plus float16 rounding)
    step = np.repeat(scale.reshape(6, 4), 8, axis=1).astype(np.float32)
    assert np.all(np.abs(rec.astype(np.float32) - t) <= step / 2 + 2e-3)
    np.testing.assert_array_equal(group_quantize_decompress_numpy(packed, scale, bias), rec)
    # dim=0 groups along the first axis: (8, 32) -> packed (32, 2, 1)
    t8 = rng.standard_normal((8, 32)).astype(np.float16)
    packed0, scale0, bias0 = group_quantize_compress_numpy(t8, 4, dim=0)
    assert packed0.shape == (32, 2, 1)
    rec0 = group_quantize_decompress_numpy(packed0, scale0, bias0, dim=0)
    np.testing.assert_array_equal(rec0, _unpack_reference(packed0, scale0, bias0).T)
    step0 = np.repeat(scale0.reshape(32, 2), 4, axis=1).T.astype(np.float32)
    assert np.all(np.abs(rec0.astype(np.float32) - t8) <= step0 / 2 + 2e-3)
    with pytest.raises(ValueError, match="non-finite"):
        bad = t.copy()
        bad[0, 0] = np.inf
        group_quantize_compress_numpy(bad, 8)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float16, 2e-2)])
def test_group_quantize_decompress_gradients_match_torch(dtype, tol):
    rng = np.random.default_rng(11)
    packed, scale, bias = _random_packed(rng, 3, 2, 4, dtype)
    seed = rng.standard_normal((3, 32)).astype(dtype)
    y, d_scale, d_bias = _run_vars(lambda t, s, b: group_quantize_decompress(t, s, b),
                                   packed, scale, bias, grads_for=(1, 2), seed_grad=seed)
    ids = torch.tensor(np.stack([(packed.astype(np.int64) >> s) & 15 for s in (12, 8, 4, 0)],
                                -1).reshape(3, 2, 16), dtype=torch.float64)
    ts = torch.tensor(scale, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(bias, dtype=torch.float64, requires_grad=True)
    ty = (ids * ts + tb).reshape(3, 32)
    (ty * torch.tensor(seed, dtype=torch.float64)).sum().backward()
    assert d_scale.dtype == d_bias.dtype == dtype
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=tol / 10, atol=tol / 10)
    np.testing.assert_allclose(d_scale, ts.grad.numpy(), rtol=tol, atol=tol * 10)
    np.testing.assert_allclose(d_bias, tb.grad.numpy(), rtol=tol, atol=tol)


def test_group_quantize_decompress_errors():
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(np.zeros((2, 3, 4), np.uint16), popxl.uint16)
        s = popxl.variable(np.zeros((2, 3, 1), np.float16), popxl.float16)
        with pytest.raises(NotImplementedError, match="rank 3"):
            group_quantize_decompress(popxl.variable(np.zeros((2, 3), np.uint16), popxl.uint16), s, s)
        with pytest.raises(ValueError, match="group_scale"):
            group_quantize_decompress(t, popxl.variable(np.zeros((2, 2, 1), np.float16)), s)
        with pytest.raises(TypeError, match="GroupQuantizeDecompress.*uint16"):
            group_quantize_decompress(popxl.variable(np.zeros((2, 3, 4), np.int32), popxl.int32), s, s)
        with pytest.raises(TypeError, match="same dtype"):
            group_quantize_decompress(t, s, popxl.variable(np.zeros((2, 3, 1), np.float32)))


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", [popxl.float16, popxl.float32])
def test_linear_gq_matches_torch_on_the_dequantised_weight(dim, dtype):
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    layer = torch.nn.Linear(32, 24)
    x = rng.random((5, 32)).astype(dtype.as_numpy())
    packed, scale, bias = group_quantize_compress_numpy(layer.weight.T.detach().numpy(), 8, dim=dim)
    scale, bias = scale.astype(dtype.as_numpy()), bias.astype(dtype.as_numpy())
    # the reference: the dequantised weight (in, out), decoded here
    if dim == -1:
        w = _unpack_reference(packed, scale, bias)               # (in, out)
    else:
        w = _unpack_reference(packed, scale, bias).T             # (out, in) -> (in, out)
    want = x.astype(np.float64) @ w.astype(np.float64) + layer.bias.detach().numpy()

    def weights(variables):
        d = LinearGQ.torch_mapping(variables, layer, dtype=dtype, group_size=8, dim=dim)
        d[variables.weight_decompression_scale] = scale
        d[variables.weight_decompression_bias] = bias
        return d

    (out,) = run_module(LinearGQ(24, group_size=8, dim=dim), TensorInput(x), weights=weights)
    tol = 2e-2 if dtype == popxl.float16 else 1e-4
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol)


def test_linear_gq_rejects_bad_group_size():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros((2, 8), np.float16))
        with pytest.raises(ValueError, match="group_size"):
            LinearGQ(12, group_size=8).create_graph(x)


# --- static sparse matmul --------------------------------------------------

def _csr(dense):
    from scipy.sparse import csr_matrix
    return csr_matrix(dense)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float16, 2e-2)])
@pytest.mark.parametrize("lhs_shape,n", [((2, 3), 4), ((1, 5, 7), 6), ((2, 3, 4, 8), 5), ((3, 4), 0)])
def test_dense_const_sparse_matmul_matches_numpy(dtype, tol, lhs_shape, n):
    rng = np.random.default_rng(2)
    lhs = rng.standard_normal(lhs_shape).astype(dtype)
    rhs = rng.standard_normal((lhs_shape[-1], n)).astype(np.float32)
    rhs[rng.random(rhs.shape) < 0.6] = 0
    out = run_fn(lambda a: dense_const_sparse_matmul(a, _csr(rhs), n), lhs)
    want = lhs.astype(np.float64) @ rhs.astype(dtype).astype(np.float64)
    assert out.dtype == dtype and out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float16, 2e-2)])
def test_dense_const_sparse_matmul_gradient_matches_torch(dtype, tol):
    rng = np.random.default_rng(4)
    lhs = rng.standard_normal((2, 3, 6)).astype(dtype)
    rhs = rng.standard_normal((6, 5))
    rhs[rng.random(rhs.shape) < 0.5] = 0
    rhs = rhs.astype(np.float32)
    seed = rng.standard_normal((2, 3, 5)).astype(dtype)
    y, dx = _run_vars(lambda a: dense_const_sparse_matmul(a, _csr(rhs), 5), lhs,
                      grads_for=(0,), seed_grad=seed)
    ta = torch.tensor(lhs, dtype=torch.float64, requires_grad=True)
    ty = ta @ torch.tensor(rhs.astype(dtype), dtype=torch.float64)
    (ty * torch.tensor(seed, dtype=torch.float64)).sum().backward()
    assert dx.dtype == dtype
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(dx, ta.grad.numpy(), rtol=tol, atol=tol)


def test_dense_const_sparse_matmul_errors_and_random_sparse():
    np.random.seed(0)
    m = random_sparse(np.ones((20, 20)), density=0.3)
    assert 0 < np.count_nonzero(m) < 400
    assert np.count_nonzero(random_sparse(np.ones((2, 2)), density=0.0)) == 1
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.zeros((2, 3), np.float32))
        with pytest.raises(ValueError, match="3 columns but the sparse matrix has 4 rows"):
            dense_const_sparse_matmul(a, _csr(np.ones((4, 2), np.float32)), 2)
        with pytest.raises(ValueError, match="column index"):
            dense_const_sparse_matmul(a, _csr(np.ones((3, 4), np.float32)), 2)
        with pytest.raises(RuntimeError, match="not currently supported"):
            dense_const_sparse_matmul(popxl.variable(np.zeros((2, 3), np.int32)),
                                      _csr(np.ones((3, 2), np.float32)), 2)


# --- linear_layout ---------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32])
def test_linear_layout_copies_values(dtype):
    x = (np.arange(1000) % 97).reshape(10, 100).astype(dtype)
    out = run_fn(lambda t: linear_layout(t + 1, 4), x)
    np.testing.assert_array_equal(out, x + 1)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_linear_layout_gradient_is_identity(dtype):
    x = np.linspace(-1, 1, 12).reshape(3, 4).astype(dtype)
    seed = np.arange(12).reshape(3, 4).astype(dtype)
    y, dx = _run_vars(lambda t: linear_layout(t * 2), x, grads_for=(0,), seed_grad=seed)
    np.testing.assert_allclose(y, 2 * x)
    np.testing.assert_allclose(dx, 2 * seed)
    ir = popxl.Ir()
    with ir.main_graph:
        with pytest.raises(ValueError, match="bs"):
            linear_layout(popxl.variable(x), 0)


# --- rotary positional embeddings -----------------------------------------

def _rope_torch(q, sin, cos, rotary_dim):
    """GPT-J's rotate_every_two with duplicated tables, written out."""
    sin = torch.repeat_interleave(sin, 2, dim=-1)[:, :, None, :]   # (b|1, seq, 1, r)
    cos = torch.repeat_interleave(cos, 2, dim=-1)[:, :, None, :]
    rot, rest = q[..., :rotary_dim], q[..., rotary_dim:]
    x1, x2 = rot[..., ::2], rot[..., 1::2]
    turned = torch.stack((-x2, x1), dim=-1).flatten(-2)
    return torch.cat([rot * cos + turned * sin, rest], dim=-1)


@pytest.mark.parametrize("rotary_dim", [None, 4, 16])
@pytest.mark.parametrize("batch_tables", [False, True])
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float16, 3e-2)])
def test_rotary_pos_embed_matches_torch_value_and_gradients(rotary_dim, batch_tables, dtype, tol):
    rng = np.random.default_rng(6)
    b, s, h, d = 3, 5, 2, 16
    r = rotary_dim or d
    q = rng.standard_normal((b, s, h, d)).astype(dtype)
    sin, cos = trig_tables(s, r)
    sin, cos = sin[None].astype(dtype), cos[None].astype(dtype)
    if batch_tables:
        sin = (np.repeat(sin, b, 0) * rng.uniform(0.5, 1.5, (b, 1, 1))).astype(dtype)
        cos = np.repeat(cos, b, 0)
    seed = rng.standard_normal(q.shape).astype(dtype)
    y, dq, dsin, dcos = _run_vars(lambda t, sn, cs: rotary_pos_embed(t, sn, cs, rotary_dim),
                                  q, sin, cos, grads_for=(0, 1, 2), seed_grad=seed)
    tq, ts, tc = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, sin, cos))
    ty = _rope_torch(tq, ts, tc, r)
    (ty * torch.tensor(seed, dtype=torch.float64)).sum().backward()
    assert y.dtype == dq.dtype == dsin.dtype == dcos.dtype == dtype
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(dq, tq.grad.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(dsin, ts.grad.numpy(), rtol=10 * tol, atol=10 * tol)
    np.testing.assert_allclose(dcos, tc.grad.numpy(), rtol=10 * tol, atol=10 * tol)


def test_rotary_pos_embed_float16_and_second_order():
    rng = np.random.default_rng(8)
    q = rng.standard_normal((2, 4, 3, 8)).astype(np.float16)
    sin, cos = trig_tables(4, 8, np_dtype="float16")
    out = run_fn(lambda t, sn, cs: rotary_pos_embed(t, sn, cs), q, sin, cos)
    want = _rope_torch(torch.tensor(q, dtype=torch.float64), torch.tensor(sin[None], dtype=torch.float64),
                       torch.tensor(cos[None], dtype=torch.float64), 8).numpy()
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=5e-3, atol=5e-3)
    # the gradient of the gradient: the adjoint's rule is the forward op
    from ipuxl.testing import check_grads
    sin32, cos32 = trig_tables(4, 4)
    check_grads(lambda t, sn, cs: rotary_pos_embed(t, sn, cs, 4),
                [rng.standard_normal((1, 4, 2, 6)), sin32.astype(np.float64), cos32.astype(np.float64)],
                order=2)


def test_rotary_pos_embed_errors():
    ir = popxl.Ir()
    with ir.main_graph:
        q = popxl.variable(np.zeros((1, 4, 2, 8), np.float32))
        sin, cos = (popxl.variable(a.astype(np.float32)) for a in trig_tables(4, 8))
        with pytest.raises(ValueError, match="rank 4"):
            rotary_pos_embed(popxl.variable(np.zeros((4, 2, 8), np.float32)), sin, cos)
        with pytest.raises(ValueError, match="rotary_dim"):
            rotary_pos_embed(q, sin, cos, 3)
        with pytest.raises(ValueError, match="sin"):
            rotary_pos_embed(q, sin, cos, 4)


def test_custom_op_types_are_declared_with_kernels_and_gradient_rules():
    from ipuxl import grad
    from ipuxl._core_loader import core
    from ipuxl.opdef import get_opdef

    import ipuxl.addons.ops.cross_entropy_sharded_wr_loss  # noqa: F401  (declares its op)

    for t in ("GroupQuantizeDecompress", "SparseMatMul", "LinearLayout", "RotaryPosEmbed",
              "RotaryPosEmbedGrad", "CrossEntropyShardedWR"):
        d = get_opdef(t)
        assert d.module.startswith("ipuxl.addons.ops."), (t, d.module)
        assert d.kernel in core.kernel_names(), t
        assert t in grad.registered_op_types(), t


# --- cross-entropy sharded over the IPUs of a replica ----------------------

@pytest.mark.slow  # a large sharded loss
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-6), (np.float16, 1e-2)])
@pytest.mark.parametrize("n_ipus", [1, 3])
def test_cross_entropy_sharded_wr_loss_matches_torch(dtype, tol, n_ipus):
    from ipuxl import addons
    from ipuxl.addons.ops.cross_entropy_sharded_wr_loss import cross_entropy_sharded_wr_loss

    rng = np.random.default_rng(9)
    n, vocab = 7, 23                      # uneven shards
    sizes = [vocab // n_ipus + int(i < vocab % n_ipus) for i in range(n_ipus)]
    labels = rng.integers(0, vocab, n).astype(np.uint32)
    logits = [rng.standard_normal((n, c)).astype(dtype) * 3 for c in sizes]
    dloss = rng.random(n).astype(dtype)

    tl = torch.tensor(np.concatenate(logits, -1), dtype=torch.float64, requires_grad=True)
    want = torch.nn.functional.cross_entropy(tl, torch.tensor(labels.astype(np.int64)),
                                             reduction="none")
    want.backward(torch.tensor(dloss, dtype=torch.float64))

    ir = popxl.Ir()
    with ir.main_graph:
        xs, ls = [], []
        for i in range(n_ipus):
            with popxl.ipu(i):
                xs.append(popxl.variable(logits[i], popxl.dtypes.dtype.as_dtype(dtype)) + 0)
                ls.append(popxl.variable(labels, popxl.uint32) + 0)
        with popxl.ipu(0):
            g = popxl.variable(dloss, popxl.dtypes.dtype.as_dtype(dtype)) + 0

        class Loss(addons.Module):
            def build(self, logits, labels, ipus):
                return cross_entropy_sharded_wr_loss(logits, labels, ipus=ipus)

        _, graph = Loss().create_graph(xs, ls, ipus=list(range(n_ipus)))
        dgraph = addons.autodiff(graph, grads_provided=[graph.graph.outputs[0]],
                                 grads_required=graph.graph.inputs[:n_ipus])
        call = graph.call_with_info(xs, ls)
        streams = [addons.host_store(call.outputs[0])]
        grads = dgraph.call(g, args=dgraph.grad_graph_info.inputs_dict(call))
        for i in range(n_ipus):
            with popxl.ipu(i):
                streams.append(addons.host_store(grads[i]))
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()
    got = [out[s] for s in streams]
    assert got[0].dtype == dtype
    np.testing.assert_allclose(got[0], want.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(np.concatenate(got[1:], -1), tl.grad.numpy(), rtol=tol, atol=tol)


def test_cross_entropy_sharded_wr_loss_errors():
    from ipuxl.addons.ops.cross_entropy_sharded_wr_loss import cross_entropy_sharded_wr_loss

    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros((4, 3), np.float32))
        lab = popxl.variable(np.zeros(4, np.int32))
        with pytest.raises(ValueError, match="same number"):
            cross_entropy_sharded_wr_loss([x, x], [lab], ipus=[0, 0])
        with pytest.raises(ValueError, match="Number of specified tensor"):
            cross_entropy_sharded_wr_loss([x], [lab], ipus=[0, 1])
        with pytest.raises(TypeError, match="CrossEntropyShardedWR.*integers"):
            cross_entropy_sharded_wr_loss([x], [popxl.variable(np.zeros(4, np.float32))], ipus=[0])
    # a label outside every shard is a run-time error naming the op
    ir = popxl.Ir()
    with ir.main_graph:
        loss = cross_entropy_sharded_wr_loss([popxl.variable(np.zeros((2, 3), np.float32))],
                                             [popxl.variable(np.array([0, 5], np.int32))], ipus=[0])
        s = popxl.d2h_stream(loss.shape, loss.dtype)
        ops.host_store(s, loss)
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.raises(RuntimeError, match="cross_entropy_sharded_wr.*label 5"):
            sess.run()
