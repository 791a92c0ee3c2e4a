"""Subgraph calls: ``call``, ``call_with_info`` and ``CallSiteInfo``.

A call copies its inputs into the called graph's inputs, runs the graph (its
body exists once, however many call sites there are) and copies the outputs
out. Writes to a graph input reach the parent only for inputs marked modified:
by-reference inputs (``TensorByRef``) and those passed to
``CallSiteInfo.set_parent_input_modified``.
"""
from typing import Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from .._positions import position
from ..context import get_current_graph
from ..errors import popart_exception
from ..graph import Graph
from ..grad import register_grad
from ..op import Op, create_op
from ..opdef import define_op, get_opdef
from .rules import called_graph_outputs
from ..tensor import Tensor, constant
from ..utils import table_to_string

__all__ = ["call", "call_with_info", "CallSiteInfo"]


def _flatten_inputs(inputs) -> List:
    out = []
    for x in inputs:
        if isinstance(x, (list, tuple)):
            out.extend(x)
        else:
            out.append(x)
    return out


def _io_table(graph: Graph, bound: Dict[Tensor, object]) -> str:
    rows = [["index", "subgraph input", "shape", "dtype", "parent tensor"]]
    for i, t in enumerate(graph.inputs):
        p = bound.get(t)
        rows.append([i, t.id, t.shape, t.dtype.name,
                     "(missing)" if p is None else getattr(p, "id", repr(p))])
    return table_to_string(rows)


def bind_inputs(op: str, graph: Graph, inputs: Iterable, inputs_dict: Optional[Mapping],
                check_inputs: bool = True) -> List[Tensor]:
    """Parent tensors for each input of ``graph``, in order; host values
    become constants of the graph input's dtype."""
    if not isinstance(graph, Graph):
        raise TypeError(f"{op}: expected a Graph, got {type(graph).__name__}")
    parent = get_current_graph()
    if graph is parent:
        raise ValueError(f"{op}: graph {graph.name!r} cannot call itself")
    if graph is graph.ir.main_graph:
        raise ValueError(f"{op}: the main graph cannot be called")
    positional = _flatten_inputs(inputs)
    g_inputs = list(graph.inputs)
    bound: Dict[Tensor, object] = {}
    if len(positional) > len(g_inputs):
        raise ValueError(
            f"{op}: too many inputs for graph {graph.name!r}: got {len(positional)} positional "
            f"inputs but the graph has {len(g_inputs)}.\n{_io_table(graph, bound)}")
    for sub, val in zip(g_inputs, positional):
        bound[sub] = val
    for sub, val in (inputs_dict or {}).items():
        if not isinstance(sub, Tensor) or sub.graph is not graph or \
                position(graph, "_inputs", sub) < 0:
            raise ValueError(
                f"{op}: inputs_dict key {getattr(sub, 'id', sub)!r} is not an input of graph "
                f"{graph.name!r}.\n{_io_table(graph, bound)}")
        if sub in bound:
            raise ValueError(
                f"{op}: input {sub.id!r} of graph {graph.name!r} was given twice (positionally "
                f"and in inputs_dict).\n{_io_table(graph, bound)}")
        bound[sub] = val
    missing = [t for t in g_inputs if t not in bound]
    if missing:
        raise ValueError(
            f"{op}: missing inputs for graph {graph.name!r}: "
            f"{', '.join(t.id for t in missing)}.\n{_io_table(graph, bound)}")
    out = []
    for sub in g_inputs:
        val = bound[sub]
        if not isinstance(val, Tensor):
            val = constant(np.asarray(val, dtype=sub.dtype.as_numpy()), sub.dtype,
                           name=f"{sub.name}_const")
        if val.graph is not parent:
            raise ValueError(
                f"{op}: tensor {val.id!r} for input {sub.id!r} is in graph {val.graph.name!r}, "
                f"not in the calling graph {parent.name!r}")
        if check_inputs and (val.dtype != sub.dtype or val.shape != sub.shape):
            raise popart_exception(
                f"{op}: parent tensor {val.id!r} {val.dtype.name}{val.shape} does not match "
                f"input {sub.id!r} {sub.dtype.name}{sub.shape} of graph {graph.name!r}")
        out.append(val)
    return out


def _output_specs(graph: Graph):
    return [(t.name.split("/")[-1] if "/" in t.name else t.name, t.shape, t.dtype)
            for t in graph.outputs]


