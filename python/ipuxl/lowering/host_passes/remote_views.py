"""``view_remote_loads``: a main-graph ``remote_load`` whose tensor may as
well *be* its Streaming Memory entry is run without a copy: the core points
the tensor at the entry (the entry's typed field ``view_streaming_memory``), its in-place
updates land in the entry, and a ``remote_store`` of it back to the same
entry finds it already there (the core skips a store whose source is the
entry). Phased execution loads weights and optimizer state, updates them in
place and stores them back; this saves both copies. The IPU model reads the
faithful program and still counts every transfer.

A call whose graph does nothing but ``remote_load``s (``load_remote_graph``)
is first inlined at its call site, so that its loads are main-graph loads
with the caller's offsets; the rewrite is dropped again when no load of the
main graph qualifies.

Relies on, and checks, for a load of entry ``k`` (a constant offset) of
buffer ``B`` into a new tensor ``t`` (no destination, nothing aliased) of a
plain main-graph op, over the window from the load to the last main-graph
entry that touches (any alias of) ``t``:

* no entry in the window may load ``B`` at ``k`` or at an offset that is not
  a compile-time constant (it could see an in-place update of ``t`` early,
  or view the entry too), in the main graph or any graph it calls;
* every store to ``B`` in the window that may hit ``k`` stores exactly ``t``
  (a called graph's input fed by ``t`` and written nowhere in that graph) at
  the constant offset ``k``, from an entry that does not also write ``t``;
* after the last write to ``t`` in the window a store of ``t`` follows (so
  the entry ends with the value the copies would leave), or ``t`` is never
  written.

Offsets are followed into called graphs through call inputs (and loop
inputs that are not carried); everything else counts as unknown, and an
unknown offset on ``B`` declines. Only main-graph loads qualify: the main
program runs once per ``Session.run``, and the next run's load points the
tensor at the entry again.
"""
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..program import Entry, Program
from .analysis import alias_roots, root_of, touches, writes

NAME = "view_remote_loads"


def _constants(prog: Program) -> Dict[int, int]:
    """``{id(constant): value}`` of every scalar integer constant of the
    program's graphs that no entry writes."""
    from ...tensor import Constant

    out = {}
    for g in prog.graphs:
        roots = alias_roots(prog.entries[g])
        written = {root_of(roots, t) for e in prog.entries[g] for t in e.written_inputs()}
        for t in g._tensors.values():
            if isinstance(t, Constant) and id(t) not in written and t.dtype.name.startswith(
                    ("int", "uint")):
                data = np.asarray(t._host_data).reshape(-1)
                if data.size == 1:
                    out[id(t)] = int(data[0])
    return out


def _offset(e: Entry, env: Dict[int, tuple]) -> Optional[int]:
    """The entry a remote op's offset names, or None when not a constant
    (``env`` maps constants and a called graph's inputs, see _accesses)."""
    if len(e.inputs) < 2 or e.inputs[1] is None:
        return 0
    v = env.get(id(e.inputs[1]))
    return v[1] if v is not None and v[0] == "const" else None


class _GraphFacts:
    """Alias roots and written roots of each called graph, computed once."""

    def __init__(self, prog: Program):
        self.prog, self._cache = prog, {}

    def __call__(self, g) -> Tuple[dict, set]:
        if g not in self._cache:
            roots = alias_roots(self.prog.entries[g])
            written = {root_of(roots, t) for e in self.prog.entries[g]
                       for t in e.written_inputs()}
            self._cache[g] = (roots, written)
        return self._cache[g]


def _accesses(prog: Program, e: Entry, env: Dict[int, tuple], consts: Dict[int, int],
              facts: _GraphFacts, depth: int = 0) -> List[tuple]:
    """Every Streaming Memory access ``e`` makes (also inside the graphs it
    calls): ``(kind, buffer id, offset or None, main tensor or None)``; the
    tensor is that of a store whose value is known to be a main-graph
    tensor's at the entry's start. ``env``: ``{id(tensor): ("const", k) or
    ("tensor", main tensor)}`` for the tensors of ``e``'s graph known so."""
    if e.kind in ("remote_load", "remote_store"):
        src = None
        if e.kind == "remote_store":
            v = env.get(id(e.inputs[0]))
            src = v[1] if v is not None and v[0] == "tensor" else None
        return [(e.kind, id(e.remote_buffer), _offset(e, env), src)]
    out = []
    for gi, g in enumerate(e.graphs):
        sub = {k: ("const", v) for k, v in consts.items()}
        if e.kind in ("call", "repeat") and gi == 0 and depth < 64:
            g_inputs = prog.graph_inputs[g]
            carried = len(prog.graph_outputs[g]) if e.kind == "repeat" else 0
            g_roots, written = facts(g)
            for i, (caller_t, callee_t) in enumerate(zip(e.inputs, g_inputs)):
                if i < carried or caller_t is None:
                    continue
                v = env.get(id(caller_t))
                if v is None:
                    continue
                if v[0] == "tensor" and root_of(g_roots, callee_t) in written:
                    continue  # the graph changes it before (or after) any store
                sub[id(callee_t)] = v
        for ce in prog.entries[g]:
            out.extend(_accesses(prog, ce, sub, consts, facts, depth + 1))
    return out


