"""``reshape_views``: a ``Reshape`` (a copy, in PopXL) that nothing can tell
from a view shares its input's storage instead of copying it (the MNIST
step's ``x.reshape((-1, 784))`` copied the whole batch every step). So do
the other plain copies: ``Identity`` (``io_tile_copy``, ``identity``; the
phased step copies every micro-batch's activations between the tile sets)
and ``Detach``.

Relies on, and checks: no entry writes the input or the output, in place or
through any view of either; neither the output nor a view of it is a graph
output (a graph output may be bound to a caller's tensor); same dtype.
"""
import numpy as np

from ..program import Program
from .analysis import alias_roots, root_of

NAME = "reshape_views"

#: Copying kernels and their view forms.
VIEWS = {"Reshape": "ReshapeInplace", "Identity": "IdentityInplace", "Detach": "DetachInplace"}


def run(prog: Program) -> int:
    changed = 0
    for g in prog.graphs:
        entries = prog.entries[g]
        roots = alias_roots(entries)
        written = {root_of(roots, t) for e in entries for t in e.written_inputs()}
        out_roots = {root_of(roots, t) for t in prog.graph_outputs[g]}
        for i, e in enumerate(entries):
            if (e.kernel not in VIEWS or e.skip or e.modified or e.aliases or e.side_effects
                    or len(e.inputs) != 1 or len(e.outputs) != 1):
                continue
            x, y = e.inputs[0], e.outputs[0]
            if x is None or root_of(roots, y) in out_roots or x.dtype != y.dtype or \
                    int(np.prod(x.shape)) != int(np.prod(y.shape)):
                continue
            if root_of(roots, x) in written or root_of(roots, y) in written:
                continue
            # Views of y made later now alias x: a write through them would
            # reach x, but no entry writes any of them (checked above), and
            # the roots computed before the change stay correct for the rest
            # of this scan because y's storage was never written either.
            entries[i] = e.derive(kernel=VIEWS[e.kernel], aliases=[(0, 0)])
            changed += 1
    return changed
