"""``Op``: one node of a graph, and the helper every builder uses to create one.

An op records its type (the C++ kernel name), its inputs and outputs, its
attributes, the graphs it calls and which outputs share storage with which
inputs (in-place and view ops). Builders in ``ipuxl.ops`` check shapes and
dtypes, then call :func:`create_op`.
"""
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import dtypes
from .context import get_current_context
from .opdef import get_opdef

if TYPE_CHECKING:
    from .graph import Graph
    from .tensor import Tensor

__all__ = ["Op", "create_op", "placement_epoch"]

#: Counts re-placements of existing ops (``op.ipu`` / ``op.tile_set`` set
#: after creation): placement answers cached on tensors
#: (``Tensor._consumers_placement``) are valid only within one epoch.
_placement_epoch = 0


#: ``ipuxl.tensor.Tensor``, bound on first use (that module imports this one;
#: an import statement per op costs as much as a fifth of creating it).
_TENSOR = None


def _tensor_class():
    global _TENSOR
    from .tensor import Tensor

    _TENSOR = Tensor
    return Tensor


def placement_epoch() -> int:
    return _placement_epoch


def _replaced() -> None:
    global _placement_epoch
    _placement_epoch += 1


class Op:
    """A node of a :class:`~ipuxl.Graph`.

    Attributes:
        id: creation index within the Ir (the schedule order within a graph).
        type: op type, e.g. ``"Add"``; also the C++ kernel name.
        name: scoped name (``"scope/add"``), unique within its graph.
        inputs / outputs: lists of Tensors (an absent optional input is None).
        attrs: attributes passed to the kernel.
        called_graphs: graphs the op calls (Call, Repeat, If).
        aliases: ``(output index, input index)`` pairs that share storage.
        modified: input indices the op writes to.
    """

    def __init__(self, graph: "Graph", type: str, name: str, attrs: Dict[str, Any],
                 called_graphs: Sequence["Graph"] = (), aliases: Sequence[Tuple[int, int]] = (),
                 modified: Iterable[int] = (), inputs: Sequence[Optional["Tensor"]] = (), ctx=None):
        ctx = ctx if ctx is not None else get_current_context()
        self.graph = graph
        self.id = graph._ir._next_op_id()
        self.type = type
        self.name = name
        self.attrs = dict(attrs)
        self.called_graphs = list(called_graphs)
        self.aliases = list(aliases)
        self.modified = set(modified)
        self.inputs: List[Optional["Tensor"]] = list(inputs)
        self.outputs: List["Tensor"] = []
        self._ipu = ctx._ipu_id
        self._tile_set = "io" if ctx._io_tile_set else "compute"
        self.execution_context = ctx._execution_context

    @property
    def ipu(self) -> Optional[int]:
        """The virtual graph (IPU) the op runs on."""
        return self._ipu

    @ipu.setter
    def ipu(self, value: Optional[int]) -> None:
        self._ipu = value
        _replaced()

    @property
    def tile_set(self) -> str:
        """``"compute"`` or ``"io"``."""
        return self._tile_set

    @tile_set.setter
    def tile_set(self, value: str) -> None:
        self._tile_set = value
        _replaced()

    def opType(self) -> str:  # noqa: N802 - PopART name, used by tests
        return self.type

    def modifies(self) -> bool:
        return bool(self.modified)

    def __repr__(self) -> str:
        ins = ", ".join("None" if t is None else t.id for t in self.inputs)
        outs = ", ".join(t.id for t in self.outputs)
        return f"{self.type}({self.name}: [{ins}] -> [{outs}])"


def _check_writable(op_type: str, t: Optional["Tensor"]) -> None:
    """Refuse writes that could not reach the tensor the user meant: walk the
    chain of aliasing producers (reshape_, detach_, add_ ...) back to its
    storage, and fail if any link is a view that was materialised as a copy
    (the write would not reach the viewed tensor) or if the storage is a
    constant (constants are immutable)."""
    from .tensor import Constant

    seen = 0
    unsupported = None  # a view materialised as a copy: reported unless the
    # storage is a constant, which is the user's error and reported first
    while t is not None and seen < 1_000_000:
        if isinstance(t, Constant):
            raise ValueError(
                f"{op_type}: cannot modify {t.id!r} in place: it is (a view of) a constant, and "
                "constants cannot be written. Use a variable, or the out-of-place op.")
        src = t.producer
        if src is None:
            break
        if src.attrs.get("_view_copy") and unsupported is None:
            unsupported = NotImplementedError(
                f"{op_type}: modifying {t.id!r}, which is (a view of) the result of the in-place "
                f"view {src.type} {src.name!r}, is not supported by ipuxl; use the out-of-place "
                "op and write the result back explicitly")
        idx = src.outputs.index(t) if t in src.outputs else -1
        nxt = [src.inputs[i] for o, i in src.aliases if o == idx]
        if not nxt and src.attrs.get("_view_copy") and src.inputs:
            nxt = [src.inputs[0]]  # the viewed tensor, to find a constant behind it
        t = nxt[0] if nxt else None
        seen += 1
    if unsupported is not None:
        raise unsupported


