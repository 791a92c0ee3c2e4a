"""The graph-building context, mirroring ``popxl.context``.

A single module-level ``Context`` holds the stack of graphs being built, the
name scopes, the ipu / tile-set / execution-context settings applied to new
ops, and the ``in_sequence`` state.
"""
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple, Union

if TYPE_CHECKING:
    from .graph import Graph
    from .ir import Ir
    from .op import Op

__all__ = [
    "get_current_graph", "get_main_graph", "get_ir", "gcg", "gmg", "gir", "in_sequence",
    "name_scope", "ipu", "io_tiles", "get_current_context",
]


class Context:
    def __init__(self):
        self._reset()

    def _reset(self):
        self._graphs: List["Graph"] = []
        self._ipu_id: int = 0
        self._io_tile_set: bool = False
        self._name_scopes: List[str] = []
        self._execution_context: str = "normal"
        self._in_sequence: Optional[bool] = None
        self._previous_ops: Dict[Tuple[str, str], List["Op"]] = {}
        self._hooks: Dict[int, Callable] = {}

    @property
    def graph(self) -> "Graph":
        if not self._graphs:
            raise RuntimeError(
                "Trying to access a graph, but no graph has been selected. "
                "Use `with ir.main_graph:` (or a subgraph) first.")
        return self._graphs[-1]

    @property
    def main_graph(self) -> "Graph":
        return self.graph.ir.main_graph

    def push_graph(self, g: "Graph"):
        if self._graphs and self._graphs[0].ir is not g.ir:
            raise RuntimeError(
                f"Cannot enter graph {g.name!r} of {g.ir!r}: the context already holds graphs of "
                f"{self._graphs[0].ir!r}. Graphs of different Irs cannot be nested.")
        self._graphs.append(g)

    def pop_graph(self) -> "Graph":
        return self._graphs.pop()

    @property
    def ipu_id(self) -> int:
        """The virtual IPU new ops are placed on."""
        return self._ipu_id

    @property
    def io_tile_set(self) -> bool:
        """Whether new ops are placed on the IO tiles."""
        return self._io_tile_set

    @property
    def in_sequence(self) -> Optional[bool]:
        return self._in_sequence

    @in_sequence.setter
    def in_sequence(self, value: Optional[bool]):
        self._in_sequence = value
        if value is None:
            self._previous_ops.clear()

    def _op_created(self, op: "Op"):
        """Called for every op a builder creates: applies in_sequence and hooks."""
        mode = self._in_sequence
        if mode is not None:
            key = (op.graph.id, op.execution_context)
            prev = self._previous_ops.setdefault(key, [])
            if mode is True:
                for before in prev:
                    if before is not None and before is not op and before.graph is op.graph \
                            and before in op.graph._ops_set:
                        op.graph._add_topo_con(before, op)
                self._previous_ops[key] = [op]
            else:
                if prev:
                    if prev[0] is not None:
                        op.graph._add_topo_con(prev[0], op)
                else:
                    prev.append(None)  # sentinel: no constraint for the first block
                prev.append(op)
        hooks = op.graph._op_created_hooks
        if hooks:
            for hook in list(hooks.values()):
                hook(op)

    def _scoped_name(self, name: str) -> str:
        return "/".join(self._name_scopes + [name]) if self._name_scopes else name


_CURRENT_CONTEXT = Context()


def get_current_context() -> Context:
    return _CURRENT_CONTEXT


def get_current_graph() -> "Graph":
    """The graph at the top of the context stack (raises RuntimeError if none)."""
    return _CURRENT_CONTEXT.graph


def get_main_graph() -> "Graph":
    """The main graph of the Ir of the current context."""
    return _CURRENT_CONTEXT.main_graph


def get_ir() -> "Ir":
    """The Ir of the current context."""
    return _CURRENT_CONTEXT.graph.ir


gcg = get_current_graph
gmg = get_main_graph
gir = get_ir


@contextmanager
def name_scope(name: str):
    """Prefix the names of ops and tensors created inside with ``name/``."""
    ctx = get_current_context()
    ctx._name_scopes.append(name)
    try:
        yield list(ctx._name_scopes)
    finally:
        ctx._name_scopes.pop()


@contextmanager
def ipu(ipu: int):
    """Place ops created inside on virtual IPU ``ipu`` (``None``, as in
    PopXL, leaves them unannotated: their IPU is then inferred, like a
    variable's, from their consumers)."""
    if ipu is not None and (isinstance(ipu, bool) or not isinstance(ipu, int) or ipu < 0):
        raise ValueError(f"ipu must be a non-negative int, got {ipu!r}")
    ctx = get_current_context()
    prev = ctx._ipu_id
    ctx._ipu_id = ipu
    try:
        yield ipu
    finally:
        ctx._ipu_id = prev


@contextmanager
def io_tiles():
    """Place ops created inside on the IO tiles."""
    ctx = get_current_context()
    prev = ctx._io_tile_set
    ctx._io_tile_set = True
    try:
        yield
    finally:
        ctx._io_tile_set = prev


_CONTEXT_NAMES = {
    "Normal": "normal", "AccumulateOuterFragment": "accumulate_outer",
    "WeightsFromHostFragment": "weights_from_host", "WeightsToHostFragment": "weights_to_host",
    "OptimizerFromHostFragment": "optimizer_from_host", "Subgraph": "subgraph",
}


def _context_name(kind) -> str:
    """``ExecutionContext.X`` (or its name, or our lower-case name) as the
    name the lowering uses."""
    name = getattr(kind, "name", kind)
    if name in _CONTEXT_NAMES:
        return _CONTEXT_NAMES[name]
    if name in _CONTEXT_NAMES.values():
        return name
    raise ValueError(f"unknown execution context {kind!r}; expected a popxl.ExecutionContext "
                     f"({', '.join(_CONTEXT_NAMES)})")


@contextmanager
def _execution_context(kind):
    """Place the ops created inside in execution context ``kind``
    (``popxl.ExecutionContext``): ops of the main graph in
    ``WeightsFromHostFragment`` / ``WeightsToHostFragment`` run with
    ``weights_from_host`` / ``weights_to_host`` instead of ``run``."""
    ctx = get_current_context()
    prev = ctx._execution_context
    ctx._execution_context = _context_name(kind)
    try:
        yield
    finally:
        ctx._execution_context = prev


@contextmanager
def in_sequence(mode: Union[bool, str] = True):
    """Execute the ops created inside in creation order (``True``), unordered
    among themselves but after the enclosing sequence (``False``), or with no
    constraint (``'pass'``). Usable as a decorator."""
    if mode is None or mode not in (True, False, "pass"):
        raise TypeError(f"in_sequence mode must be True, False or 'pass', not {mode!r}")
    ctx = get_current_context()
    prev = ctx.in_sequence
    ctx.in_sequence = None if mode == "pass" else mode
    try:
        yield
    finally:
        ctx.in_sequence = prev


def op_debug_context(name: str):
    """Decorator kept for PopXL compatibility; debug info is the op name."""
    def wrap(fn):
        return fn
    return wrap


def debug_context_frame_offset(i: int):
    def wrap(fn):
        return fn
    return wrap
