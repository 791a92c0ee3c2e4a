"""``Graph``, mirroring ``popxl.Graph``: ops in schedule order, tensors,
inputs and outputs. Build one with ``with graph:`` or ``ir.create_graph``."""
from typing import TYPE_CHECKING, Callable, Dict, List, Set, Tuple

from .context import get_current_context

if TYPE_CHECKING:
    from .ir import Ir
    from .op import Op
    from .tensor import Constant, Tensor, Variable

__all__ = ["Graph"]


class Graph:
    """A graph of an :class:`~ipuxl.Ir`. Obtain from ``ir.main_graph`` or
    ``ir.create_graph``; never constructed directly."""

    def __init__(self):
        raise TypeError("Graph cannot be constructed directly; use ir.create_graph or ir.main_graph")

    @classmethod
    def _create(cls, ir: "Ir", name: str) -> "Graph":
        self = object.__new__(cls)
        self._ir = ir
        self._name = name
        # Graphs key the lowering's and autodiff's dicts: hashed once (the
        # name and Ir never change).
        self._hash = hash((name, id(ir)))
        self._scope_prefix = f"{name}/" if name else ""
        self._ops: List["Op"] = []
        self._ops_set: Set["Op"] = set()
        self._tensors: Dict[str, "Tensor"] = {}
        self._inputs: List["Tensor"] = []
        self._outputs: List["Tensor"] = []
        self._by_ref_inputs: Set["Tensor"] = set()
        self._topo_cons: List[Tuple["Op", "Op"]] = []
        self._op_names: Set[str] = set()
        self._op_created_hooks: Dict[int, Callable] = {}
        self._next_hook = 0
        self._call_sites: List["Op"] = []  # ops (in any graph) that call this graph
        return self

    # ---- identity
    @property
    def name(self) -> str:
        return self._name

    @property
    def id(self) -> str:
        return self._name

    @property
    def ir(self) -> "Ir":
        return self._ir

    @property
    def main_graph(self) -> "Graph":
        return self._ir.main_graph

    # ---- contents
    @property
    def inputs(self) -> Tuple["Tensor", ...]:
        return tuple(self._inputs)

    @property
    def inputs_by_name(self) -> Dict[str, "Tensor"]:
        return {t.name: t for t in self._inputs}

    @property
    def outputs(self) -> Tuple["Tensor", ...]:
        return tuple(self._outputs)

    @property
    def tensors(self) -> Tuple["Tensor", ...]:
        return tuple(self._tensors.values())

    @property
    def variables(self) -> Tuple["Variable", ...]:
        from .tensor import Variable

        return tuple(t for t in self._tensors.values() if isinstance(t, Variable))

    @property
    def constants(self) -> Tuple["Constant", ...]:
        from .tensor import Constant

        return tuple(t for t in self._tensors.values() if isinstance(t, Constant))

    @property
    def ops(self) -> Tuple["Op", ...]:
        """Ops in schedule (creation) order."""
        return tuple(self._ops)

    @property
    def called_graphs(self) -> Tuple["Graph", ...]:
        seen: List["Graph"] = []
        for op in self._ops:
            for g in op.called_graphs:
                if g not in seen:
                    seen.append(g)
        return tuple(seen)

    def get_tensor(self, tensor_id: str) -> "Tensor":
        try:
            return self._tensors[tensor_id]
        except KeyError:
            raise ValueError(f"graph {self.name!r} has no tensor {tensor_id!r}") from None

    def get_op_schedule(self) -> Tuple["Op", ...]:
        return tuple(self._ops)

    # PopART-style names used by PopXL tests through _pb_graph
    getOps = get_op_schedule  # noqa: N815
    getOpSchedule = get_op_schedule  # noqa: N815

    def print_schedule(self) -> str:
        """Print (and return) the ops of this graph in schedule order; a Call
        shows the graph it calls."""
        lines = [f"Graph {self.name or '(main)'}:"]
        for op in self._ops:
            ins = ", ".join("-" if t is None else t.name for t in op.inputs)
            outs = ", ".join(t.name for t in op.outputs)
            called = ""
            if op.called_graphs:
                called = " <" + ", ".join(g.name for g in op.called_graphs) + ">"
            lines.append(f"  {op.type}{called} ({ins}) -> ({outs})")
        text = "\n".join(lines)
        print(text)
        return text

    # ---- PopART-style access used by PopXL programs and tests
    @property
    def _pb_graph(self) -> "Graph":
        """PopXL programs reach PopART's graph through ``_pb_graph``; the
        methods they use are provided by Graph itself."""
        return self

    def setCanBeRecursivelyAutodiffed(self, flag: bool) -> None:  # noqa: N802 - PopART name
        """Whether autodiff may differentiate this graph when it reaches it
        through a call (otherwise its gradient must be supplied through
        ``called_graphs_grad_info``)."""
        self._can_be_recursively_autodiffed = bool(flag)

    def canBeRecursivelyAutodiffed(self) -> bool:  # noqa: N802
        return getattr(self, "_can_be_recursively_autodiffed", True)

    # ---- context manager
    def __enter__(self) -> "Graph":
        get_current_context().push_graph(self)
        return self

    def __exit__(self, *exc):
        get_current_context().pop_graph()

    # ---- hooks
    def register_op_created_hook(self, fn: Callable[["Op"], None]) -> int:
        """Call ``fn(op)`` for every op created in this graph; returns a handle."""
        h = self._next_hook
        self._next_hook += 1
        self._op_created_hooks[h] = fn
        return h

    def remove_op_created_hook(self, handle: int) -> None:
        if handle not in self._op_created_hooks:
            raise ValueError(f"no op-created hook with handle {handle}")
        del self._op_created_hooks[handle]

    # ---- internals
    def _create_tensor_id(self, name: str) -> str:
        scoped = self._scope_prefix + get_current_context()._scoped_name(name)
        if scoped not in self._tensors:
            return scoped
        return self._ir._unique_tensor_id(scoped, self._tensors)

    def _unique_op_name(self, name: str) -> str:
        if name not in self._op_names:
            self._op_names.add(name)
            return name
        # Names are never released, so every suffix below the last one
        # handed out for this base is still taken: resume from there (keeps
        # creating n ops of one type linear instead of quadratic).
        counters = self.__dict__.setdefault("_op_name_next", {})
        i = counters.get(name, 1)
        while f"{name}_{i}" in self._op_names:
            i += 1
        counters[name] = i + 1
        self._op_names.add(f"{name}_{i}")
        return f"{name}_{i}"

    def _add_tensor(self, t: "Tensor"):
        self._tensors[t.id] = t

    def _add_op(self, op: "Op"):
        self._ops.append(op)
        self._ops_set.add(op)
        for t in op.inputs:
            if t is not None:
                t._consumers.append(op)
        for g in op.called_graphs:
            g._call_sites.append(op)

    def _add_input(self, t: "Tensor", by_ref: bool = False, index=None):
        if index is None:
            self._inputs.append(t)
        else:
            self._inputs.insert(index, t)
        if by_ref:
            self._by_ref_inputs.add(t)

    def _add_output(self, t: "Tensor"):
        self._outputs.append(t)

    def _add_topo_con(self, before: "Op", after: "Op"):
        self._topo_cons.append((before, after))

    def __contains__(self, t) -> bool:
        from .tensor import Tensor

        if not isinstance(t, Tensor):
            raise TypeError(f"`in graph` expects a Tensor, got {type(t).__name__}")
        return self._tensors.get(t.id) is t

    def __eq__(self, other):
        if not isinstance(other, Graph):
            raise TypeError(f"Cannot compare a Graph with {type(other).__name__}")
        return other._ir is self._ir and other._name == self._name

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"Graph[id={self.id} name={self.name}]"
