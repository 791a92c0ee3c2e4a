"""``popxl_addons.ops.layer_norm_distributed``: layer normalisation of a
tensor whose hidden axis is sharded over the replicas of a group.

Each member holds ``t`` ``(N, H / group_size)``, its ``w`` and ``b``
``(H / group_size,)``. The mean and variance are over the whole hidden axis:
the members' partial sums are all-reduced (``ops.collectives``: the
gradient of an all-reduce is the all-reduce of the gradients, since each
member's output shard has its own gradient), then each member normalises
its shard. Built from ops, as popxl_addons' custom op computes it.
"""
from typing import Optional

from ... import dtypes, ops
from ...ops import collectives as _c
from ...ops.utils import check_in_graph, check_tensor_ipu_and_tile_set
from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor

__all__ = ["layer_norm_distributed"]


def layer_norm_distributed(t: Tensor, w: Tensor, b: Tensor, epsilon: float = 1e-5,
                           group: Optional[ReplicaGrouping] = None) -> Tensor:
    """``(t - mean) / sqrt(var + epsilon) * w + b`` with the mean and the
    (biased) variance of each row over the hidden axis of every member of
    ``group`` (default: all replicas).

    Args:
        t: ``(N, H_local)``, this member's shard of the hidden axis.
        w, b: ``(H_local,)``, the scale and shift of this member's shard.
        epsilon: added to the variance.
        group: the replicas the hidden axis is sharded over.

    Returns:
        ``(N, H_local)``, this member's shard of the normalised tensor.
    """
    what = "layer_norm_distributed"
    check_in_graph(what, t=t, w=w, b=b)
    check_tensor_ipu_and_tile_set(t=t, w=w, b=b)
    if t.rank != 2 or w.rank != 1 or b.rank != 1:
        raise ValueError(f"{what}: expected t of rank 2 and w, b of rank 1, got t {t.shape}, "
                         f"w {w.shape}, b {b.shape}")
    if w.shape[0] != t.shape[1] or b.shape[0] != t.shape[1]:
        raise ValueError(f"{what}: w {w.shape} and b {b.shape} must have the length of t's "
                         f"hidden axis ({t.shape[1]},)")
    if t.dtype not in (dtypes.float16, dtypes.float32) or w.dtype != t.dtype or b.dtype != t.dtype:
        raise TypeError(f"{what}: t, w and b must all be float16 or float32, got {t.dtype}, "
                        f"{w.dtype}, {b.dtype}")
    group = _c._grouping(what, group)
    n, h_local = t.shape
    hidden = float(h_local * group.group_size)
    mean = _c.replicated_all_reduce(ops.sum(t, axis=1), "add", group) / hidden
    d = t - mean.reshape((n, 1))
    var = _c.replicated_all_reduce(ops.sum(d * d, axis=1), "add", group) / hidden
    return d / ops.sqrt(var + float(epsilon)).reshape((n, 1)) * w + b