class CallSiteInfo:
    """The parent-side view of one call of a graph: which parent tensors feed
    which graph inputs, and which receive its outputs."""

    def __init__(self, op: Op):
        if get_opdef(op.type).kind not in ("call", "repeat"):
            raise TypeError(f"CallSiteInfo needs a Call or Repeat op, got {op.type}")
        self._op = op

    @property
    def called_graph(self) -> Graph:
        return self._op.called_graphs[0]

    @property
    def inputs(self) -> Tuple[Tensor, ...]:
        return tuple(self._op.inputs)

    @property
    def outputs(self) -> Tuple[Tensor, ...]:
        return tuple(self._op.outputs)

    def graph_to_parent_input_index(self, idx: int) -> int:
        self._check_index(idx, len(self._op.inputs), "input")
        return idx

    def parent_to_graph_input_index(self, idx: int) -> int:
        self._check_index(idx, len(self._op.inputs), "input")
        return idx

    def graph_to_parent_output_index(self, idx: int) -> int:
        self._check_index(idx, len(self._op.outputs), "output")
        return idx

    def parent_to_graph_output_index(self, idx: int) -> int:
        self._check_index(idx, len(self._op.outputs), "output")
        return idx

    def _check_index(self, idx, n, what):
        if not 0 <= idx < n:
            raise IndexError(f"{what} index {idx} out of range for a call with {n} {what}s")

    def graph_to_parent(self, graph_tensor: Tensor) -> Tensor:
        """The parent tensor connected to a graph input or output."""
        g = self.called_graph
        k = position(g, "_inputs", graph_tensor)
        if k >= 0:
            return self._op.inputs[k]
        k = position(g, "_outputs", graph_tensor)
        if k >= 0:
            return self._op.outputs[k]
        raise ValueError(f"Tensor {getattr(graph_tensor, 'id', graph_tensor)} is not an input or "
                         f"output of the called graph {g.name}.")

    def parent_to_graph(self, parent_tensor: Tensor) -> Tensor:
        """The graph tensor connected to a parent input or output (first match)."""
        g = self.called_graph
        i = position(self._op, "inputs", parent_tensor)
        if i >= 0:
            return g._inputs[i]
        i = position(self._op, "outputs", parent_tensor)
        if i >= 0:
            return g._outputs[i]
        raise ValueError(f"Tensor {getattr(parent_tensor, 'id', parent_tensor)} is not an input "
                         f"or output of the call of {g.name}.")

    def parent_input(self, idx: int) -> Tensor:
        return self._op.inputs[self.graph_to_parent_input_index(idx)]

    def parent_output(self, idx: int) -> Tensor:
        return self._op.outputs[self.graph_to_parent_output_index(idx)]

    def set_parent_input_modified(self, parent_tensor: Tensor,
                                  infer_modified_regions: bool = False) -> None:
        """Make writes to the graph input fed by ``parent_tensor`` visible in
        the parent after the call (the whole tensor is marked modified)."""
        found = False
        for i, t in enumerate(self._op.inputs):
            if t == parent_tensor:
                self._op.modified.add(i)
                found = True
        if not found:
            raise ValueError(f"Tensor {parent_tensor.id} is not an input of this call site")

    @property
    def op(self) -> Op:
        return self._op

    def __repr__(self):
        return f"CallSiteInfo[{self.called_graph.name} @ {self._op.name}]"


def _create_call(kind: str, graph: Graph, parents: List[Tensor], attrs=None) -> Op:
    op = create_op(kind, parents, [n for n, _, _ in _output_specs(graph)], attrs or {},
                   name=kind.lower(), called_graphs=[graph])
    # As PopART's TensorInfo: a graph output's meta shape (a replica shard's
    # whole shape) reaches the call's output.
    for out, g_out in zip(op.outputs, graph.outputs):
        if g_out.meta_shape:
            out._meta_shape = tuple(g_out.meta_shape)
    return op


def _by_ref_inputs(ins, attrs, graphs=()):
    """Inputs passed by reference (``TensorByRef``): the callee's writes reach
    the caller. ``CallSiteInfo.set_parent_input_modified`` adds more."""
    g = graphs[0]
    return [i for i, t in enumerate(g.inputs) if t in g._by_ref_inputs]


# A call stands for everything its graph does (host IO, prints, writes):
# the lowering never drops one.
define_op("Call", called_graph_outputs, kind="call", modifies=_by_ref_inputs, side_effects=True)


def call_with_info(graph: Graph, *inputs: Union[Tensor, List[Tensor]],
                   inputs_dict: Optional[Mapping[Tensor, Tensor]] = None,
                   check_inputs: bool = True) -> CallSiteInfo:
    """Call ``graph`` and return the call site's :class:`CallSiteInfo`."""
    parents = bind_inputs("call", graph, inputs, inputs_dict, check_inputs)
    return CallSiteInfo(_create_call("Call", graph, parents))


def call(graph: Graph, *inputs: Union[Tensor, List[Tensor]],
         inputs_dict: Optional[Mapping[Tensor, Tensor]] = None) -> Tuple[Tensor, ...]:
    """Call ``graph`` with ``inputs`` (positional, then ``inputs_dict`` keyed
    by the graph's input tensors); returns its outputs in the parent graph."""
    return call_with_info(graph, *inputs, inputs_dict=inputs_dict).outputs


@register_grad("Call")
def _call_grad(ctx):
    """Differentiate the called graph (once per graph) and call its gradient
    graph; missing output gradients become zeros at the call boundary."""
    op = ctx.op
    sub = op.called_graphs[0]
    info = ctx.subgraph_grad_info(sub)
    from ..transforms.autodiff import ExpectedConnectionType

    # Index maps by identity: list.index would compare tensors one by one.
    in_idx = {id(t): i for i, t in enumerate(sub._inputs)}
    out_idx = {id(t): i for i, t in enumerate(sub._outputs)}
    args = []
    for ec in info.expected_inputs:
        t = ec.fwd_tensor
        if ec.connection_type == ExpectedConnectionType.FwdGrad:
            args.append(ctx.g_or_zeros(out_idx[id(t)]))
        elif id(t) in in_idx:
            args.append(ctx.x(in_idx[id(t)]))
        else:
            args.append(ctx.y(out_idx[id(t)]))
    outs = call(info.graph, *args) if info.expected_outputs else ()
    result = [None] * len(op.inputs)
    for ec, g in zip(info.expected_outputs, outs):
        i = in_idx[id(ec.fwd_tensor)]
        result[i] = g if ctx.needs(i) else None
    return result
