"""Test helpers, mirroring ``popxl.testing``."""
from . import dtypes

__all__ = ["get_all_dtypes", "get_all_int_dtypes"]


def get_all_dtypes():
    """Every dtype the ipuxl core can run."""
    return [d for d in (dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16,
                        dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64,
                        dtypes.float16, dtypes.float32, dtypes.float64)]


def get_all_int_dtypes():
    return [d for d in get_all_dtypes() if d.is_int]
