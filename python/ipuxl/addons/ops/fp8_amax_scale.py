"""``fp8_amax_scale`` (``popxl_addons.ops.fp8_amax_scale``)."""
from ... import dtypes
from ...tensor import Tensor
from .fp8_utils import float8_143_def, float8_152_def

__all__ = ["fp8_amax_scale"]


def fp8_amax_scale(src: Tensor, dtype=dtypes.float8_143) -> Tensor:
    """The int32 scale ``clip(floor(log2(max_value / max(|src|))), -31, 31)``
    that brings the largest magnitude of ``src`` (float16 or float32) just
    under the largest number of the fp8 format ``dtype``."""
    from ... import ops

    if src.dtype not in (dtypes.float32, dtypes.float16):
        raise RuntimeError(f"dtype {src.dtype} not currently supported.")
    dest = float8_152_def if dtype == dtypes.float8_152 else float8_143_def
    amax = ops.max(ops.abs(src))
    log2_max = ops.log2(dest.max_value / amax)
    log2_max = ops.cast(ops.floor(log2_max), dtypes.int32)
    return ops.clip(log2_max, -31, 31)
