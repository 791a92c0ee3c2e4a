"""Host data for variables and constants: conversion to the Ir's own
aligned copy in a PopXL dtype, with PopXL's downcast of 64-bit data and its
casts (a warning naming the tensor where values do not fit)."""
import math
import warnings
from typing import Optional, Tuple

import numpy as np

from . import dtypes
from ._host_memory import aligned_copy


def _check_fits(arr: np.ndarray, want: np.dtype, what: str, allow_inf: bool = False,
                warn: bool = False) -> None:
    """Refuses host data that ``want`` cannot hold: finite values that would
    become inf (unless ``allow_inf``: an operand such as ``-1e9`` of a float16
    mask saturates, as in PopXL), integers that would wrap, NaN/inf or
    out-of-range floats cast to an integer dtype. With ``warn`` (variables
    and constants, which PopXL converts with NumPy's casts whatever the
    values) one RuntimeWarning naming ``what`` replaces the error."""
    if arr.size == 0 or arr.dtype.kind not in "iuf" or want.kind not in "iuf" or \
            np.can_cast(arr.dtype, want) or (allow_inf and want.kind == "f"):
        return
    if want.kind == "f":
        if arr.dtype.kind != "f" and want.itemsize >= 4:
            return
        if arr.size == 1:
            # One value (a scalar operand, the common case): checked in Python.
            v = abs(float(arr.reshape(-1)[0]))
            if not math.isfinite(v) or v <= float(np.finfo(want).max):
                return
        a = arr.astype(np.float64)
        finite = a[np.isfinite(a)]
        bad = finite[np.abs(finite) > np.finfo(want).max]
        why = "they would become inf"
    else:
        info = np.iinfo(want)
        if arr.dtype.kind == "f":
            bad = arr[~np.isfinite(arr) | (arr < info.min) | (arr > info.max)]
        elif np.can_cast(arr.dtype, want):
            return
        else:
            bad = arr[(arr < info.min) | (arr > info.max)]
        why = "they would wrap" if arr.dtype.kind != "f" else "an integer dtype cannot hold them"
    if bad.size:
        msg = (f"{what}: {bad.size} value(s) of the {arr.dtype} data, such as "
               f"{bad.flat[0].item()!r}, are outside the range of {want} ({why})")
        if warn:
            warnings.warn(msg + "; converted as PopXL does. Scale the data, or use a wider "
                          "dtype (downcast=False keeps 64-bit data).", RuntimeWarning,
                          stacklevel=4)
            return
        raise ValueError(msg + ". Scale the data, or use a wider dtype.")


def _host_asarray(data, what: str, dtype=None) -> np.ndarray:
    try:
        return np.asarray(data, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise type(e)(f"{what}: cannot convert the data to an array: {e}") from None


_TENSOR = None  # ipuxl.tensor.Tensor, bound on first use


def _to_host_array(data, dtype: Optional[dtypes.dtype], downcast: bool, what: str,
                   log2_scale: Optional[int] = None,
                   nan_on_overflow: Optional[bool] = None) -> Tuple[np.ndarray, dtypes.dtype]:
    global _TENSOR
    if _TENSOR is None:
        from .tensor import Tensor  # noqa: PLC0415 - the module that imports this one

        _TENSOR = Tensor
    if isinstance(data, _TENSOR):
        raise TypeError(f"{what}: data must be host data (numpy, list, scalar), not a Tensor")
    if dtype is not None:
        dt = dtypes.dtype.as_dtype(dtype)
        if dt in (dtypes.float8_143, dtypes.float8_152):
            from .utils import to_numpy

            arr = to_numpy(data, dt, log2_scale=log2_scale, nan_on_overflow=nan_on_overflow)
            return aligned_copy(arr, dt.as_numpy()), dt
        if log2_scale is not None or nan_on_overflow is not None:
            raise RuntimeError(f"{what}: log2_scale and nan_on_overflow only apply to the float8 "
                               "dtypes popxl.float8_143 and popxl.float8_152")
        if isinstance(data, np.memmap) and data.dtype == dt.as_numpy():
            return data, dt  # the file is the host copy, as in PopXL
        if not isinstance(data, np.ndarray) or data.dtype.kind in "iuf":
            src = data if isinstance(data, np.ndarray) else _host_asarray(data, what)
            if src.dtype.kind in "iuf":
                _check_fits(src, dt.as_numpy(), what, warn=True)
                data = src
        want = dt.as_numpy()
        try:
            if isinstance(data, np.ndarray) and data.dtype == want:
                return aligned_copy(data, want), dt  # a copy: no cast to warn about
            with np.errstate(over="ignore", invalid="ignore"):  # _check_fits warned
                return aligned_copy(data, want), dt
        except (TypeError, ValueError, OverflowError) as e:
            raise type(e)(f"{what}: cannot convert the data to {dt.name}: {e}") from None
    arr = data if isinstance(data, np.memmap) else _host_asarray(data, what)
    if arr.dtype == object:
        raise TypeError(f"{what}: cannot convert {type(data).__name__} to a tensor")
    try:
        dt = dtypes.dtype.as_dtype(arr.dtype)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None
    if downcast:
        dt2 = dtypes._downcast(dt)
        if dt2 is not dt:
            _check_fits(arr, dt2.as_numpy(), what, warn=True)
            with np.errstate(over="ignore", invalid="ignore"):  # _check_fits warned
                return aligned_copy(arr, dt2.as_numpy()), dt2
    if not isinstance(arr, np.memmap):
        arr = aligned_copy(arr)  # the Ir's own copy, which a Session may share
    return arr, dt
