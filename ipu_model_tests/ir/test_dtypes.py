"""Conformance of ``popxl.dtypes``: names, flags, conversions and repr."""
import numpy as np
import pytest

import ipuxl as popxl
from ipuxl import dtypes

ALL = [popxl.bool, popxl.int8, popxl.int16, popxl.int32, popxl.int64, popxl.uint8,
       popxl.uint16, popxl.uint32, popxl.uint64, popxl.float16, popxl.float32,
       popxl.float64, popxl.complex64, popxl.complex128]
NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float16", "float32", "float64", "complex64", "complex128"]


def test_cannot_construct():
    with pytest.raises(TypeError):
        dtypes.dtype()


@pytest.mark.parametrize("dt,name", list(zip(ALL, NAMES)))
def test_names_repr_from_name(dt, name):
    assert dt.name == name
    assert repr(dt) == f"popxl.dtypes.{name}"
    assert str(dt) == f"popxl.dtypes.{name}"
    assert dtypes.dtype.from_name(name) is dt
    assert dtypes.dtype.as_dtype(name) is dt
    assert getattr(dtypes, name) is dt


def test_aliases():
    assert popxl.half is popxl.float16
    assert popxl.float is popxl.float32
    assert popxl.double is popxl.float64
    assert dtypes.half is popxl.float16


def test_from_name_invalid():
    with pytest.raises(ValueError):
        dtypes.dtype.from_name("float31")


@pytest.mark.parametrize("dt", ALL)
def test_numpy_round_trip(dt):
    np_dt = dt.as_numpy()
    assert isinstance(np_dt, np.dtype)
    assert np_dt == np.dtype(dt.name if dt.name != "bool" else np.bool_)
    assert dtypes.dtype.as_dtype(np_dt) is dt
    assert dtypes.dtype.as_dtype(np_dt.type) is dt  # np.float32 etc.
    assert dtypes.dtype.as_dtype(np.zeros(2, np_dt)) is dt  # an array


def test_flags():
    for dt in ALL:
        assert dt.is_int == (dt.name.startswith("int") or dt.name.startswith("uint"))
        assert dt.is_floating_point == dt.name.startswith("float")
        assert dt.is_complex == dt.name.startswith("complex")
    assert popxl.int8.is_signed and not popxl.uint8.is_signed
    assert popxl.float16.is_signed and not popxl.bool.is_signed
    assert popxl.float8_143.is_floating_point and popxl.float8_152.is_signed


def test_python_types():
    # PopXL maps the Python types bool -> bool and float -> float32; int goes
    # through numpy (int64).
    assert dtypes.dtype.as_dtype(bool) is popxl.bool
    assert dtypes.dtype.as_dtype(float) is popxl.float32
    assert dtypes.dtype.as_dtype(int) is popxl.int64


def test_fp8_numpy_types():
    assert popxl.float8_143.as_numpy() == dtypes.np_dtype_float8_143
    assert popxl.float8_152.as_numpy() == dtypes.np_dtype_float8_152
    assert popxl.float8_143.name == "float8_143"


@pytest.mark.parametrize("bad", ["float31", object(), np.dtype("U3"), 3.5])
def test_as_dtype_invalid(bad):
    with pytest.raises(ValueError):
        dtypes.dtype.as_dtype(bad)


def test_torch():
    torch = pytest.importorskip("torch")
    pairs = {torch.float32: popxl.float32, torch.float16: popxl.float16,
             torch.float64: popxl.float64, torch.int32: popxl.int32, torch.int64: popxl.int64,
             torch.int8: popxl.int8, torch.uint8: popxl.uint8, torch.bool: popxl.bool,
             torch.int16: popxl.int16}
    for t, p in pairs.items():
        assert dtypes.dtype.as_dtype(t) is p
        assert p.as_torch() == t
    assert dtypes.dtype.as_dtype(torch.zeros(2, dtype=torch.float16).dtype) is popxl.float16


def test_dtypes_are_singletons_across_pickle():
    import pickle

    assert pickle.loads(pickle.dumps(popxl.float32)) is popxl.float32


def test_lookup_tables_agree_with_numpy_and_torch():
    """PopXL's tables: numpy dtype, name, Python type and torch dtype -> dtype,
    checked against numpy's and torch's own notion of each type."""
    import torch

    for npd, dt in dtypes._NP_TO_POPXL.items():
        assert isinstance(npd, np.dtype)
        if dt in (popxl.float8_143, popxl.float8_152):
            assert npd.itemsize == 1 and npd.names == (dt.name,)
        else:
            assert npd == np.dtype(dt.name)
    assert set(dtypes._NP_TO_POPXL.values()) == set(ALL) | {popxl.float8_143, popxl.float8_152}
    for name, dt in dtypes._STR_TO_POPXL.items():
        assert dt.name == name
    assert dtypes._PY_TO_POPXL[bool] is popxl.bool
    assert dtypes._PY_TO_POPXL[float] is popxl.float32

    pt = dtypes._PT_TO_POPXL
    # torch has these types, and PopXL maps exactly them (no uint16/32/64, no fp8)
    assert {str(k) for k in pt} == {f"torch.{n}" for n in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64",
        "complex64", "complex128")}
    for tdt, dt in pt.items():
        # the same type as numpy sees it, through torch's own conversion
        assert np.dtype(dt.name) == torch.empty(0, dtype=tdt).numpy().dtype
        assert tdt.is_floating_point == dt.is_floating_point
        assert tdt.is_complex == dt.is_complex
        assert popxl.dtype.as_dtype(tdt) is dt
