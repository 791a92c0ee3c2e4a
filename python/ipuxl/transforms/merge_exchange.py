"""``merge_exchange`` and ``io_tile_exchange``, mirroring
``popxl.transforms``.

``with popxl.transforms.merge_exchange():`` merges the host and remote
loads and stores (and code loads) created inside into ``MultiExchange``
ops, each one exchange with one sync on the IPU, by PopART's rules
(``MergeExchange::applyToOps``). Walking the graph's schedule over the ops
created in the block (others are skipped: they neither join nor end a
group), a group of mergeable ops ends before an op that

* is in another execution context than the op scheduled before it,
* depends on data produced by an op of the group (directly, or through ops
  scheduled after the group's first op), or
* is neither mergeable nor an Init;

a group of two or more ops becomes one MultiExchange, at the place of its
last member; a MultiExchange met again is merged whole. The simulator runs
a MultiExchange's members in order (data dependencies between them are
excluded by construction); the IPU model counts one sync for all of them.

``io_tile_exchange(verify_overlap=True)`` is ``io_tiles()``,
``merge_exchange()`` and ``in_sequence(False)`` together; with
``verify_overlap`` it raises ``RuntimeError`` when more than one op (Init
ops aside) is left of those created inside, since the exchange would then
not overlap the compute that follows.
"""
from contextlib import contextmanager
from typing import Dict, Iterable, List

from ..context import get_current_context, get_current_graph, in_sequence, io_tiles
from ..op import Op
from ..opdef import get_opdef

__all__ = ["merge_exchange", "io_tile_exchange", "merge_exchange_ops"]


def _members(op: Op) -> List[Op]:
    if get_opdef(op.type).kind == "multi_exchange":
        return list(op.attrs["_members"])
    return [op]


def _depends_on_group(op: Op, group: List[Op], pos: Dict[Op, int]) -> bool:
    """Whether ``op`` reads data an op of ``group`` produces, directly or
    through ops scheduled after the group's first op."""
    if not group:
        return False
    members = set(group)
    first = pos[group[0]]
    stack = [t for t in op.inputs if t is not None]
    seen = set()
    while stack:
        t = stack.pop()
        p = t.producer
        if p is None or id(p) in seen:
            continue
        seen.add(id(p))
        if p in members:
            return True
        if p.graph is op.graph and pos.get(p, -1) > first:
            stack.extend(x for x in p.inputs if x is not None)
    return False


def _insert_multi_exchange(graph, group: List[Op]) -> Op:
    members = [m for op in group for m in _members(op)]
    last = group[-1]
    d = get_opdef("MultiExchange")
    inputs = [t for m in members for t in m.inputs]
    outputs = [t for m in members for t in m.outputs]
    attrs = {"_members": members}
    op = Op(graph, "MultiExchange", graph._unique_op_name("multi_exchange"), attrs, (),
            d.aliases(inputs, attrs), d.modifies(inputs, attrs))
    op.ipu, op.tile_set, op.execution_context = last.ipu, last.tile_set, last.execution_context
    op.inputs, op.outputs = inputs, outputs
    for t in outputs:
        t._producer = op
    gone = set(group)
    for old in group:
        for t in old.inputs:
            if t is not None:
                t._consumers = [c for c in t._consumers if c is not old]
    for t in inputs:
        if t is not None:
            t._consumers.append(op)
    # At the place of the last member: every member's inputs exist there, and
    # nothing between the members reads their outputs (that would be a data
    # dependency, which ends a group).
    at = graph._ops.index(last)
    graph._ops[at] = op
    graph._ops = [o for o in graph._ops if o not in gone]
    graph._ops_set -= gone
    graph._ops_set.add(op)
    cons = []
    for before, after in graph._topo_cons:
        before = op if before in gone else before
        after = op if after in gone else after
        if before is not after and (before, after) not in cons:
            cons.append((before, after))
    graph._topo_cons = cons
    return op


def merge_exchange_ops(graph, include: Iterable[Op] = ()) -> List[Op]:
    """Merge the exchanges among ``include`` (all ops of ``graph`` when
    empty, as PopART) into MultiExchange ops; returns the ops created."""
    include = set(include)
    schedule = list(graph._ops)
    pos = {op: i for i, op in enumerate(schedule)}
    created: List[Op] = []
    group: List[Op] = []

    def flush():
        if len(group) > 1:
            created.append(_insert_multi_exchange(graph, group))
        group.clear()

    for i, op in enumerate(schedule):
        if include and op not in include:
            continue
        merge = get_opdef(op.type).merge
        prev = schedule[i - 1] if i else None
        context_changed = prev is not None and prev.execution_context != op.execution_context
        if context_changed or merge is None or _depends_on_group(op, group, pos):
            flush()
        if merge == "exchange":
            group.append(op)
    flush()
    return created


@contextmanager
def merge_exchange():
    """Merge the host and remote loads and stores created inside into one
    exchange (see the module docstring). Only ops of the current graph."""
    ctx = get_current_context()
    graph = ctx.graph
    created: List[Op] = []
    handle = graph.register_op_created_hook(created.append)
    try:
        yield
    finally:
        graph.remove_op_created_hook(handle)
    for op in merge_exchange_ops(graph, created):
        ctx._op_created(op)  # the enclosing in_sequence mode and hooks apply to it


@contextmanager
def io_tile_exchange(verify_overlap: bool = True):
    """``io_tiles()``, ``merge_exchange()`` and ``in_sequence(False)``
    together: the exchanges created inside run on the IO tiles as one
    exchange, overlapping the compute that follows.

    Raises:
        RuntimeError: with ``verify_overlap``, if more than one op is left
            of those created inside (Init ops aside).
    """
    graph = get_current_graph()
    added: List[Op] = []

    def hook(op: Op):
        if get_opdef(op.type).merge != "init":
            added.append(op)

    handle = graph.register_op_created_hook(hook)
    try:
        with io_tiles(), merge_exchange(), in_sequence(False):
            yield
    finally:
        graph.remove_op_created_hook(handle)
    if verify_overlap:
        remaining = [op for op in added if op in graph._ops_set]
        if len(remaining) > 1:
            listing = "\n   ".join(repr(op) for op in remaining)
            raise RuntimeError(
                "More than one Op remained after `io_tile_exchange`. This will prevent overlap "
                "with following compute. Remaining Ops:\n   " + listing)
