"""``direct_host_stores``: a tensor that the main program sends to the host
is computed straight into the run's host array, so the ``host_store`` has
nothing left to copy. A convolution or an inference step whose result is
megabytes spent a large part of its run on that copy.

For each qualifying store the core points the tensor (and every tensor
sharing its storage) at its transfer in the output array when a run starts,
and back at the arena when the run ends, also when it fails (the entry's
typed field ``write_host_directly``). A run whose arrays do not allow it (a transfer
not 64-byte aligned as the arena's tensors are, or an output array sharing
bytes with another stream's array) copies as before; ``Session.run`` and
``Session.create_host_outputs`` allocate the arrays of these streams 64-byte
aligned (views into a buffer 64 bytes longer: like any view, they cannot
be resized in place with ``ndarray.resize``). The IPU model reads the
faithful program and still counts the transfer.

Relies on, and checks, for a store of ``t`` to stream ``S``:

* it is the only ``host_store`` of ``S`` in the whole program, it runs in
  the main program (main graph, normal execution context) and it is not
  skipped: it runs once per run, into transfer 0;
* the storage of ``t`` (its own, or that of the tensor it is a whole view
  of, such as a reshape made a view by ``reshape_views``) belongs to an
  intermediate of the main graph (not a variable, constant or graph
  input) of ``t``'s size, and every entry touching that storage runs in
  the normal context (nothing of the weight transfer programs reads it
  between runs);
* no entry after the store writes that storage (through ``t`` or any other
  view): the host array ends the run with the value the store would have
  copied;
* ``t`` has at least :data:`MIN_BYTES` bytes (below, the copy costs less
  than aligning the array).

Writing earlier than the store is invisible to the program: the array is
the host's, and nothing of the program reads it.
"""
from typing import Dict, List

from .analysis import alias_roots, root_of, touches, writes

NAME = "direct_host_stores"

#: Smaller tensors are copied: aligning their arrays costs more than it saves.
MIN_BYTES = 16 * 1024


def _intermediate(t, main) -> bool:
    from ...tensor import Constant, Variable

    return (getattr(t, "graph", None) is main and not isinstance(t, (Variable, Constant))
            and getattr(t, "_remote", None) is None
            and id(t) not in set(map(id, getattr(main, "_inputs", ()))))


def _nbytes(t) -> int:
    n = 1
    for d in t.shape:
        n *= int(d)
    return n * int(t.dtype.itemsize)


def run(prog) -> int:
    main = prog.graphs[0]
    entries: List = prog.entries[main]
    stores: Dict[object, int] = {}  # stream -> host_stores of it
    for g in prog.graphs:
        for e in prog.entries[g]:
            if e.kind == "host_store":
                stores[e.stream] = stores.get(e.stream, 0) + 1
    roots = None
    marked, done = 0, set()
    for pos, e in enumerate(entries):
        if (e.kind != "host_store" or e.skip or e.op.execution_context != "normal"
                or stores.get(e.stream) != 1 or not e.inputs or e.inputs[0] is None):
            continue
        t = e.inputs[0]
        if _nbytes(t) < MIN_BYTES:
            continue
        if roots is None:
            roots = alias_roots(entries)
            by_id = {id(x): x for entry in entries for x in entry.inputs + entry.outputs
                     if x is not None}
        r = by_id.get(root_of(roots, t))
        if (r is None or id(r) in done or not _intermediate(r, main)
                or _nbytes(r) != _nbytes(t)):
            continue
        target = {id(r)}
        if any(touches(x, roots, target) and x.op.execution_context != "normal"
               for x in entries):
            continue
        if any(writes(x, roots, target) for x in entries[pos + 1:]):
            continue
        entries[pos] = e.derive(write_host_directly=True)
        done.add(id(r))  # a second stream of the same storage copies from the first
        marked += 1
    return marked
