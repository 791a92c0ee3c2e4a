"""``prune_outputs``: outputs of a graph that no call site reads are dropped
from the graph and from its call sites (a gradient graph's gradient for an
input nobody needs, such as the images of a training step, is the usual
case).

Relies on, and checks: every call site of the graph is a plain call (a
repeated graph carries all its outputs into its inputs; a branch's outputs
are the conditional's); the main graph keeps its outputs.
"""
from ..program import Program

NAME = "prune_outputs"


def run(prog: Program) -> int:
    reads = {}
    for g in prog.graphs:
        r = set()
        for e in prog.entries[g]:
            r.update(map(id, e.inputs))  # (None adds id(None): no output has it)
        r.update(map(id, prog.graph_outputs[g]))
        reads[g] = r
    sites = {g: [] for g in prog.graphs}
    for pg in prog.graphs:
        for e in prog.entries[pg]:
            for cg in e.graphs:
                sites[cg].append((pg, e))
    main = prog.graphs[0]
    dropped = 0
    for g in prog.graphs:
        s = sites[g]
        if g is main or not s or any(e.kind != "call" for _, e in s):
            continue
        outs = prog.graph_outputs[g]
        keep = [k for k in range(len(outs)) if any(id(e.outputs[k]) in reads[pg] for pg, e in s)]
        if len(keep) == len(outs):
            continue
        dropped += len(outs) - len(keep)
        prog.graph_outputs[g] = [outs[k] for k in keep]
        for pg, e in s:
            es = prog.entries[pg]
            i = next(i for i, x in enumerate(es) if x is e)
            es[i] = e.derive(outputs=[e.outputs[k] for k in keep])
    return dropped
