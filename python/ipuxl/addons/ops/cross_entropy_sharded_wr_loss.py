"""``cross_entropy_sharded_wr_loss`` (``popxl_addons.ops.cross_entropy_sharded_wr_loss``):
tensor-parallel cross-entropy within one replica, the logits sharded along
the class axis over several IPUs.

One op, ``CrossEntropyShardedWR`` (kernel ``cpp/kernels/cross_entropy_sharded.cpp``),
reads every shard and gives the unreduced loss (on the first shard's IPU)
and each shard's softmax; its gradient, per shard on that shard's IPU, is
``dloss * (softmax_i - onehot_i)``.
"""
from typing import Iterable, List, Optional

import numpy as np

from ... import dtypes
from ...context import ipu as ipu_scope
from ...errors import UndefinedValue
from ...grad import register_grad
from ...op import create_op
from ...opdef import define_op
from ...ops.utils import check_in_graph
from ...tensor import Tensor

__all__ = ["cross_entropy_sharded_wr_loss"]


def handle_ipus(ts: List[Tensor], ipus: Optional[Iterable[int]]) -> List[int]:
    """The IPU of each tensor: ``ipus`` checked against ``ts``, or inferred."""
    if ipus is None:
        try:
            ipus = [t.ipu for t in ts]
        except UndefinedValue as e:
            raise ValueError("Could not automatically infer the IPU of all input Tensors. "
                             "Please specify the IPUs via the `ipus` parameter.") from e
    else:
        ipus = list(ipus)
    if len(ts) != len(ipus):
        raise ValueError(f"Number of specified tensor does not equal number of specified IPUs. "
                         f"{len(ts)} != {len(ipus)}")
    return ipus


def _shape(ins, attrs, graphs=()):
    n = int(attrs["n_shards"])
    logits, indices = ins[:n], ins[n:]
    if len(indices) != n:
        raise ValueError(f"expected {n} logits and {n} indices, got {len(ins)} inputs")
    first = logits[0]
    if len(first.shape) != 2:
        raise ValueError(f"logits {first.id!r} must have rank 2 (n_samples, n_classes), got "
                         f"{first.shape}")
    n_samples = first.shape[0]
    for x in logits:
        if x.dtype != first.dtype or x.dtype not in (dtypes.float16, dtypes.float32):
            raise TypeError(f"logits {x.id!r} must be float16 or float32 like {first.id!r}, got "
                            f"{x.dtype}")
        if len(x.shape) != 2 or x.shape[0] != n_samples:
            raise ValueError(f"logits {x.id!r} must have shape ({n_samples}, classes), got "
                             f"{x.shape}")
    for t in indices:
        if not t.dtype.is_int:
            raise TypeError(f"indices {t.id!r} must be integers, got {t.dtype}")
        if tuple(t.shape) != (n_samples,):
            raise ValueError(f"indices {t.id!r} must have shape ({n_samples},), got {t.shape}")
    return [((n_samples,), first.dtype)] + [(x.shape, x.dtype) for x in logits]


define_op("CrossEntropyShardedWR", _shape, cost="loss")


def cross_entropy_sharded_wr_loss(logits: List[Tensor], indices: List[Tensor],
                                  ipus: Optional[Iterable[int]] = None) -> Tensor:
    """Cross-entropy of logits sharded along the class axis over IPUs.

    Args:
        logits: one ``(n_samples, n_classes_i)`` tensor per IPU; shard ``i``
            holds the classes after those of shards ``0 .. i-1``.
        indices: the labels ``(n_samples,)`` on each IPU (the same global
            class indices on all; the op adjusts them per shard).
        ipus: the IPU of each shard (default: inferred from the tensors).

    Returns:
        The unreduced loss ``(n_samples,)`` on the first IPU.
    """
    check_in_graph("cross_entropy_sharded_wr_loss",
                   **{f"logits_{i}": t for i, t in enumerate(logits)},
                   **{f"indices_{i}": t for i, t in enumerate(indices)})
    n = len(logits)
    if n != len(indices):
        raise ValueError("You must provide the same number of logits and indices.")
    if n == 0:
        raise ValueError("cross_entropy_sharded_wr_loss: no logits given")
    ipus = handle_ipus(logits, ipus)
    if not all(a == b for a, b in zip(ipus, handle_ipus(indices, ipus))):
        raise ValueError("The logits and indices IPUs do not match.")
    with ipu_scope(ipus[0]):
        op = create_op("CrossEntropyShardedWR", list(logits) + list(indices),
                       ["cross_entropy_sharded_out"] +
                       [f"cross_entropy_sharded_soft_max_out_{i}" for i in range(n)],
                       {"n_shards": n, "_ipus": tuple(ipus)}, name="cross_entropy_sharded_wr")
    return op.outputs[0]


@register_grad("CrossEntropyShardedWR", nondiff=())
def _cross_entropy_sharded_wr_grad(ctx):
    from ... import constant, ops

    n = int(ctx.attrs["n_shards"])
    ipus = ctx.attrs.get("_ipus") or (0,) * n
    g = ctx.g(0)
    out = [None] * (2 * n)
    offset = 0
    for i in range(n):
        x = ctx.op.inputs[i]
        classes = x.shape[1]
        if ctx.needs(i) and g is not None:
            with ipu_scope(ipus[i]):
                sm = ctx.y(1 + i)
                labels = ops.cast(ctx.x(n + i), dtypes.int32)
                local = labels - constant(np.int32(offset), dtypes.int32)
                cls = constant(np.arange(classes, dtype=np.int32), dtypes.int32)
                onehot = ops.cast(ops.equal(local.reshape((x.shape[0], 1)), cls), x.dtype)
                out[i] = g.reshape((x.shape[0], 1)) * (sm - onehot)
        offset += classes
    return out
