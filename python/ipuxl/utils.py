"""Host-side helpers, mirroring ``popxl.utils``."""
from typing import Optional

import numpy as np

from . import dtypes

__all__ = ["to_numpy", "table_to_string"]


def to_numpy(x, dtype: Optional[dtypes.dtype] = None, downcast: bool = True,
             copy: bool = True, log2_scale=None, nan_on_overflow=None) -> np.ndarray:
    """Host data as a numpy array, downcast from 64 to 32 bits unless asked not to."""
    if dtype is not None:
        npd = dtypes.dtype.as_dtype(dtype).as_numpy()
        return np.array(x, dtype=npd, copy=copy) if copy else np.asarray(x, dtype=npd)
    arr = np.array(x, copy=copy) if copy else np.asarray(x)
    if downcast:
        dt = dtypes.dtype.as_dtype(arr.dtype)
        dt2 = dtypes._downcast(dt)
        if dt2 is not dt:
            arr = arr.astype(dt2.as_numpy())
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
