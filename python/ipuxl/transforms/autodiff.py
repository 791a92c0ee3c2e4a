"""``autodiff``: reverse-mode differentiation of a graph into a gradient graph.

The contract is PopXL's (``popxl.transforms.autodiff``):

* ``expected_inputs`` starts with one ``FwdGrad`` connection per tensor of
  ``grads_provided`` (default: all forward outputs), in that order. The
  remaining entries are ``Fwd`` connections to forward tensors the gradient
  graph needs, ordered name-independently: forward inputs in input order,
  then forward outputs in output order (then, for the main graph only, other
  tensors in creation order).
* ``expected_outputs`` are ``FwdGrad`` connections matching
  ``grads_required`` (default: all forward inputs) exactly, in order.
* A needed activation that is neither a forward input nor an output becomes
  a new output of the forward graph, and every existing call site of the
  forward graph gets the matching output ("stitching"). Where a call site is
  not a plain call (``repeat``, ``conditional``) the activation is recomputed
  inside the gradient graph instead.
* Called graphs are differentiated recursively (children first, each once);
  ``called_graphs_grad_info`` supplies gradient graphs to reuse.
* Graphs with ops that modify their inputs are rejected, as are an empty
  ``grads_required`` and a required gradient with no differentiable path.

Beyond PopXL: gradients known to be zero are absent (no ops are emitted for
branches that receive none; zeros appear only at graph boundaries), rules
emit ordinary forward ops (so gradient graphs can be differentiated again),
and an op whose gradient is unknown raises instead of being skipped.
"""
from enum import Enum
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

from .. import grad as _grad
from ..context import get_current_context
from ..errors import popart_exception
from ..graph import Graph
from ..op import Op, create_op
from ..tensor import Constant, Tensor, constant, graph_input, graph_output

__all__ = ["autodiff", "GradGraphInfo", "ExpectedConnection", "ExpectedConnectionType"]

_FLOATS = ("float16", "float32", "float64")
_NO_RECOMPUTE = ("HostLoad", "HostStore", "RandomUniform", "RandomNormal", "Dropout",
                 "PrintTensor")


class ExpectedConnectionType(Enum):
    Fwd = "Fwd"
    FwdGrad = "FwdGrad"


class ExpectedConnection:
    """One input or output of a gradient graph: a forward tensor (``Fwd``) or
    the gradient of one (``FwdGrad``). Created by autodiff only."""

    def __init__(self):
        raise TypeError("ExpectedConnection cannot be constructed directly")

    @classmethod
    def _create(cls, fwd_tensor: Tensor, kind: ExpectedConnectionType):
        self = object.__new__(cls)
        self._fwd_tensor = fwd_tensor
        self._type = kind
        return self

    @property
    def fwd_tensor(self) -> Tensor:
        return self._fwd_tensor

    @property
    def connection_type(self) -> ExpectedConnectionType:
        return self._type

    def __repr__(self):
        return f"({self._type}, {self._fwd_tensor})"


