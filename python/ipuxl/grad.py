"""The gradient-rule registry.

A *rule* for an op type builds the gradients of the op's inputs from the
gradients of its outputs, emitting ordinary forward ops into the gradient
graph (so a gradient graph can itself be differentiated). Rules live beside
their op's builder, registered with :func:`register_grad`::

    @register_grad("Mul")
    def _mul_grad(ctx):
        g = ctx.g()
        return [ctx.unbroadcast(g * ctx.x(1), 0), ctx.unbroadcast(g * ctx.x(0), 1)]

A rule returns one entry per op input: a Tensor, or None for a gradient known
to be zero. Inputs listed in ``nondiff`` (indices, conditions) never receive a
gradient. Integer and bool tensors never carry gradients whatever the rule.

When an op type has no rule but a *decomposition* (``register_decomposition``:
a builder of the op's result from other differentiable ops), autodiff
differentiates the decomposition instead. An op with neither raises as soon
as a gradient reaches it for an input that needs one — never a silent
partial gradient.
"""
from contextlib import contextmanager
from typing import (TYPE_CHECKING, Callable, Dict, FrozenSet, Iterable, List, NamedTuple,
                    Optional, Sequence)

if TYPE_CHECKING:
    from .op import Op
    from .tensor import Tensor

__all__ = [
    "GradRule", "register_grad", "register_decomposition", "get_grad_rule", "get_decomposition",
    "force_decomposition", "GradContext", "registered_op_types",
]


class GradRule(NamedTuple):
    """An op type's gradient rule: ``build(ctx)`` returns one gradient per
    input; inputs in ``nondiff`` never get one."""
    op_type: str
    build: Callable[["GradContext"], Sequence[Optional["Tensor"]]]
    nondiff: FrozenSet[int] = frozenset()


_RULES: Dict[str, GradRule] = {}

_DECOMPOSITIONS: Dict[str, Callable] = {}
_FORCED: List[FrozenSet[str]] = []


def _builtin(fn) -> bool:
    return getattr(fn, "__module__", "").startswith("ipuxl.")


def _register(table: Dict[str, object], op_type: str, fn, entry) -> None:
    # ipuxl's op families are imported on first use, possibly after a user
    # registered a rule for one of their op types: the user's rule stays.
    old = table.get(op_type)
    old_fn = getattr(old, "build", old)
    if old is not None and _builtin(fn) and not _builtin(old_fn):
        return
    table[op_type] = entry


def register_grad(op_type: str, nondiff: Iterable[int] = ()):
    """Decorator registering ``fn(ctx) -> [grad per input]`` as the rule of
    ``op_type``, replacing any earlier rule (user rules override ours)."""
    def deco(fn):
        _register(_RULES, op_type, fn, GradRule(op_type, fn, frozenset(nondiff)))
        return fn
    return deco


def register_decomposition(op_type: str):
    """Decorator registering ``fn(op, *inputs) -> [outputs]``: builds the
    value of an ``op_type`` op from other ops in the current graph. Autodiff
    uses it when the op has no rule (or the fallback is forced)."""
    def deco(fn):
        _register(_DECOMPOSITIONS, op_type, fn, fn)
        return fn
    return deco


_ALL_LOADED = False


def _load_all_rules() -> None:
    """Import every op family once, so their rules and decompositions are
    registered (the families are imported lazily, see ``ipuxl.ops``)."""
    global _ALL_LOADED
    if not _ALL_LOADED:
        _ALL_LOADED = True
        from . import ops
        ops.import_all()


def get_grad_rule(op_type: str) -> Optional[GradRule]:
    if op_type not in _RULES and op_type not in _DECOMPOSITIONS:
        _load_all_rules()
    if _FORCED and any(op_type in f for f in _FORCED) and op_type in _DECOMPOSITIONS:
        return None
    return _RULES.get(op_type)


def get_decomposition(op_type: str) -> Optional[Callable]:
    if op_type not in _DECOMPOSITIONS:
        _load_all_rules()
    return _DECOMPOSITIONS.get(op_type)


