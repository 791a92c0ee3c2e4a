"""addons.array_munging against element-wise formulas and PyTorch's
chunk/cat (independent of how the helpers are written), plus the examples
of popxl_addons' documentation."""
import numpy as np
import pytest
import torch

import ipuxl.addons as addons
from ipuxl.addons import array_munging as am


def _block(x, axis, k, n):
    """The k-th of n equal blocks of x along axis, by explicit indices."""
    m = x.shape[axis] // n
    return np.take(x, range(k * m, (k + 1) * m), axis=axis)


@pytest.mark.parametrize("shape,n,axis", [((4, 2), 2, 0), ((4, 2), 2, -2), ((4, 2), 2, 1),
                                          ((3, 6, 5), 3, 1), ((3, 6, 4), 4, -1)])
def test_shard_is_torch_chunk_stacked(shape, n, axis):
    x = np.random.default_rng(0).normal(size=shape)
    out = am.shard(x, n, axis)
    want = torch.stack(torch.chunk(torch.from_numpy(x), n, dim=axis)).numpy()
    np.testing.assert_array_equal(out, want)
    for k in range(n):
        np.testing.assert_array_equal(out[k], _block(x, axis, k, n))


def test_shard_documented_example():
    # popxl_addons' docstring: arange(8).reshape(4, 2) sharded 2 ways on axis 1
    out = am.shard(np.arange(8).reshape(4, 2), 2, 1)
    np.testing.assert_array_equal(out, [[[0], [2], [4], [6]], [[1], [3], [5], [7]]])


@pytest.mark.parametrize("axis", [2, -1, 0])
def test_unshard_inverts_shard(axis):
    x = np.random.default_rng(1).normal(size=(10, 3, 4))
    n = 2
    s = am.shard(x, n, axis)
    np.testing.assert_array_equal(am.unshard(s, axis), x)
    parts = [s[i:i + 1] for i in range(n)]
    np.testing.assert_array_equal(am.unshard_arrays(parts, axis), x)
    torch_cat = torch.cat([torch.from_numpy(p[0]) for p in parts], dim=axis).numpy()
    np.testing.assert_array_equal(am.unshard_arrays(parts, axis), torch_cat)


def test_unshard_arrays_rejects_mixed_ranks():
    with pytest.raises(ValueError):
        am.unshard_arrays([np.zeros((1, 2)), np.zeros((1, 2, 1))], 0)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_repeat_inserts_an_axis_of_copies(axis):
    x = np.arange(6).reshape(2, 3)
    out = am.repeat(x, 3, axis)
    assert out.ndim == 3 and out.shape[axis] == 3
    for i in range(3):
        np.testing.assert_array_equal(np.take(out, i, axis=axis), x)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_repeat_axis_is_tile(axis):
    x = np.arange(6).reshape(2, 3)
    reps = [1, 1]
    reps[axis] = 2
    np.testing.assert_array_equal(am.repeat_axis(x, 2, axis), np.tile(x, reps))


@pytest.mark.parametrize("n_1,n_2,a_1,a_2", [(2, 2, 0, 1), (2, 2, -2, -1), (2, 2, 1, 0),
                                             (2, 4, 0, 2), (3, 2, 0, 1), (2, 3, 2, 0)])
def test_shard2D_by_blocks_and_inverse(n_1, n_2, a_1, a_2):
    x = np.random.default_rng(2).normal(size=(6, 4, 8))
    out = am.shard2D(x, n_1, n_2, a_1, a_2)
    assert out.shape[0] == n_1 * n_2
    for i in range(n_1):
        for j in range(n_2):
            want = _block(_block(x, a_1, i, n_1), a_2, j, n_2)
            np.testing.assert_array_equal(out[i * n_2 + j], want)
    np.testing.assert_array_equal(am.unshard2D(out, n_1, n_2, a_1, a_2), x)