class GradGraphInfo:
    """The result of :func:`autodiff`: the gradient graph and how to connect it."""

    def __init__(self):
        raise TypeError("GradGraphInfo cannot be constructed directly; use autodiff")

    @classmethod
    def _create(cls, graph: Graph, forward_graph: Graph,
                expected_inputs: Sequence[ExpectedConnection],
                expected_outputs: Sequence[ExpectedConnection]):
        self = object.__new__(cls)
        self._graph = graph
        self._fwd = forward_graph
        self._ins = tuple(expected_inputs)
        self._outs = tuple(expected_outputs)
        return self

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def forward_graph(self) -> Graph:
        return self._fwd

    @property
    def expected_inputs(self) -> Tuple[ExpectedConnection, ...]:
        return self._ins

    @property
    def expected_outputs(self) -> Tuple[ExpectedConnection, ...]:
        return self._outs

    @property
    def inputs(self) -> Tuple[Tensor, ...]:
        """The forward tensors of ``expected_inputs``."""
        return tuple(ec.fwd_tensor for ec in self._ins)

    @property
    def outputs(self) -> Tuple[Tensor, ...]:
        """The forward tensors whose gradients ``expected_outputs`` are."""
        return tuple(ec.fwd_tensor for ec in self._outs)

    def inputs_dict(self, fwd_call_info) -> Dict[Tensor, Tensor]:
        """``{gradient-graph input: parent tensor}`` for every ``Fwd``
        connection, resolved through the forward call site."""
        if fwd_call_info.called_graph != self._fwd:
            raise TypeError(
                f"The called graph of the call site ({fwd_call_info.called_graph.name}) is not "
                f"the forward graph of this GradGraphInfo ({self._fwd.name}).")
        out = {}
        for ec, t in zip(self._ins, self._graph.inputs):
            if ec.connection_type == ExpectedConnectionType.Fwd:
                out[t] = fwd_call_info.graph_to_parent(ec.fwd_tensor)
        return out

    def fwd_graph_ins_to_grad_parent_outs(self, grad_call_info) -> Dict[Tensor, Tensor]:
        """``{forward-graph input: gradient in the parent of the gradient call}``."""
        return {ec.fwd_tensor: grad_call_info.parent_output(i) for i, ec in enumerate(self._outs)}

    def fwd_parent_ins_to_grad_parent_outs(self, fwd_call_info, grad_call_info) -> Dict[Tensor, Tensor]:
        """``{parent tensor fed to the forward call: its gradient from the gradient call}``."""
        return {fwd_call_info.graph_to_parent(k): v
                for k, v in self.fwd_graph_ins_to_grad_parent_outs(grad_call_info).items()}

    def __repr__(self):
        ins = ", ".join(repr(e) for e in self._ins)
        outs = ", ".join(repr(e) for e in self._outs)
        return (f"GradGraphInfo[\n  graph={self._graph.id}\n  expected_inputs=[{ins}]\n"
                f"  expected_outputs=[{outs}]\n]")


def _is_float(t: Tensor) -> bool:
    return t.dtype.name in _FLOATS


def _graphs_reachable(graph: Graph) -> List[Graph]:
    out, seen, stack = [], set(), [graph]
    while stack:
        g = stack.pop()
        if g.name in seen:
            continue
        seen.add(g.name)
        out.append(g)
        for op in g._ops:
            stack.extend(op.called_graphs)
    return out


def _check_no_modifying_ops(graph: Graph) -> None:
    for g in _graphs_reachable(graph):
        for op in g._ops:
            if op.modified:
                raise popart_exception(
                    f"The graph {g.id} contains a modifying op: {op.type} ({op.name}). Autodiff "
                    "cannot be used on graphs with inplace modifying ops.")


def _unique_graph_name(ir, base: str) -> str:
    if base not in ir._graphs:
        return base
    k = 1
    while f"{base}_{k}" in ir._graphs:
        k += 1
    return f"{base}_{k}"


