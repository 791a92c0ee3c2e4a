"""``init``: a new tensor filled with zeros (or left undefined)."""
from typing import Iterable, Optional

from .. import dtypes
from .._shapes import check_shape
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor

__all__ = ["init"]


def init(shape: Iterable[int], dtype: dtypes.dtype, name: Optional[str] = None,
         init_type: str = "zero", meta_shape: Optional[Iterable[int]] = None) -> Tensor:
    """A tensor of ``shape`` and ``dtype``, zero-filled (``"zero"``) or
    undefined (``"undef"``, zero-filled by the simulator)."""
    if init_type not in ("zero", "undef"):
        raise ValueError(f"init: init_type must be 'zero' or 'undef', got {init_type!r}")
    dt = dtypes.dtype.as_dtype(dtype)
    shape = check_shape("init", shape, dt.itemsize)
    dt._core_code  # noqa: B018 - rejects dtypes the core cannot hold
    op = create_op("Init", [], [name or "init"],
                   {"init_type": init_type, "_shape": shape, "_dtype": dt}, name="init")
    op.outputs[0]._meta_shape = tuple(meta_shape or ())
    return op.outputs[0]


define_op("Init", lambda ins, attrs, graphs=(): [(attrs["_shape"], attrs["_dtype"])],
          no_grad="no inputs", cost="fill", merge="init")
