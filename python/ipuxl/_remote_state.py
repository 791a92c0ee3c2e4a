"""Remote variables between the host and each replica's Streaming Memory.

A Session's ``weights_from_host`` writes every remote variable's host value
into its buffer entry on every replica (as PopART's ``weightsFromHost``
calls ``copyToRemoteBuffer`` once per replica with the replica's group
value); ``weights_to_host`` reads it back from the first replica of each
group. A replica-sharded remote variable is split with
:mod:`ipuxl._sharding`: replica ``r`` gets the shard of its rank in its
sharding group, and the host value is put together from the shards of the
group's first ``shard_over`` members.

Host arrays have the variable's ``shape_on_host``: ``(num_groups, *shape)``
when its replica grouping has several groups, else ``shape``.
"""
from typing import Dict, List

import numpy as np

from ._sharding import group_members, shard, shard_size, unshard

__all__ = ["RemoteVariables"]


class _Placed:
    __slots__ = ("var", "buffer", "entry", "num_shards", "groups", "assignment")


class RemoteVariables:
    """The remote variables of a lowered program and where each replica
    keeps them (see the module docstring)."""

    def __init__(self, lowered, engine=None):
        # `engine`: the host view over all replicas (several instances:
        # ipuxl._instances.GlobalReplicas), else the lowered program's Engine.
        self.engine = engine if engine is not None else lowered.engine
        self._local_engine = lowered.engine
        replicas = int(self.engine.replicas)
        #: ``(core index, entries, entry shape, numpy dtype)`` of every remote buffer.
        self.buffers = [(lowered.remote_index[id(rb)], int(rb.entries), rb.tensor_shape,
                         rb.tensor_dtype.as_numpy()) for rb in lowered.remote_buffers]
        self.placed: List[_Placed] = []
        for v in lowered.remote_variables:
            rb, entry, sharded = v._remote
            p = _Placed()
            p.var, p.entry = v, entry
            p.buffer = lowered.remote_index[id(rb)]
            rg = v.replica_grouping
            p.assignment = list(rg.assignment) if rg is not None else [0] * replicas
            if len(p.assignment) != replicas:
                raise ValueError(f"remote variable {v.id!r}: its replica grouping covers "
                                 f"{len(p.assignment)} replicas, the program has {replicas}")
            p.groups = group_members(p.assignment)
            p.num_shards = self._num_shards(v, rb, len(p.groups[0])) if sharded else 0
            self.placed.append(p)

    @staticmethod
    def _num_shards(v, rb, group_size: int) -> int:
        """How many shards a sharded variable is split into: the buffer's
        ``shard_over`` (``replica_sharded_buffer``), else as many as its
        entries hold (a buffer made with ``remote_buffer`` and a meta shape)."""
        n = getattr(rb, "_shard_over", None)
        size = int(np.prod(rb.tensor_shape, dtype=np.int64))
        if n is None:
            n = -(-v.nelms // size) if size else 1
        if len(rb.tensor_shape) != 1 or shard_size(v.nelms, n) != size:
            raise ValueError(
                f"remote replica-sharded variable {v.id!r} {v.dtype.name}{v.shape}: its shards "
                f"over {n} replicas have {shard_size(v.nelms, n)} elements, but remote buffer "
                f"{rb.remote_buffer_id} holds entries of shape {rb.tensor_shape}")
        if n > group_size or group_size % n:
            raise ValueError(
                f"remote replica-sharded variable {v.id!r}: {n} shards do not divide its replica "
                f"group of {group_size} replicas")
        return n

    def write(self, host: Dict) -> None:
        """Host values -> every replica's buffer entries."""
        eng = self.engine
        for p in self.placed:
            data = host[p.var]
            per_group = len(p.groups) > 1
            for g, members in enumerate(p.groups):
                value = np.ascontiguousarray(data[g] if per_group else data)
                if p.num_shards:
                    rows = shard(value, p.num_shards)
                    for rank, r in enumerate(members):
                        eng.write_remote(p.buffer, p.entry, r, rows[rank % p.num_shards])
                else:
                    for r in members:
                        eng.write_remote(p.buffer, p.entry, r, value)

    def read(self, host: Dict, all_replicas: Dict = None) -> None:
        """The first replica of each group's entries -> the host arrays (and
        every replica's value of an ``all_replicas`` variable into
        ``all_replicas``, as ``(replicas, *shape)``)."""
        eng = self.engine
        R = int(eng.replicas)
        for p in self.placed:
            if all_replicas is not None and R > 1 and p.var.retrieval_mode == "all_replicas":
                every = np.empty((R,) + tuple(p.var.shape), p.var.dtype.as_numpy())
                for g, members in enumerate(p.groups):
                    for rank, r in enumerate(members):
                        if p.num_shards:  # the group's value, put together from its shards
                            base = rank - rank % p.num_shards
                            rows = np.empty((p.num_shards,) + p.var._remote[0].tensor_shape,
                                            p.var.dtype.as_numpy())
                            for k in range(p.num_shards):
                                eng.read_remote(p.buffer, p.entry, members[base + k], rows[k])
                            every[r] = unshard(rows, p.var.shape)
                        else:
                            eng.read_remote(p.buffer, p.entry, r, every[r])
                all_replicas[p.var] = every
            data = host[p.var]
            per_group = len(p.groups) > 1
            for g, members in enumerate(p.groups):
                # data[g, ...]: a view even when each group's value is a scalar
                dst = data[g, ...] if per_group else data
                if p.num_shards:
                    rows = np.empty((p.num_shards,) + p.var._remote[0].tensor_shape,
                                    p.var.dtype.as_numpy())
                    for k in range(p.num_shards):
                        eng.read_remote(p.buffer, p.entry, members[k], rows[k])
                    dst[...] = unshard(rows, p.var.shape)
                else:
                    out = np.empty(p.var.shape, p.var.dtype.as_numpy())
                    eng.read_remote(p.buffer, p.entry, members[0], out)
                    dst[...] = out

    def copy_to(self, other_engine) -> None:
        """Copies every buffer entry of every replica to ``other_engine``
        (the IPUXL_CHECK_HOST_PASSES shadow program)."""
        for b, entries, shape, dt in self.buffers:
            buf = np.empty(shape, dt)
            for r in range(int(self._local_engine.replicas)):
                for e in range(entries):
                    self._local_engine.read_remote(b, e, r, buf)
                    other_engine.write_remote(b, e, r, buf)