class _GraphBuilder:
    """Builds the gradient graph of one forward graph."""

    def __init__(self, ad: "_Autodiff", fwd: Graph, provided: List[Tensor], required: List[Tensor],
                 top: bool):
        self.ad = ad
        self.fwd = fwd
        self.provided = provided
        self.required = required
        self.top = top
        ir = fwd.ir
        self.bwd = Graph._create(ir, _unique_graph_name(ir, f"{fwd.name or 'main'}_bwd"))
        ir._graphs[self.bwd.name] = self.bwd
        self.fwd_inputs: Dict[Tensor, Tensor] = {}  # fwd tensor -> bwd Fwd input
        self.values: Dict[Tensor, Tensor] = {}      # fwd tensor -> bwd value (any source)
        self.grad_inputs: List[Tensor] = []

    # ---- forward values inside the gradient graph
    def value_of(self, t: Tensor) -> Tensor:
        v = self.values.get(t)
        if v is not None:
            return v
        if isinstance(t, Constant):
            v = constant(t._host_data, t.dtype, name=t.name.split("/")[-1])
        elif self.fwd is self.fwd.ir.main_graph or t in self.fwd._inputs or t in self.fwd._outputs:
            v = self._fwd_input(t)
        elif all(op.type == "Call" for op in self.fwd._call_sites):
            self._stitch(t)
            v = self._fwd_input(t)
        else:
            v = self._recompute(t)
        self.values[t] = v
        return v

    def _fwd_input(self, t: Tensor) -> Tensor:
        v = self.fwd_inputs.get(t)
        if v is None:
            v = graph_input(t.shape, t.dtype, t.name.split("/")[-1])
            self.fwd_inputs[t] = v
        return v

    def _stitch(self, t: Tensor) -> None:
        """Make ``t`` an output of the forward graph and of every call site."""
        from ..tensor import Tensor as _T

        self.fwd._add_output(t)
        for op in self.fwd._call_sites:
            out = _T._create(op.graph, "autodiff_output", t.shape, t.dtype, producer=op)
            out._consumers = []
            op.outputs.append(out)

    def _recompute(self, t: Tensor) -> Tensor:
        op = t.producer
        if op is None:
            raise popart_exception(f"autodiff: cannot recompute {t.id!r}: it has no producer")
        if op.type in _NO_RECOMPUTE:
            raise NotImplementedError(
                f"autodiff: the gradient of graph {self.fwd.name!r} needs {t.id!r}, produced by "
                f"{op.type} op {op.name!r}, which cannot be recomputed (a call site of the graph "
                "is not a plain call, so it cannot be added as an output)")
        ins = [None if x is None else self.value_of(x) for x in op.inputs]
        clone = create_op(op.type, ins, [(o.name.split("/")[-1], o.shape, o.dtype) for o in op.outputs],
                          op.attrs, name=op.name.split("/")[-1], called_graphs=op.called_graphs,
                          aliases=op.aliases)
        for o, c in zip(op.outputs, clone.outputs):
            self.values.setdefault(o, c)
        return self.values[t]

    # ---- the sweep
    def build(self) -> GradGraphInfo:
        ctx = get_current_context()
        saved = (ctx._in_sequence, ctx._name_scopes)
        # Grad ops are not subject to the user's in_sequence or name scopes.
        ctx._in_sequence, ctx._name_scopes = None, []
        try:
            with self.bwd:
                info = self._build()
        finally:
            ctx._in_sequence, ctx._name_scopes = saved
        return info

    def _build(self) -> GradGraphInfo:
        grads: Dict[Tensor, List[Tensor]] = {}
        for t in self.provided:
            gi = graph_input(t.shape, t.dtype, f"Gradient___{t.name.split('/')[-1]}")
            self.grad_inputs.append(gi)
            grads.setdefault(t, []).append(gi)
        needs = _forward_reach(self.fwd._ops, [t for t in self.required if _is_float(t)])
        sweep(self.fwd._ops, grads, needs, self.value_of, self.ad)
        outs = []
        reach = _backward_reach(self.fwd._ops, self.provided)
        for t in self.required:
            parts = grads.get(t)
            if parts:
                g = _sum_partials(parts, t)
            elif _is_float(t) and t in reach and t in needs:
                from .. import ops

                g = ops.init(t.shape, t.dtype, name=f"Gradient___{t.name.split('/')[-1]}")
            else:
                raise popart_exception(
                    f"[Autodiff] Unable to provide required gradient output for fwd id '{t.id}': "
                    "no differentiable path connects it to the provided gradients")
            graph_output(g)
            outs.append(t)
        if not self.top:
            self._prune_unused_grad_inputs()
        return self._make_info(outs)

    def _prune_unused_grad_inputs(self):
        keep = []
        for t, gi in zip(self.provided, self.grad_inputs):
            if gi._consumers or gi in self.bwd._outputs:
                keep.append((t, gi))
            else:
                self.bwd._inputs.remove(gi)
        self.provided = [t for t, _ in keep]
        self.grad_inputs = [gi for _, gi in keep]

    def _make_info(self, outs: List[Tensor]) -> GradGraphInfo:
        fwd = self.fwd
        fin = {t: i for i, t in enumerate(fwd._inputs)}
        fout = {t: i for i, t in enumerate(fwd._outputs)}
        order = list(fwd._tensors.values())
        created = {t: i for i, t in enumerate(order)}

        def key(t):
            if t in fin:
                return (0, fin[t])
            if t in fout:
                return (1, fout[t])
            return (2, created.get(t, 0))

        fwd_conns = sorted(self.fwd_inputs.items(), key=lambda kv: key(kv[0]))
        self.bwd._inputs = list(self.grad_inputs) + [v for _, v in fwd_conns]
        ins = [ExpectedConnection._create(t, ExpectedConnectionType.FwdGrad) for t in self.provided]
        ins += [ExpectedConnection._create(t, ExpectedConnectionType.Fwd) for t, _ in fwd_conns]
        eouts = [ExpectedConnection._create(t, ExpectedConnectionType.FwdGrad) for t in outs]
        return GradGraphInfo._create(self.bwd, fwd, ins, eouts)


