"""``fuse_input_grad_updates``: a folded update ``W = beta*W + alpha * X^T @ G``
at a small batch, and the input gradient ``dX = G @ W^T`` computed from the
same ``G`` and the old ``W`` just before it, become one
``MatMulInputGradUpdate`` kernel at the update's place: each row of ``W`` is
read once, gives its column of ``dX``, and is updated.

Relies on, and checks: the last entry before the update that touches ``W``
is that input gradient (plain, run, float32, shapes matching); nothing in
between writes ``X`` or ``G`` or reads ``dX``; the shape is one the core's
fixed per-level rule runs faster fused at the instruction-set level in use
(``core.prefer_fused_input_grad_update``; ``IPUXL_FUSED_UPDATE=always|never``
overrides it). Runs after ``skip_dead_ops``: an input gradient nobody reads
stays unrun instead.
"""
from ... import settings
from ..._core_loader import core
from ..program import Entry, Program
from .analysis import alias_roots, is_f32, root_of, touches, writes

NAME = "fuse_input_grad_updates"


def _prefer_fused(batch: int, rows: int, cols: int) -> bool:
    mode = getattr(core.FusedUpdate, settings.current().fused_update)
    return bool(core.prefer_fused_input_grad_update(batch, rows, cols, mode))


def _is_shallow_update(u: Entry) -> bool:
    """``W = beta*W + alpha * X^T @ G`` (a folded update), ``X`` [B, M],
    ``G`` [B, N], ``W`` [M, N], at a shape the core prefers fused."""
    if u.kernel != "MatMul" or u.skip or u.attrs.get("epilogue") != "accumulate" \
            or len(u.inputs) != 3:
        return False
    if u.attrs.get("trans_lhs", 0) != 1 or u.attrs.get("trans_rhs", 0) != 0:
        return False
    x, g, w = u.inputs
    return (x.shape[0] == g.shape[0] and tuple(w.shape) == (x.shape[1], g.shape[1])
            and _prefer_fused(x.shape[0], w.shape[0], w.shape[1]))


def run(prog: Program) -> int:
    fused = 0
    for graph in prog.graphs:
        entries = prog.entries[graph]
        i = 0
        while i < len(entries):
            u = entries[i]
            if not _is_shallow_update(u):
                i += 1
                continue
            roots = alias_roots(entries)
            x, g, w = u.inputs
            w_root = root_of(roots, w)
            # The last entry before the update that touches W must be the input gradient.
            j = next((k for k in range(i - 1, -1, -1) if touches(entries[k], roots, {w_root})), -1)
            a = entries[j] if j >= 0 else None
            ok = (a is not None and a.kernel == "MatMul" and "epilogue" not in a.attrs
                  and not a.skip
                  and len(a.inputs) == 2 and a.inputs[0] is g and a.inputs[1] is w
                  and a.attrs.get("trans_lhs", 0) == 0 and a.attrs.get("trans_rhs", 0) == 1
                  and tuple(a.outputs[0].shape) == tuple(x.shape) and is_f32(a.outputs[0]))
            if ok:
                dx = a.outputs[0]
                between = entries[j + 1:i]
                operands = {root_of(roots, t) for t in (x, g)}
                ok = (not any(writes(e, roots, operands) for e in between)
                      and not any(t is dx for e in between for t in e.inputs))
            if not ok:
                i += 1
                continue
            attrs = {"alpha": u.attrs["alpha"], "beta": u.attrs["beta"]}
            entries[i] = u.derive(kernel="MatMulInputGradUpdate", inputs=[g, w, x],
                                  outputs=[dx, u.outputs[0]], attrs=attrs, aliases=[(1, 1)],
                                  modified=[1], side_effects=False)
            del entries[j]
            fused += 1
    return fused