def _main_env(entries: List[Entry], consts: Dict[int, int]) -> Dict[int, tuple]:
    """Main-graph tensors stand for themselves, constants for their value."""
    env = {}
    for e in entries:
        for t in list(e.inputs) + list(e.outputs):
            if t is not None:
                env[id(t)] = ("tensor", t)
    env.update((k, ("const", v)) for k, v in consts.items())
    return env


def _viewable(prog: Program, entries: List[Entry], pos: int, roots, env, consts, facts,
              access_cache: Dict[int, list]) -> bool:
    """Whether the load at ``pos`` may view its entry (module docstring)."""
    ld = entries[pos]
    t = ld.outputs[0]
    k = _offset(ld, env)
    if (ld.skip or ld.op.execution_context != "normal" or ld.inputs[0] is not None
            or ld.aliases or ld.modified or k is None or root_of(roots, t) != id(t)):
        return False
    rb = ld.remote_buffer
    if tuple(t.shape) != tuple(rb.tensor_shape) or t.dtype != rb.tensor_dtype:
        return False
    target = {id(t)}
    last = max((i for i in range(pos + 1, len(entries)) if touches(entries[i], roots, target)),
               default=pos)
    dirty = False
    for i in range(pos + 1, last + 1):
        e = entries[i]
        w = writes(e, roots, target)
        acc = access_cache.get(i)
        if acc is None:
            acc = access_cache[i] = _accesses(prog, e, env, consts, facts)
        for kind, buf, off, src in acc:
            if buf != id(rb) or (off is not None and off != k):
                continue
            if kind == "remote_load" or off is None or src is not t or w:
                return False
            dirty = False  # t stored back to its entry
        if w:
            dirty = True
    return not dirty


def _inline_loads(prog: Program, entries: List[Entry],
                  consts: Dict[int, int]) -> Tuple[List[Entry], int]:
    """``entries`` with every call of a graph made of ``remote_load``s only
    replaced by those loads (caller's offsets and outputs)."""
    out, inlined = [], 0
    for c in entries:
        new = _inlined(prog, c, consts)
        if new is None:
            out.append(c)
        else:
            out.extend(new)
            inlined += 1
    return out, inlined


def _inlined(prog: Program, c: Entry, consts: Dict[int, int]) -> Optional[List[Entry]]:
    if (c.kind != "call" or c.skip or c.modified or c.aliases or len(c.graphs) != 1
            or c.op.execution_context != "normal"):
        return None  # (an inlined load must run in the program its call ran in)
    g = c.graphs[0]
    body, g_in, g_out = prog.entries[g], prog.graph_inputs[g], prog.graph_outputs[g]
    if not body or len(g_in) != len(c.inputs) or len(g_out) != len(c.outputs):
        return None
    caller_of = {id(gt): ct for gt, ct in zip(g_in, c.inputs)}
    out_pos = {id(t): i for i, t in enumerate(g_out)}
    if len(out_pos) != len(g_out):
        return None
    new, seen = [], set()
    for e in body:
        if (e.kind != "remote_load" or e.skip or e.aliases or e.modified
                or e.inputs[0] is not None or len(e.outputs) != 1
                or e.op.execution_context != "normal"):
            return None
        o = out_pos.get(id(e.outputs[0]))
        if o is None or o in seen:
            return None
        seen.add(o)
        off = e.inputs[1] if len(e.inputs) > 1 else None
        if off is not None and id(off) not in consts:
            off = caller_of.get(id(off))
            if off is None:
                return None
        new.append(e.derive(inputs=[None, off], outputs=[c.outputs[o]], exchange_group=-1))
    return new if len(seen) == len(g_out) else None


def run(prog: Program) -> int:
    if not prog.remote_buffers:
        return 0
    main = prog.graphs[0]
    original = prog.entries[main]
    consts = _constants(prog)
    entries, _ = _inline_loads(prog, original, consts)
    roots = alias_roots(entries)
    env = _main_env(entries, consts)
    cache: Dict[int, list] = {}
    facts = _GraphFacts(prog)
    viewed = 0
    for pos, e in enumerate(entries):
        if e.kind == "remote_load" and _viewable(prog, entries, pos, roots, env, consts, facts, cache):
            entries[pos] = e.derive(view_streaming_memory=True)
            viewed += 1
    if viewed:
        prog.entries[main] = entries
    return viewed