def _sum_partials(parts: List[Tensor], t: Tensor) -> Tensor:
    if len(parts) == 1:
        return parts[0]
    from ..ops.sum_n import sum_n

    base = t.name.split("/")[-1]
    return sum_n(parts, name=f"GradSum_{base}", out_name=f"Gradient___{base}")


def _forward_reach(ops: Sequence[Op], sources: Iterable[Tensor]) -> Set[Tensor]:
    """Float tensors reachable from ``sources`` through differentiable edges."""
    reach = set(sources)
    for op in ops:
        nd = _grad.nondiff_inputs(op.type)
        if any(x is not None and x in reach and i not in nd for i, x in enumerate(op.inputs)):
            for o in op.outputs:
                if _is_float(o):
                    reach.add(o)
    return reach


def _backward_reach(ops: Sequence[Op], sinks: Iterable[Tensor]) -> Set[Tensor]:
    """Tensors from which a sink is reachable through differentiable edges."""
    reach = set(sinks)
    for op in reversed(ops):
        if any(o in reach for o in op.outputs):
            nd = _grad.nondiff_inputs(op.type)
            for i, x in enumerate(op.inputs):
                if x is not None and i not in nd and _is_float(x):
                    reach.add(x)
    return reach


def sweep(ops: Sequence[Op], grads: Dict[Tensor, List[Tensor]], needs: Set[Tensor],
          value_of, ad: "_Autodiff") -> None:
    """One reverse pass over ``ops``: turns the partial gradients in
    ``grads`` (of op outputs) into partial gradients of op inputs that are in
    ``needs``. Ops whose outputs carry no gradient emit nothing."""
    for op in reversed(ops):
        if not any(o in grads for o in op.outputs):
            continue
        need = [x is not None and x in needs and _is_float(x) for x in op.inputs]
        if not any(need):
            continue
        out_grads = [(_sum_partials(grads[o], o) if o in grads else None) for o in op.outputs]
        for o, g in zip(op.outputs, out_grads):
            if g is not None:
                grads[o] = [g]
        rule = _grad.get_grad_rule(op.type)
        if rule is not None:
            need = [n and i not in rule.nondiff for i, n in enumerate(need)]
            if not any(need):
                continue
            ctx = _grad.GradContext(op, out_grads, need, value_of, ad)
            in_grads = list(rule.build(ctx))
        else:
            decomp = _grad.get_decomposition(op.type)
            if decomp is None:
                first = next(i for i, n in enumerate(need) if n)
                raise NotImplementedError(
                    f"autodiff: op {op.type} ({op.name!r}) has no gradient rule and no "
                    f"decomposition, but a gradient reaches it and its input {first} "
                    f"({op.inputs[first].id!r}) needs one. Register one with "
                    f"ipuxl.grad.register_grad({op.type!r}).")
            in_grads = _grad_through_decomposition(op, decomp, out_grads, need, value_of, ad)
        if len(in_grads) != len(op.inputs):
            raise popart_exception(
                f"autodiff: the gradient rule of {op.type} returned {len(in_grads)} gradients "
                f"for {len(op.inputs)} inputs")
        for i, (x, gx) in enumerate(zip(op.inputs, in_grads)):
            if gx is None or not need[i]:
                continue
            if gx.shape != x.shape or gx.dtype != x.dtype:
                raise popart_exception(
                    f"autodiff: the gradient rule of {op.type} ({op.name!r}) gave a gradient of "
                    f"{gx.dtype.name}{gx.shape} for input {i} {x.id!r} of "
                    f"{x.dtype.name}{x.shape}")
            grads.setdefault(x, []).append(gx)


