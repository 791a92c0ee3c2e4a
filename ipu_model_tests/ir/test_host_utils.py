"""popxl.utils.to_numpy and downcast_np_dtypes: result dtypes as PopXL
documents them, memory sharing checked with np.shares_memory, torch tensors
that require grad, memmap rules."""
import numpy as np
import pytest
import torch

import ipuxl as popxl
from ipuxl.utils import downcast_np_dtypes, to_numpy


def test_downcast_table():
    assert downcast_np_dtypes == {np.dtype("int64"): np.dtype("int32"),
                                  np.dtype("uint64"): np.dtype("uint32"),
                                  np.dtype("float64"): np.dtype("float32")}


@pytest.mark.parametrize("x,dtype,downcast,want", [
    (np.arange(4, dtype="float32"), None, True, "float32"),
    (np.arange(4, dtype="float64"), None, True, "float32"),
    (np.arange(4, dtype="uint64"), None, True, "uint32"),
    (np.arange(4, dtype="int64"), None, True, "int32"),
    (np.arange(4, dtype="float64"), None, False, "float64"),
    (np.arange(4, dtype="float64"), popxl.float32, False, "float32"),
    (np.arange(4, dtype="float32"), popxl.float64, True, "float64"),
    (torch.arange(4, dtype=torch.float64), None, True, "float32"),
    (torch.arange(4, dtype=torch.float64), None, False, "float64"),
    (torch.arange(4, dtype=torch.float32), popxl.float16, True, "float16"),
    ([0.0, 1.0, 2.0], None, True, "float32"),
    ([0, 1, 2], None, True, "int32"),
    (0.0, None, True, "float32"),
    (0, None, True, "int32"),
    (False, None, True, "bool"),
])
def test_result_dtype(x, dtype, downcast, want):
    out = to_numpy(x, dtype, downcast)
    assert isinstance(out, np.ndarray) and out.dtype == np.dtype(want)
    ref = x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    np.testing.assert_array_equal(out, ref.astype(want))
    assert out.flags.c_contiguous


@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("np_dtype", ["bool", "int8", "uint8", "int16", "int32", "int64",
                                      "uint32", "float16", "float32", "float64"])
def test_copy_and_aliasing(np_dtype, copy):
    for src_kind in ("np", "torch"):
        a = np.ones((2, 2), dtype=np_dtype)
        if src_kind == "torch":
            if np_dtype == "uint32":
                continue
            t = torch.from_numpy(a)
            out = to_numpy(t, copy=copy)
        else:
            out = to_numpy(a, copy=copy)
        should_alias = not copy and np.dtype(np_dtype) not in downcast_np_dtypes
        assert np.shares_memory(a, out) == should_alias


def test_torch_tensor_that_requires_grad():
    w = torch.nn.Parameter(torch.tensor([1.5, -2.0], dtype=torch.float64))
    out = to_numpy(w)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [1.5, -2.0])


def test_non_contiguous_input_becomes_c_ordered():
    a = np.arange(12, dtype=np.float32).reshape(3, 4).T
    out = to_numpy(a, copy=False)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, a)


def test_scale_arguments_only_for_fp8():
    with pytest.raises(RuntimeError):
        to_numpy(np.ones(2, np.float32), log2_scale=1)
    with pytest.raises(RuntimeError):
        to_numpy(np.ones(2, np.float32), popxl.float32, nan_on_overflow=True)


def test_memmap_rules(tmp_path):
    m = np.memmap(tmp_path / "a.bin", dtype=np.float32, mode="w+", shape=(4,))
    m[:] = 3
    assert to_numpy(m, copy=False) is m
    assert not np.shares_memory(to_numpy(m), m)
    with pytest.raises(ValueError):
        to_numpy(m, popxl.float16)
    m64 = np.memmap(tmp_path / "b.bin", dtype=np.float64, mode="w+", shape=(4,))
    with pytest.raises(ValueError):
        to_numpy(m64)
    m2 = np.memmap(tmp_path / "c.bin", dtype=np.float32, mode="w+", shape=(4, 4))
    with pytest.raises(ValueError):
        to_numpy(m2[:, ::2], copy=False)
