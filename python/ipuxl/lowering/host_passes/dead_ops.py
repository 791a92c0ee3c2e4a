"""``skip_dead_ops``: ops none of whose results is read are not run (the core
still builds, and so validates, their kernels).

Relies on, and checks: the op has no side effects and writes no input
(``OpDef.side_effects``, ``modified``); liveness runs backwards from the
graph's outputs through every read, so an op feeding anything live stays.
Only kernel ops are skipped (the core builds a skipped op's kernel); other
kinds (an ``ipu_copy``...) run.
"""
from ..program import Program

NAME = "skip_dead_ops"


def run(prog: Program) -> int:
    skipped = 0
    for g in prog.graphs:
        live = {id(t) for t in prog.graph_outputs[g]}
        entries = prog.entries[g]
        for i in range(len(entries) - 1, -1, -1):
            e = entries[i]
            # (An absent input, None, adds id(None): no output has that id.)
            if e.side_effects or e.modified or not live.isdisjoint(map(id, e.outputs)):
                live.update(map(id, e.inputs))
            elif not e.skip and e.kind == "kernel":
                entries[i] = e.derive(skip=True)
                skipped += 1
    return skipped