def _grad_through_decomposition(op: Op, decomp, out_grads, need, value_of, ad) -> List[Optional[Tensor]]:
    """Build the op's decomposition from its forward values in the gradient
    graph and differentiate those ops locally."""
    g = get_current_context().graph
    start = len(g._ops)
    ins = [None if x is None else value_of(x) for x in op.inputs]
    outs = decomp(op, *ins)
    if isinstance(outs, Tensor):
        outs = [outs]
    outs = list(outs)
    if len(outs) != len(op.outputs):
        raise popart_exception(
            f"autodiff: the decomposition of {op.type} returned {len(outs)} outputs, expected "
            f"{len(op.outputs)}")
    new_ops = g._ops[start:]
    local: Dict[Tensor, List[Tensor]] = {}
    for o, gr in zip(outs, out_grads):
        if gr is not None:
            local.setdefault(o, []).append(gr)
    wanted = [t for t, n in zip(ins, need) if n and t is not None]
    sweep(new_ops, local, _forward_reach(new_ops, wanted), lambda t: t, ad)
    result = []
    for t, n in zip(ins, need):
        parts = local.get(t) if (n and t is not None) else None
        result.append(_sum_partials(parts, t) if parts else None)
    return result


class _Autodiff:
    def __init__(self, infos: Dict[Graph, GradGraphInfo]):
        self.infos = infos
        self.touched: Dict[Graph, GradGraphInfo] = dict(infos)
        self.active: Set[str] = set()

    def subgraph_info(self, graph: Graph) -> GradGraphInfo:
        info = self.infos.get(graph)
        if info is not None:
            return info
        if not getattr(graph, "_can_be_recursively_autodiffed", True):
            raise popart_exception(
                f"Graph {graph.id} has been marked as unsafe to autodiff. Please provide a "
                "gradient graph via called_graphs_grad_info")
        required = [t for t in graph._inputs if _is_float(t)]
        reach = _backward_reach(graph._ops, graph._outputs)
        required = [t for t in required if t in reach]
        info = self.differentiate(graph, list(graph._outputs), required, top=False)
        return info

    def differentiate(self, graph: Graph, provided: List[Tensor], required: List[Tensor],
                      top: bool) -> GradGraphInfo:
        if graph.name in self.active:
            raise popart_exception(f"autodiff: graph {graph.id} calls itself")
        _check_no_modifying_ops(graph)
        self.active.add(graph.name)
        try:
            info = _GraphBuilder(self, graph, provided, required, top).build()
        finally:
            self.active.discard(graph.name)
        self.infos[graph] = info
        self.touched[graph] = info
        return info


def autodiff(graph: Graph, grads_provided: Optional[Iterable[Tensor]] = None,
             grads_required: Optional[Iterable[Tensor]] = None,
             called_graphs_grad_info: Optional[Mapping[Graph, GradGraphInfo]] = None,
             return_all_grad_graphs: bool = False
             ) -> Union[GradGraphInfo, Dict[Graph, GradGraphInfo]]:
    """Differentiate ``graph``; see the module docstring for the contract.

    Args:
        graph: the forward graph (normally a subgraph).
        grads_provided: forward outputs whose gradients the gradient graph
            takes as its first inputs (default: all outputs, in order).
        grads_required: forward tensors whose gradients it outputs, in order
            (default: all inputs).
        called_graphs_grad_info: gradient graphs to reuse for called graphs.
        return_all_grad_graphs: return ``{forward graph: GradGraphInfo}`` for
            every graph differentiated or reused, instead of ``graph``'s info.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"autodiff expects a Graph, got {type(graph).__name__}")
    provided = list(graph.outputs) if grads_provided is None else list(grads_provided)
    required = list(graph.inputs) if grads_required is None else list(grads_required)
    if grads_required is not None and not required:
        raise popart_exception("autodiff: grads_required is an empty list; pass None for all "
                               "forward inputs")
    for what, ts in (("grads_provided", provided), ("grads_required", required)):
        for t in ts:
            if not isinstance(t, Tensor):
                raise TypeError(f"autodiff: {what} must contain Tensors, got {type(t).__name__}")
            if t.graph is not graph:
                raise ValueError(f"autodiff: {what} tensor {t.id!r} is not in graph {graph.name!r}")
    for t in provided:
        if not _is_float(t):
            raise popart_exception(
                f"autodiff: cannot provide a gradient for {t.id!r} of dtype {t.dtype.name}")
    infos = dict(called_graphs_grad_info or {})
    ad = _Autodiff(infos)
    if graph in infos:
        info = infos[graph]
    else:
        info = ad.differentiate(graph, provided, required, top=True)
    if return_all_grad_graphs:
        return dict(ad.touched)
    return info
