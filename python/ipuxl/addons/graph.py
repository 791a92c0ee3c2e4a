"""``GraphWithNamedArgs`` and ``BoundGraph`` (``popxl_addons.graph``).

A ``GraphWithNamedArgs`` is a popxl Graph plus ``args``: NamedTensors naming
some of its inputs (usually the variable inputs a Module added). ``bind``
pairs those names with tensors of the calling graph, giving a
``BoundGraph`` that can be called like a function.
"""
from collections import defaultdict
from typing import TYPE_CHECKING, Iterable, List, Mapping, Optional, Tuple, Union

from ..graph import Graph
from ..tensor import Tensor
from ..transforms.autodiff import GradGraphInfo
from .dot_tree import to_mapping
from .named_tensors import NamedTensors, TensorMap

if TYPE_CHECKING:
    from ..ops.call import CallSiteInfo
    from .module import Module

__all__ = ["GraphWithNamedArgs", "BoundGraph"]

CallArg = Union[Tensor, List[Tensor], int, float]


class BoundGraph:
    """A graph plus ``{graph input: parent tensor}`` bindings.

    Calls pass the bound tensors for those inputs; ``args`` given to a call
    take precedence over the bindings."""

    def __init__(self, graph: Graph, args: Optional[TensorMap] = None):
        if not isinstance(graph, Graph):
            raise TypeError(f"BoundGraph expects a popxl Graph, got {type(graph).__name__}")
        self.graph = graph
        self.args = dict(args or {})

    def call(self, *targs: CallArg, args: Optional[TensorMap] = None) -> Tuple[Tensor, ...]:
        """``ops.call`` of the graph with the positional ``targs`` (first
        graph inputs) and the bound tensors; returns the call's outputs."""
        return self.call_with_info(*targs, args=args).outputs

    def call_with_info(self, *targs: CallArg, args: Optional[TensorMap] = None) -> "CallSiteInfo":
        """Like ``call`` but returns the ``CallSiteInfo``."""
        from .. import ops

        inputs_dict = {**self.args, **dict(args or {})}
        return ops.call_with_info(self.graph, *targs, inputs_dict=inputs_dict)

    def bind(self, args: TensorMap) -> "BoundGraph":
        """A new BoundGraph with these bindings added (overriding existing ones)."""
        return BoundGraph(self.graph, {**self.args, **dict(args)})

    def subgraph_io_map(self, *targs: Tensor, args: Optional[TensorMap] = None,
                        outs: Optional[Iterable[Tensor]] = None) -> TensorMap:
        """``{graph input: call input}`` for ``targs``/``args``/bindings plus
        ``{graph output: call output}`` for ``outs``."""
        m = {**self.args, **dict(args or {})}
        for i, t in enumerate(targs):
            m[self.graph.inputs[i]] = t
        for i, t in enumerate(outs or ()):
            m[self.graph.outputs[i]] = t
        return m

    def __repr__(self):
        return f"BoundGraph(graph={self.graph.name}, bound={len(self.args)} inputs)"