OutputSpec = Union[str, Tuple[str, Sequence[int], dtypes.dtype]]


def create_op(type: str, inputs: Sequence[Optional["Tensor"]], outputs: Sequence[OutputSpec] = (),
              attrs: Optional[Dict[str, Any]] = None, name: Optional[str] = None,
              called_graphs: Sequence["Graph"] = (), graph: Optional["Graph"] = None) -> Op:
    """Create an op of a declared type (:mod:`ipuxl.opdef`) in the current graph.

    Args:
        type: the op type; its :class:`~ipuxl.opdef.OpDef` gives the output
            shapes and dtypes (its shape rule, which validates the inputs),
            the storage aliases and the inputs the op writes.
        inputs: input tensors, which must belong to the graph (None: absent optional).
        outputs: the name of each output (scoped and made unique), or
            ``(name, shape, dtype)``; a given shape and dtype must equal the
            shape rule's (a builder that disagrees with its rule is a bug).
        attrs: attributes (ints, floats, strings, lists of them; keys
            starting with ``_`` stay in Python).
        name: op name; defaults to the lower-cased type.
        called_graphs: graphs the op calls (call, repeat, conditional).
    """
    Tensor = _TENSOR or _tensor_class()
    d = get_opdef(type)
    ctx = get_current_context()
    g = graph if graph is not None else ctx.graph
    for t in inputs:
        if t is None or (t._remote is None and t._graph is g):
            continue
        if t._remote is not None:
            rb, entry, _ = t._remote
            raise ValueError(
                f"{type}: tensor {t.id!r} is a remote variable: its value lives in entry {entry} "
                f"of remote buffer {rb.remote_buffer_id} (Streaming Memory), not on chip. Load "
                f"it with ops.remote_load(buffer, {entry}).")
        if t.graph is not g:
            if t.ir is not g.ir:
                raise ValueError(
                    f"{type}: input tensor {t.id!r} belongs to another Ir ({t.ir.id}) than the "
                    f"current graph {g.name!r} ({g.ir.id})")
            raise ValueError(
                f"{type}: input tensor {t.id!r} is in graph {t.graph.name!r}, not in the current "
                f"graph {g.name!r}. Pass it as a graph input instead.")
    for cg in called_graphs:
        if cg.ir is not g.ir:
            raise ValueError(f"{type}: graph {cg.name!r} belongs to another Ir ({cg.ir.id}) than "
                             f"the calling graph {g.name!r} ({g.ir.id})")
    attrs = dict(attrs) if attrs else {}
    specs = d.infer(list(inputs), attrs, list(called_graphs))
    names = []
    for k, out in enumerate(outputs):
        if isinstance(out, str):
            names.append(out)
            continue
        out_name, shape, dt = out
        want = specs[k] if k < len(specs) else None
        if want is None or tuple(map(int, shape)) != tuple(want[0]) or dt != want[1]:
            raise AssertionError(
                f"{type}: the builder's output {k} {dt}{tuple(shape)} disagrees with the op's "
                f"shape rule {want}")
        names.append(out_name)
    lower = name or type.lower()
    if len(names) < len(specs):
        base = lower.split("/")[-1]
        names += [f"{base}_out" if len(specs) == 1 else f"{base}_out{k}"
                  for k in range(len(names), len(specs))]
    if len(names) != len(specs):
        raise AssertionError(f"{type}: {len(names)} output names for {len(specs)} outputs")
    op_name = g._unique_op_name(ctx._scoped_name(lower))
    aliases = d.aliases(inputs, attrs, called_graphs)
    modified = d.modifies(inputs, attrs, called_graphs)
    op = Op(g, type, op_name, attrs, called_graphs, aliases, modified, inputs, ctx)
    outs = op.outputs
    create = Tensor._create
    for out_name, (shape, dt) in zip(names, specs):
        outs.append(create(g, out_name, tuple(map(int, shape)), dt, producer=op))
    for i in op.modified:
        _check_writable(name or type, op.inputs[i])
    g._add_op(op)
    ctx._op_created(op)
    return op
