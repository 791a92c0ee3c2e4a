"""Host-side helpers, mirroring ``popxl.utils``."""
from typing import Optional

import numpy as np

from . import dtypes

__all__ = ["to_numpy", "table_to_string", "downcast_np_dtypes"]

# With ``downcast=True`` and no dtype, host data of these types becomes 32-bit.
downcast_np_dtypes = {
    np.dtype("int64"): np.dtype("int32"),
    np.dtype("uint64"): np.dtype("uint32"),
    np.dtype("float64"): np.dtype("float32"),
}


def _is_torch_tensor(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch" and hasattr(x, "detach")


def to_numpy(x, dtype: Optional[dtypes.dtype] = None, downcast: bool = True,
             copy: bool = True, log2_scale: Optional[int] = None,
             nan_on_overflow: Optional[bool] = None) -> np.ndarray:
    """Host data (a NumPy array, a torch tensor, a list or a scalar) as a
    C-ordered NumPy array, as ``popxl.utils.to_numpy``.

    Args:
        dtype: the element type to convert to; without it the data's own type,
            downcast from 64 to 32 bits (``downcast_np_dtypes``) when
            ``downcast`` is True.
        copy: when True the result never shares memory with ``x``; when False
            it does whenever no conversion is needed.
        log2_scale, nan_on_overflow: only for fp8 dtypes (``RuntimeError``
            otherwise).

    An ``np.memmap`` is returned as it is (never copied when ``copy`` is
    False), so it must be C-ordered and aligned, need no downcast and match
    ``dtype`` when one is given (``ValueError`` otherwise). A torch tensor is
    detached first (it may require grad).
    """
    dt = dtypes.dtype.as_dtype(dtype) if dtype is not None else None
    fp8 = dt in (dtypes.float8_143, dtypes.float8_152)
    if not fp8 and log2_scale is not None:
        raise RuntimeError("Non-default value for 'log2_scale' is not supported for dtypes that "
                           "are not popxl.float8_143 or popxl.float8_152")
    if not fp8 and nan_on_overflow is not None:
        raise RuntimeError("Non-default value for 'nan_on_overflow' is not supported for dtypes "
                           "that are not popxl.float8_143 or popxl.float8_152")
    if isinstance(x, np.memmap):
        if dt is not None and dt.as_numpy() != x.dtype:
            raise ValueError("When passing a memory-mapped NumPy array, the `dtype` parameter "
                             "must be None or the same as the array's dtype")
        if not (x.flags.c_contiguous and x.flags.aligned):
            raise ValueError("When passing a memory-mapped NumPy array, it must already be in "
                             "C-ordered and aligned form.")
        if x.dtype in downcast_np_dtypes:
            raise ValueError(f"When passing a memory-mapped NumPy array, the dtype {x.dtype} is "
                             "not supported, as it requires downcasting the array into a new "
                             "array with a dtype supported by PopXL.")
        return x.copy() if copy else x
    if _is_torch_tensor(x):
        x = x.detach().cpu().numpy()
    src = x if isinstance(x, np.ndarray) else None
    if fp8:
        arr = np.asarray(x, order="C")
        if arr.dtype != dt.as_numpy():
            from .fp8_utils import host_pow2scale_cast_to_fp8

            if arr.dtype not in (np.float16, np.float32, np.float64):
                raise TypeError(f"Type {arr.dtype} is not supported for float8 tensors. Pass "
                                "np.float16, np.float32 or np.float64 data, or data already "
                                f"converted to {dt.as_numpy()} (popxl.fp8_utils).")
            arr = host_pow2scale_cast_to_fp8(arr, dt, 0 if log2_scale is None else log2_scale,
                                             True if nan_on_overflow is None else nan_on_overflow)
    else:
        if dt is not None:
            target = dt.as_numpy()
        else:
            target = src.dtype if src is not None else np.asarray(x).dtype
            if downcast:
                target = downcast_np_dtypes.get(target, target)
        arr = np.asarray(x, dtype=target, order="C")
    if copy and src is not None and np.may_share_memory(arr, src):
        arr = arr.copy()
    return arr


def table_to_string(rows, sep=" | ") -> str:
    """Format rows (the first is the header) as an aligned text table."""
    rows = [[str(c) for c in r] for r in rows]
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(len(rows[0]))]
    lines = [sep.join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