def nondiff_inputs(op_type: str) -> FrozenSet[int]:
    r = get_grad_rule(op_type)
    return r.nondiff if r is not None else frozenset()


def registered_op_types() -> Dict[str, str]:
    """``{op_type: "rule" | "decomposition" | "rule+decomposition"}``."""
    _load_all_rules()
    out = {}
    for t in sorted(set(_RULES) | set(_DECOMPOSITIONS)):
        kinds = [k for k, reg in (("rule", _RULES), ("decomposition", _DECOMPOSITIONS)) if t in reg]
        out[t] = "+".join(kinds)
    return out


@contextmanager
def force_decomposition(*op_types: str):
    """Within the block, autodiff ignores the rules of ``op_types`` that have
    a decomposition and differentiates the decomposition (for testing that
    both paths agree)."""
    _load_all_rules()
    missing = [t for t in op_types if t not in _DECOMPOSITIONS]
    if missing:
        raise ValueError(
            f"force_decomposition: {', '.join(missing)} has no registered decomposition, so its "
            "rule would be used anyway")
    _FORCED.append(frozenset(op_types))
    try:
        yield
    finally:
        _FORCED.pop()


class GradContext:
    """What a rule sees: the forward op, the gradients of its outputs, and
    access to forward values inside the gradient graph.

    Rules run with the gradient graph as the current graph.
    """

    def __init__(self, op: "Op", grads: List[Optional["Tensor"]], needs: List[bool],
                 value_of: Callable[["Tensor"], "Tensor"], builder):
        self.op = op
        self.grads = grads
        self._needs = needs
        self._value_of = value_of
        self._builder = builder

    @property
    def attrs(self):
        return self.op.attrs

    def x(self, i: int) -> "Tensor":
        """The forward value of input ``i``, usable in the gradient graph."""
        return self._value_of(self.op.inputs[i])

    def y(self, i: int = 0) -> "Tensor":
        """The forward value of output ``i``, usable in the gradient graph."""
        return self._value_of(self.op.outputs[i])

    def g(self, i: int = 0) -> Optional["Tensor"]:
        """The gradient of output ``i`` (None if known to be zero)."""
        return self.grads[i]

    def g_or_zeros(self, i: int = 0) -> "Tensor":
        from . import ops

        g = self.grads[i]
        if g is not None:
            return g
        t = self.op.outputs[i]
        return ops.init(t.shape, t.dtype, name=f"zero_grad_{t.name.split('/')[-1]}")

    def needs(self, i: int) -> bool:
        """Whether input ``i`` needs a gradient (rules may skip the others)."""
        return self._needs[i]

    def unbroadcast(self, grad: Optional["Tensor"], i: int) -> Optional["Tensor"]:
        """Sum ``grad`` (shaped like a broadcast result) down to the shape of input ``i``."""
        if grad is None:
            return None
        return sum_to_shape(grad, self.op.inputs[i].shape)

    def subgraph_grad_info(self, graph):
        """The GradGraphInfo of a called graph (differentiated on demand).
        Call it before creating anything: autodiff may restart the rule once
        the called graph has its gradient graph."""
        return self._builder.subgraph_info(graph)

    def new_graph(self, name: str):
        """An empty subgraph for the rule to fill (``with g:``), removed again
        if the autodiff call fails."""
        g = self.op.graph.ir.create_empty_graph(name)
        self._builder.created.append(g)
        return g


_OPS = None  # ipuxl.ops (which imports this module), bound on first use


def sum_to_shape(t: "Tensor", shape) -> "Tensor":
    """Reduce-sum ``t`` over the axes broadcasting added or expanded so that
    the result has exactly ``shape``."""
    global _OPS
    if _OPS is None:
        from . import ops

        _OPS = ops
    ops = _OPS
    shape = tuple(shape)
    if t.shape == shape:
        return t
    lead = len(t.shape) - len(shape)
    axes = list(range(lead))
    for i, d in enumerate(shape):
        if d == 1 and t.shape[lead + i] != 1:
            axes.append(lead + i)
    r = ops.sum(t, axis=axes, keepdims=True) if axes else t
    if r.shape != shape:
        r = ops.reshape(r, shape)
    return r