class GraphWithNamedArgs:
    """A Graph, the NamedTensors naming some of its inputs and, for gradient
    graphs, the ``GradGraphInfo``.

    Args:
        graph: the graph.
        args: named graph inputs (default empty).
        grad_graph_info: set when ``graph`` is a gradient graph.
        from_module: the Module that built the graph.
        aux: kept for popxl_addons compatibility (``build_grad`` modules).
        called_graphs_grad_info: ``{forward graph: GradGraphInfo}`` to reuse
            when this graph is differentiated.
    """

    def __init__(self, graph: Graph, args: Optional[NamedTensors] = None,
                 grad_graph_info: Optional[GradGraphInfo] = None,
                 from_module: "Optional[Module]" = None, aux=None,
                 called_graphs_grad_info: Optional[Mapping] = None):
        if not isinstance(graph, Graph):
            raise TypeError(f"GraphWithNamedArgs expects a popxl Graph, got {type(graph).__name__}")
        if args is not None and not isinstance(args, NamedTensors):
            raise TypeError(f"GraphWithNamedArgs args must be NamedTensors, got {type(args).__name__}")
        self.graph = graph
        self.args = args if args is not None else NamedTensors()
        self._grad_graph_info = grad_graph_info
        self._from_module = from_module
        self._aux = aux
        self.called_graphs_grad_info = dict(called_graphs_grad_info or {})
        self.autodiff_applied = False

    @classmethod
    def from_grad_graph(cls, grad_graph_info: GradGraphInfo,
                        args: Optional[NamedTensors] = None) -> "GraphWithNamedArgs":
        return cls(grad_graph_info.graph, args, grad_graph_info)

    @property
    def grad_graph_info(self) -> GradGraphInfo:
        """The GradGraphInfo of a gradient graph (AttributeError otherwise)."""
        if self._grad_graph_info is None:
            raise AttributeError("`grad_graph_info` attribute does not exist: "
                                 f"{self.graph.name} is not a gradient graph")
        return self._grad_graph_info

    @grad_graph_info.setter
    def grad_graph_info(self, info: GradGraphInfo):
        self._grad_graph_info = info

    def bind(self, args: Optional[NamedTensors] = None) -> BoundGraph:
        """Bind named tensors of the calling graph to the named inputs with
        the same keys. Only common keys are bound (extra or missing keys are
        not an error, as in popxl_addons)."""
        if args is not None and not isinstance(args, NamedTensors):
            raise TypeError(f"bind expects NamedTensors, got {type(args).__name__}")
        return BoundGraph(self.graph, to_mapping(self.args, args) if args is not None else {})

    def call(self, *targs: CallArg, args: Optional[TensorMap] = None) -> Tuple[Tensor, ...]:
        """Call with nothing bound (``args``: a ``{graph input: tensor}`` map)."""
        return self.bind().call(*targs, args=args)

    def call_with_info(self, *targs: CallArg, args: Optional[TensorMap] = None) -> "CallSiteInfo":
        return self.bind().call_with_info(*targs, args=args)

    def autodiff(self, grads_provided: Optional[Iterable[Tensor]] = None,
                 grads_required: Optional[Iterable[Tensor]] = None,
                 called_graphs_grad_info: Optional[Mapping] = None, method: str = "auto",
                 force: bool = False) -> "GraphWithNamedArgs":
        """Differentiate this graph.

        ``method`` "build_grad" builds the gradient graph with the
        ``build_grad`` of the Module that created this graph
        (``Module.create_grad_graph``); "autodiff" uses the autodiff
        transform (:func:`ipuxl.addons.autodiff`); "auto" (the default) does
        the first when that Module implements ``build_grad`` and the second
        otherwise.

        Raises:
            ValueError: unknown ``method``.
            RuntimeError: autodiff was already applied (autodiff adds outputs
                to the forward graph, so a second application differs) and
                ``force`` is False; or "build_grad" without a ``from_module``
                implementing ``build_grad``.
        """
        from .transforms.autodiff import autodiff

        if method not in ("auto", "build_grad", "autodiff"):
            raise ValueError(f"`method` must be 'auto', 'build_grad' or 'autodiff', not {method!r}")
        if self.autodiff_applied and not force:
            raise RuntimeError(
                "Autodiff has already been applied to the graph; autodiff modifies the forward "
                "graph in place, so applying it again does not give the same result. Use "
                "`force=True` to ignore this guardrail.")
        module = self._from_module
        if method in ("auto", "build_grad"):
            if module is not None and module.implements_grad_graph:
                grad = module.create_grad_graph(self, grads_provided, grads_required)
                self.autodiff_applied = True
                return grad
            if method == "build_grad":
                raise RuntimeError(
                    "autodiff(method='build_grad') needs the graph to come from a Module that "
                    "implements `build_grad`: it works only when that method is overridden and "
                    "`from_module` is specified when this GraphWithNamedArgs is created")
        merged = {**_normalise_grad_info_map(called_graphs_grad_info), **self.called_graphs_grad_info}
        grad = autodiff(self, grads_provided, grads_required, called_graphs_grad_info=merged)
        self.autodiff_applied = True
        return grad

    def copy(self) -> "GraphWithNamedArgs":
        """Shallow copy (drops ``from_module``, ``aux`` and
        ``called_graphs_grad_info``, as popxl_addons does)."""
        return GraphWithNamedArgs(self.graph, self.args.copy(), self._grad_graph_info)

    def print_schedule(self) -> str:
        """The graph's ops in schedule order, in popxl_addons' format::

            Graph : Linear_subgraph(0)
              (%1, weight=%2, bias=%3) -> (%5) {
                MatMul.100 (%1 [(2, 4) float32], %2 [(4, 32) float32]) -> (%4 [(2, 32) float32])
                Add.101 (%4 [(2, 32) float32], %3 [(32,) float32]) -> (%5 [(2, 32) float32])
              }

        Tensors are numbered by first appearance; named inputs show their key.
        Returns the string (it does not print)."""
        counter = iter(range(1, 1 << 62))
        ids = defaultdict(lambda: next(counter))

        def tstr(t: Tensor) -> str:
            return f"%{ids[t.id]} [{t.shape} {t.dtype.name}]"

        flat = self.args.to_dict()
        name_of = {}
        for k in sorted(flat):
            name_of.setdefault(flat[k], k)
        ins = []
        for t in self.graph.inputs:
            ins.append(f"{name_of[t]}=%{ids[t.id]}" if t in name_of else f"%{ids[t.id]}")
        op_lines = []
        for op in self.graph.ops:
            head = f"{op.type}.{op.id}"
            if op.called_graphs:
                head += "(" + ", ".join(g.id for g in op.called_graphs) + ")"
            i = ", ".join(tstr(t) for t in op.inputs if t is not None)
            o = ", ".join(tstr(t) for t in op.outputs)
            op_lines.append(f"{head} ({i}) -> ({o})")
        outs = ", ".join(f"%{ids[t.id]}" for t in self.graph.outputs)
        body = "    " + "\n    ".join(op_lines) + "\n"
        return f"Graph : {self.graph.name}\n  ({', '.join(ins)}) -> ({outs}) {{\n{body}  }}"

    def __repr__(self):
        kind = "grad " if self._grad_graph_info is not None else ""
        return (f"GraphWithNamedArgs({kind}graph={self.graph.name}, "
                f"args=[{', '.join(self.args.keys_flat())}])")


def _normalise_grad_info_map(m: Optional[Mapping]) -> dict:
    """``{Graph|GraphWithNamedArgs|BoundGraph: GradGraphInfo|GraphWithNamedArgs}``
    → ``{Graph: GradGraphInfo}``."""
    out = {}
    for fwd, grad in dict(m or {}).items():
        g = fwd if isinstance(fwd, Graph) else fwd.graph
        info = grad if isinstance(grad, GradGraphInfo) else grad.grad_graph_info
        out[g] = info
    return out
