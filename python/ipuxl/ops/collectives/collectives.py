"""``popxl.ops.collectives.collectives``: the reduction names
(``CollectiveOps``) and their conversion, which user code and popxl_addons
import from here."""
from typing import Literal

from . import OP_MAP, to_collective_op

__all__ = ["CollectiveOps", "OP_MAP", "to_collective_op"]

CollectiveOps = Literal["add", "mean", "mul", "min", "max", "and", "or", "square_add"]