def test_shard2D_documented_example():
    data = np.arange(8).reshape(4, 2)
    np.testing.assert_array_equal(am.shard2D(data, 2, 2, 1, 0),
                                  [[[0], [2]], [[4], [6]], [[1], [3]], [[5], [7]]])


@pytest.mark.parametrize("mode", ["contiguous", "strided"])
def test_repeat_shard_order(mode):
    x = np.arange(12).reshape(6, 2)
    R, S = 3, 2
    out = am.repeat_shard(x, R, S, 0, mode)
    assert out.shape == (R * S, 3, 2)
    for r in range(R):
        for s in range(S):
            idx = r * S + s if mode == "contiguous" else s * R + r
            np.testing.assert_array_equal(out[idx], _block(x, 0, s, S))


def test_repeat_shard_bad_mode():
    with pytest.raises(ValueError):
        am.repeat_shard(np.arange(4), 2, 2, 0, "diagonal")


@pytest.mark.parametrize("tp,rf", [(1, 2), (2, 2), (2, 4), (4, 8), (1, 1)])
def test_tensor_parallel_input_formula(tp, rf):
    n = 8
    data = np.arange(n * 3).reshape(n, 3)
    out = am.tensor_parallel_input(data, tp, rf)
    dp = rf // tp
    full = out.reshape(-1, rf, 3)
    for h in range(full.shape[0]):
        for r in range(rf):
            # replica r of host transfer h sees sample h*dp + r//tp
            np.testing.assert_array_equal(full[h, r], data[h * dp + r // tp])
    back = am.tensor_parallel_output(full, full.shape[0], tp, rf, (3,))
    np.testing.assert_array_equal(back, data)


def test_tensor_parallel_input_documented_examples_and_repeat_fn():
    a = np.arange(4)
    np.testing.assert_array_equal(am.tensor_parallel_input(a, 2, 4), [[0, 0, 1, 1], [2, 2, 3, 3]])
    np.testing.assert_array_equal(am.tensor_parallel_input(a, 2, 2), [[0, 0], [1, 1], [2, 2], [3, 3]])
    out = am.tensor_parallel_input(a, 2, 2, repeat_fn=lambda x, i: x * 10 ** i)
    np.testing.assert_array_equal(out, [[0, 0], [1, 10], [2, 20], [3, 30]])
    with pytest.raises(ValueError):
        am.tensor_parallel_input(a, 4, 2)
    with pytest.raises(ValueError):
        am.tensor_parallel_input(a, 3, 4)


def test_pad_axis_and_squeeze_safe():
    data = np.arange(6).reshape(3, 2)
    np.testing.assert_array_equal(am.pad_axis(data, 5, 1),
                                  [[0, 1, 0, 0, 0], [2, 3, 0, 0, 0], [4, 5, 0, 0, 0]])
    np.testing.assert_array_equal(am.pad_axis(data, 4, 0, value=-1)[3], [-1, -1])
    x = np.zeros((4, 1, 3, 1))
    assert am.squeeze_safe(x, [1, 3]).shape == (4, 3)
    assert am.squeeze_safe(x, [1, 0]).shape == (4, 3, 1)
    assert am.squeeze_safe(x, [-1, 0]).shape == (4, 1, 3)
    assert am.squeeze_safe(x, 0).shape == (4, 1, 3, 1)
    assert am.squeeze_safe(x).shape == (4, 3)


def test_handle_negative_axis():
    x = np.zeros((1, 1, 1, 1))
    assert am.handle_negative_axis(x, 3) == 3
    assert am.handle_negative_axis(x, -1) == 3
    for bad in (4, -5):
        with pytest.raises(IndexError):
            am.handle_negative_axis(x, bad)
    with pytest.raises(IndexError):
        am.handle_negative_axis(np.array(0), 0)


def test_top_level_names():
    # popxl_addons' star imports put these on the package (addons.repeat is
    # the NumPy helper there, not ops.repeat)
    for name in am.__all__:
        assert getattr(addons, name) is getattr(am, name)
