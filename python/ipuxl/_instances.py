"""Host access to the replicas of all instances (``Ir(replication="popdist")``).

Each instance's Engine holds only its own replicas ``[offset, offset + R)``
of ``total``. :class:`GlobalReplicas` gives the Session's weight code
(``weights_from_host``, ``weights_to_host``, remote variables) the Engine's
interface over *global* replica indices, so that code stays the one-process
code:

* writes to a replica of another instance are dropped (that instance writes
  it, from the same host value);
* reads of a local replica go to the Engine; reads of another instance's
  replica are served from the last :meth:`prefetch`, an all-gather of every
  instance's local values of the tensors the read will touch. Prefetching is
  collective: every instance calls it at the same points with the same
  tensors (they run the same program).
"""
from typing import Dict, List, Tuple

import numpy as np

__all__ = ["GlobalReplicas"]


class GlobalReplicas:
    def __init__(self, engine, layout, comm):
        self.engine = engine
        self.layout = layout
        self.comm = comm
        self._local = int(engine.replicas)
        self._cache: Dict[Tuple, np.ndarray] = {}

    @property
    def replicas(self) -> int:
        return self.layout.total

    def _local_index(self, replica: int):
        r = replica - self.layout.offset
        return r if 0 <= r < self._local else None

    def __getattr__(self, name):  # everything else: the local Engine
        return getattr(self.engine, name)

    # ---- writes: local replicas only
    def write_tensor(self, idx: int, arr, replica: int = -1) -> None:
        if replica < 0:
            self.engine.write_tensor(idx, arr, -1)
        else:
            r = self._local_index(replica)
            if r is not None:
                self.engine.write_tensor(idx, arr, r)

    def write_remote(self, buffer: int, entry: int, replica: int, arr) -> None:
        r = self._local_index(replica)
        if r is not None:
            self.engine.write_remote(buffer, entry, r, arr)

    # ---- reads: local, or from the last prefetch
    def read_tensor(self, idx: int, out, replica=None) -> None:
        if replica is None:  # any replica (all hold the same value): a local one
            self.engine.read_tensor(idx, out, 0)
            return
        r = self._local_index(replica)
        if r is not None:
            self.engine.read_tensor(idx, out, r)
        else:
            out[...] = self._cached(("t", idx), replica)

    def read_remote(self, buffer: int, entry: int, replica: int, out) -> None:
        r = self._local_index(replica)
        if r is not None:
            self.engine.read_remote(buffer, entry, r, out)
        else:
            out[...] = self._cached(("rb", buffer, entry), replica)

    def _cached(self, key, replica: int) -> np.ndarray:
        try:
            return self._cache[key + (replica,)]
        except KeyError:
            raise RuntimeError(f"ipuxl internal error: replica {replica} of {key} is on another "
                               "instance and was not prefetched") from None

    def prefetch(self, tensors: List[Tuple[int, tuple, np.dtype]],
                 remote: List[Tuple[int, int, tuple, np.dtype]], what: str) -> None:
        """All-gathers every instance's local values of ``tensors`` (core
        index, shape, dtype) and remote buffer entries ``remote`` (buffer,
        entry, shape, dtype)."""
        self._cache.clear()
        items = [(("t", i), s, np.dtype(d)) for i, s, d in tensors] + \
            [(("rb", b, e), s, np.dtype(d)) for b, e, s, d in remote]
        if not items:
            return
        sizes = [int(np.prod(s, dtype=np.int64)) * d.itemsize for _, s, d in items]
        per_replica = sum(sizes)
        mine = np.empty(per_replica * self._local, np.uint8)
        pos = 0
        for (key, shape, dt), nb in zip(items, sizes):
            for r in range(self._local):
                value = np.empty(shape, dt)
                if key[0] == "t":
                    self.engine.read_tensor(key[1], value, r)
                else:
                    self.engine.read_remote(key[1], key[2], r, value)
                mine[pos:pos + nb] = value.reshape(-1).view(np.uint8)
                pos += nb
        everyone = np.empty(mine.size * self.layout.instances, np.uint8)
        own = self.layout.index * mine.size
        everyone[own:own + mine.size] = mine
        self.comm.exchange(mine, everyone, what)
        for inst in range(self.layout.instances):
            pos = inst * mine.size
            for (key, shape, dt), nb in zip(items, sizes):
                for r in range(self._local):
                    g = inst * self._local + r
                    self._cache[key + (g,)] = everyone[pos:pos + nb].copy().view(dt).reshape(shape)
                    pos += nb
