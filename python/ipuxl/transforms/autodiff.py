"""``autodiff``: reverse-mode differentiation of a graph into a gradient graph.

The contract is PopXL's (``popxl.transforms.autodiff``):

* ``expected_inputs`` starts with one ``FwdGrad`` connection per tensor of
  ``grads_provided`` (default: all forward outputs as they were before
  autodiff), in that order; explicitly provided gradient inputs are kept even
  when unused. The remaining entries are ``Fwd`` connections to forward
  tensors the gradient graph needs, each an input or an output of the
  forward graph after stitching, ordered name-independently: forward inputs
  in input order, then forward outputs in output order (for the main graph,
  which has no call site, any other tensor follows, in creation order).
* ``expected_outputs`` are ``FwdGrad`` connections matching ``grads_required``
  (default: all forward inputs) exactly, in order. A gradient output that is
  produced inside the gradient graph is named ``Gradient___<name>``.
* The gradient graph takes only the forward values its ops read, as
  PopART's ``doPrune`` leaves it: ops whose results nothing reads (a rule's
  gradient for an input that needs none, a value read eagerly) are removed
  with the forward inputs only they read and the outputs stitched for them
  (the first layer's weight is no input of an MLP's weight-gradient graph).
* As in PopART, whose ``ElementWiseBinaryGradOp`` reads both operands and
  the output, the operands and output of ``Mul``/``Div``/``Pow``/``Fmod``
  are always made available to the gradient graph (``OpDef.stash_outputs``),
  so stitching adds the same outputs as PopXL (``x * W + b`` gains one).
* A needed activation that is neither a forward input nor an output becomes
  a new output of the forward graph, and every existing call site of the
  forward graph gets the matching output ("stitching", PopXL's
  ``SafeAddFwdOutputs``). When a call site is not a plain ``call``
  (``repeat``, ``conditional``) the activation is recomputed inside the
  gradient graph instead (random and host-IO ops cannot be recomputed).
* Called graphs are differentiated recursively, children on demand and each
  once per ``autodiff`` call; for them every float output gradient is a
  candidate input (unused ones are dropped) and every float input reachable
  from an output gets a gradient (known-zero ones are left out).
  ``called_graphs_grad_info`` supplies gradient graphs to reuse instead, and
  is the only way through a graph marked unsafe
  (``graph._can_be_recursively_autodiffed = False``).
* Rejected with ``popart_exception``: graphs (or graphs they call) with ops
  that modify their inputs ("The graph <id> contains a modifying op ..."), an
  empty ``grads_required``, and a required gradient with no differentiable
  path to the provided gradients (an integer or unused input). A gradient
  that has a path but is known to be zero (through ``floor``) is a
  zero-filled tensor of the input's shape and dtype.
* On any error the IR is left as it was: gradient graphs created by the
  failed call are removed and stitched outputs are taken back.

Beyond PopXL: gradients known to be zero are absent (no ops are emitted for
branches that receive none; zeros appear only at graph boundaries), rules
emit ordinary forward ops (so gradient graphs can be differentiated again),
and an op whose gradient is unknown raises NotImplementedError instead of
being skipped (only when a gradient actually reaches it and one of its float
inputs needs one: rule-less ops on constant branches are fine).

The transform is linear in the size of the graphs: one forward reachability
pass, one backward reachability pass and one reverse sweep per graph, with
no recursion over ops (deep chains do not hit Python's recursion limit).
"""
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

from .. import dtypes as _dt
from .. import grad as _grad
from .._gc import gc_paused
from ..context import get_current_context
from ..errors import popart_exception
from ..graph import Graph
from ..op import Op, create_op
from ..opdef import get_opdef
from ..tensor import Constant, Tensor, constant, graph_input, graph_output
from .grad_graph_info import ExpectedConnection, ExpectedConnectionType, GradGraphInfo

__all__ = ["autodiff", "GradGraphInfo", "ExpectedConnection", "ExpectedConnectionType"]



_FLOAT_DTYPES = (_dt.float16, _dt.float32, _dt.float64)


def _is_float(t: Tensor) -> bool:
    return t._dtype in _FLOAT_DTYPES


def _base(t: Tensor) -> str:
    return t.name.split("/")[-1]


def _graphs_reachable(graph: Graph, skip: Mapping[Graph, object] = ()) -> List[Graph]:
    """``graph`` and every graph it calls, transitively, in a deterministic
    depth-first order; graphs in ``skip`` are not entered."""
    out, seen, stack = [], set(), [graph]
    while stack:
        g = stack.pop()
        if g.name in seen:
            continue
        seen.add(g.name)
        out.append(g)
        for op in g._ops:
            for c in op.called_graphs:
                if c.name not in seen and not (c in skip):
                    stack.append(c)
    return out


def _check_no_modifying_ops(graph: Graph, skip: Mapping[Graph, object]) -> None:
    for g in _graphs_reachable(graph, skip):
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
        self.is_main = fwd is ir.main_graph
        # Forward inputs and outputs (kept in step with stitching), for O(1) lookups.
        self.io: Set[int] = {id(t) for t in fwd._inputs} | {id(t) for t in fwd._outputs}
        self.stitchable = all(get_opdef(op.type).kind == "call" for op in fwd._call_sites)
        self.bwd = Graph._create(ir, _unique_graph_name(ir, f"{fwd.name or 'main'}_bwd"))
        ir._graphs[self.bwd.name] = self.bwd
        ad.created.append(self.bwd)
        # Keyed by id(fwd tensor): Tensor.__hash__ hashes its id string, which
        # is measurably slower on graphs of 10k+ ops.
        self.fwd_inputs: Dict[int, Tuple[Tensor, Tensor]] = {}  # -> (fwd tensor, bwd input)
        self.values: Dict[int, Tensor] = {}  # -> bwd value (any source)
        self.grad_inputs: List[Tensor] = []
        # Where this graph's entries in the stitch journal start.
        self.stitch_mark = len(ad.stitches)

    # ---- forward values inside the gradient graph
    def value_of(self, t: Tensor) -> Tensor:
        v = self.values.get(id(t))
        if v is not None:
            return v
        v = self._direct(t)
        if v is None:
            self._recompute(t)
            v = self.values[id(t)]
        return v

    def _direct(self, t: Tensor) -> Optional[Tensor]:
        """The value of ``t`` if it needs no recomputation (cached), else None."""
        v = self.values.get(id(t))
        if v is not None:
            return v
        if isinstance(t, Constant):
            v = constant(t._host_data, t.dtype, name=_base(t))
        elif self.is_main or id(t) in self.io:
            v = self._fwd_input(t)
        elif self.stitchable:
            self._stitch(t)
            v = self._fwd_input(t)
        else:
            return None
        self.values[id(t)] = v
        return v

    def _fwd_input(self, t: Tensor) -> Tensor:
        e = self.fwd_inputs.get(id(t))
        if e is None:
            e = (t, graph_input(t.shape, t.dtype, _base(t)))
            self.fwd_inputs[id(t)] = e
        return e[1]

    def _stitch(self, t: Tensor) -> None:
        """Make ``t`` an output of the forward graph and of every call site."""
        sites = list(self.fwd._call_sites)
        self.ad.stitches.append((self.fwd, len(self.fwd._outputs),
                                 [(op, len(op.outputs)) for op in sites]))
        self.fwd._add_output(t)
        self.io.add(id(t))
        for op in sites:
            out = Tensor._create(op.graph, "autodiff_output", t.shape, t.dtype, producer=op)
            op.outputs.append(out)

    def _recompute(self, t: Tensor) -> None:
        """Clone the producers of ``t`` (and, transitively, of whatever they
        need that is not directly available) into the gradient graph.
        Iterative, so long chains do not hit the recursion limit."""
        stack: List[Op] = []
        on_stack: Set[int] = set()

        def push(x: Tensor):
            op = x.producer
            if op is None:
                raise popart_exception(f"autodiff: cannot recompute {x.id!r}: it has no producer")
            if not get_opdef(op.type).recomputable:
                raise NotImplementedError(
                    f"autodiff: the gradient of graph {self.fwd.name!r} needs {x.id!r}, produced "
                    f"by {op.type} op {op.name!r}, which cannot be recomputed (a call site of the "
                    "graph is not a plain call, so the value cannot be added as an output)")
            if id(op) not in on_stack:
                on_stack.add(id(op))
                stack.append(op)

        push(t)
        while stack:
            op = stack[-1]
            if op.outputs and id(op.outputs[0]) in self.values:
                stack.pop()
                continue
            pending = False
            for x in op.inputs:
                if x is not None and self._direct(x) is None:
                    push(x)
                    pending = True
            if pending:
                continue
            stack.pop()
            ins = [None if x is None else self.values[id(x)] for x in op.inputs]
            clone = create_op(op.type, ins, [(_base(o), o.shape, o.dtype) for o in op.outputs],
                              op.attrs, name=_base_op(op), called_graphs=op.called_graphs)
            for o, c in zip(op.outputs, clone.outputs):
                self.values.setdefault(id(o), c)

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
        grads: Dict[int, List[Tensor]] = {}
        for t in self.provided:
            gi = graph_input(t.shape, t.dtype, f"Gradient___{_base(t)}")
            self.grad_inputs.append(gi)
            grads.setdefault(id(t), []).append(gi)
        needs = _forward_reach(self.fwd._ops, [t for t in self.required if _is_float(t)])
        sweep(self.fwd._ops, grads, needs, self.value_of, self.ad)
        outs = []
        named: Set[int] = set()
        for t in self.required:
            parts = grads.get(id(t))
            if parts:
                g = _sum_partials(parts, t)
                grads[id(t)] = [g]
            elif not self.top:
                continue  # a known-zero gradient of a called graph: left out
            else:
                # Reachable (checked up front) but known to be zero (floor ...).
                from .. import ops

                g = ops.init(t.shape, t.dtype, name=f"Gradient___{_base(t)}")
            self._name_output(g, t, named)
            graph_output(g)
            outs.append(t)
        self._prune()
        if not self.top:
            self._prune_unused_grad_inputs()
        return self._make_info(outs)

    def _prune(self) -> None:
        """Keep only what the gradient outputs need, as PopART's ``doPrune``:
        ops none of whose results is read (a rule's gradient for an input that
        needs none, a value it read eagerly) go, then the forward inputs no
        remaining op reads, then the stitched forward outputs they came from.
        Pinned values (``_Autodiff.pinned``: what PopART's gradient op reads)
        stay inputs. Ops with side effects, writes, called graphs or
        topological constraints are kept whatever reads them."""
        bwd = self.bwd
        pinned = self.ad.pinned
        constrained = {id(op) for pair in bwd._topo_cons for op in pair}
        live = {id(t) for t in bwd._outputs}
        dead: Set[int] = set()
        for op in reversed(bwd._ops):
            d = get_opdef(op.type)
            if d.kind == "kernel" and not d.side_effects and not op.modified and \
                    not op.called_graphs and id(op) not in constrained and \
                    not any(id(o) in live for o in op.outputs):
                dead.add(id(op))
                continue
            live.update(id(x) for x in op.inputs if x is not None)
        if dead:
            read: Dict[int, Tensor] = {}
            for op in bwd._ops:
                if id(op) not in dead:
                    continue
                bwd._ops_set.discard(op)
                for x in op.inputs:
                    if x is not None:
                        read[id(x)] = x
                for o in op.outputs:
                    if bwd._tensors.get(o._id) is o:
                        del bwd._tensors[o._id]
            bwd._ops[:] = [op for op in bwd._ops if id(op) not in dead]
            for x in read.values():
                x._consumers = [c for c in x._consumers if id(c) not in dead]
        outputs = {id(t) for t in bwd._outputs}
        for key, (t, v) in list(self.fwd_inputs.items()):
            if not v._consumers and id(v) not in outputs and id(v) not in pinned:
                del self.fwd_inputs[key]
                self.values.pop(key, None)
                if bwd._tensors.get(v._id) is v:
                    del bwd._tensors[v._id]
        for t in [t for t in bwd._tensors.values() if isinstance(t, Constant)]:
            if not t._consumers and id(t) not in outputs:
                del bwd._tensors[t._id]
        self._unstitch_unread()

    def _unstitch_unread(self) -> None:
        """Take back the forward outputs stitched for values the pruned
        gradient graph no longer reads (from the forward graph and each call
        site), renumbering the journal so a later rollback still works."""
        entries = self.ad.stitches[self.stitch_mark:]
        if not entries:
            return
        fwd, base, sites = entries[0]
        if any(e[0] is not fwd or [op for op, _ in e[2]] != [op for op, _ in sites]
               for e in entries):
            return  # call sites changed while stitching: leave the outputs
        stitched = fwd._outputs[base:]
        if len(stitched) != len(entries):
            return
        keep = [k for k, t in enumerate(stitched) if id(t) in self.fwd_inputs]
        if len(keep) == len(stitched):
            return
        kept = set(keep)
        fwd._outputs[base:] = [stitched[k] for k in keep]
        for op, n in sites:
            outs = op.outputs[n:]
            for k, o in enumerate(outs):
                if k not in kept and op.graph._tensors.get(o._id) is o:
                    del op.graph._tensors[o._id]
            op.outputs[n:] = [outs[k] for k in keep]
        self.ad.stitches[self.stitch_mark:] = [
            (fwd, base + j, [(op, n + j) for op, n in sites]) for j in range(len(keep))]

    def _name_output(self, g: Tensor, t: Tensor, named: Set[int]) -> None:
        """Rename a gradient produced in the gradient graph ``Gradient___<t>``
        (PopXL's naming; parent outputs of a call take these names). Inputs
        and tensors already named for another output keep their names."""
        if g.producer is None or id(g) in named or g.graph is not self.bwd:
            return
        named.add(id(g))
        want = f"Gradient___{_base(t)}"
        if g.name == want:
            return
        del self.bwd._tensors[g._id]
        g._id = self.bwd._create_tensor_id(want)
        self.bwd._tensors[g._id] = g

    def _prune_unused_grad_inputs(self):
        keep = []
        for t, gi in zip(self.provided, self.grad_inputs):
            if gi._consumers or any(o is gi for o in self.bwd._outputs):
                keep.append((t, gi))
            else:
                self.bwd._tensors.pop(gi.id, None)
        self.provided = [t for t, _ in keep]
        self.grad_inputs = [gi for _, gi in keep]

    def _make_info(self, outs: List[Tensor]) -> GradGraphInfo:
        fwd = self.fwd
        fin = {t: i for i, t in enumerate(fwd._inputs)}
        fout = {}
        for i, t in enumerate(fwd._outputs):
            fout.setdefault(t, i)
        created = None

        def key(t):
            nonlocal created
            if t in fin:
                return (0, fin[t])
            if t in fout:
                return (1, fout[t])
            if created is None:
                created = {x: i for i, x in enumerate(fwd._tensors.values())}
            return (2, created.get(t, 0))

        fwd_conns = sorted(self.fwd_inputs.values(), key=lambda tv: key(tv[0]))
        self.bwd._inputs = list(self.grad_inputs) + [v for _, v in fwd_conns]
        ins = [ExpectedConnection._create(t, ExpectedConnectionType.FwdGrad) for t in self.provided]
        ins += [ExpectedConnection._create(t, ExpectedConnectionType.Fwd) for t, _ in fwd_conns]
        eouts = [ExpectedConnection._create(t, ExpectedConnectionType.FwdGrad) for t in outs]
        return GradGraphInfo._create(self.bwd, fwd, ins, eouts)


def _base_op(op: Op) -> str:
    return op.name.split("/")[-1]


def _sum_partials(parts: List[Tensor], t: Tensor) -> Tensor:
    if len(parts) == 1:
        return parts[0]
    from ..ops.sum_n import sum_n

    base = _base(t)
    # On the IPU of the partial gradients (where the ops producing them run).
    ctx = get_current_context()
    saved = ctx._ipu_id
    ipu = parts[0]._virtual_graph_id()
    if ipu != -1:
        ctx._ipu_id = ipu
    try:
        return sum_n(parts, name=f"GradSum_{base}", out_name=f"Gradient___{base}")
    finally:
        ctx._ipu_id = saved


def _forward_reach(ops: Sequence[Op], sources: Iterable[Tensor]) -> Set[int]:
    """``id`` of every float tensor reachable from ``sources`` through
    differentiable edges."""
    reach = {id(t) for t in sources}
    nondiff = _grad.nondiff_inputs
    for op in ops:
        nd = nondiff(op.type)
        if any(x is not None and id(x) in reach and i not in nd for i, x in enumerate(op.inputs)):
            for o in op.outputs:
                if _is_float(o):
                    reach.add(id(o))
    return reach


def _backward_reach(ops: Sequence[Op], sinks: Iterable[Tensor]) -> Set[int]:
    """``id`` of every tensor from which a sink is reachable through
    differentiable edges (float tensors, plus the sinks)."""
    reach = {id(t) for t in sinks}
    nondiff = _grad.nondiff_inputs
    for op in reversed(ops):
        if any(id(o) in reach for o in op.outputs):
            nd = nondiff(op.type)
            for i, x in enumerate(op.inputs):
                if x is not None and i not in nd and _is_float(x):
                    reach.add(id(x))
    return reach


def sweep(ops: Sequence[Op], grads: Dict[int, List[Tensor]], needs: Set[int],
          value_of, ad: "_Autodiff") -> None:
    """One reverse pass over ``ops``: turns the partial gradients in
    ``grads`` (keyed by ``id`` of op outputs) into partial gradients of the op
    inputs whose ``id`` is in ``needs``. Ops whose outputs carry no gradient
    emit nothing."""
    cur = get_current_context().graph
    for op in reversed(ops):
        if not any(id(o) in grads for o in op.outputs):
            continue
        need = [x is not None and id(x) in needs and _is_float(x) for x in op.inputs]
        if not any(need):
            continue
        rule = _grad.get_grad_rule(op.type)
        if rule is not None and rule.nondiff:
            need = [n and i not in rule.nondiff for i, n in enumerate(need)]
            if not any(need):
                continue
        out_grads = []
        for o in op.outputs:
            parts = grads.get(id(o))
            if parts is None:
                out_grads.append(None)
            else:
                g = _sum_partials(parts, o)
                grads[id(o)] = [g]
                out_grads.append(g)
        # PopART's gradient op of a stash_outputs type reads both operands and
        # the output: PopXL's gradient graph takes them as inputs whatever our
        # rule reads, so they are kept (pinned). The output first, the
        # operands after the rule, so values are stitched in the rule's order.
        stash = get_opdef(op.type).stash_outputs
        if stash:
            for o in op.outputs:
                ad.pinned.add(id(value_of(o)))
        # As PopART, an op's gradient ops run on the forward op's IPU.
        gctx = get_current_context()
        saved_ipu = gctx._ipu_id
        gctx._ipu_id = op.ipu
        try:
            in_grads = _op_grads(op, rule, out_grads, need, value_of, ad)
            if stash:
                for x in op.inputs:
                    if x is not None:
                        ad.pinned.add(id(value_of(x)))
        finally:
            gctx._ipu_id = saved_ipu
        if len(in_grads) != len(op.inputs):
            raise popart_exception(
                f"autodiff: the gradient rule of {op.type} ({op.name!r}) returned "
                f"{len(in_grads)} gradients for {len(op.inputs)} inputs")
        for i, gx in enumerate(in_grads):
            if gx is None or not need[i]:
                continue
            x = op.inputs[i]
            if not isinstance(gx, Tensor) or gx._graph is not cur:
                raise popart_exception(
                    f"autodiff: the gradient rule of {op.type} ({op.name!r}) returned "
                    f"{gx!r} for input {i}; expected a Tensor of the gradient graph "
                    f"{cur.name!r} or None")
            if gx._shape != x._shape or gx._dtype != x._dtype:
                raise popart_exception(
                    f"autodiff: the gradient rule of {op.type} ({op.name!r}) gave a gradient of "
                    f"{gx.dtype.name}{gx.shape} for input {i} {x.id!r} of "
                    f"{x.dtype.name}{x.shape}")
            lst = grads.get(id(x))
            if lst is None:
                grads[id(x)] = [gx]
            else:
                lst.append(gx)


def _op_grads(op: Op, rule, out_grads, need, value_of, ad) -> List[Optional[Tensor]]:
    """The input gradients of ``op``, from its rule or its decomposition."""
    if rule is not None:
        ctx = _grad.GradContext(op, out_grads, need, value_of, ad)
        in_grads = rule.build(ctx)
        if not isinstance(in_grads, (list, tuple)):
            raise popart_exception(
                f"autodiff: the gradient rule of {op.type} ({op.name!r}) must return a list "
                f"with one entry per input, got {type(in_grads).__name__}")
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
    return in_grads


def _grad_through_decomposition(op: Op, decomp, out_grads, need, value_of, ad) -> List[Optional[Tensor]]:
    """Build the op's decomposition from its forward values in the gradient
    graph and differentiate those ops locally."""
    g = get_current_context().graph
    ins = [None if x is None else value_of(x) for x in op.inputs]
    start = len(g._ops)
    outs = decomp(op, *ins)
    if isinstance(outs, Tensor):
        outs = [outs]
    outs = list(outs)
    if len(outs) != len(op.outputs):
        raise popart_exception(
            f"autodiff: the decomposition of {op.type} returned {len(outs)} outputs, expected "
            f"{len(op.outputs)}")
    new_ops = g._ops[start:]
    local: Dict[int, List[Tensor]] = {}
    for o, gr in zip(outs, out_grads):
        if gr is not None:
            local.setdefault(id(o), []).append(gr)
    wanted = [t for t, n in zip(ins, need) if n and t is not None]
    sweep(new_ops, local, _forward_reach(new_ops, wanted), lambda t: t, ad)
    result: List[Optional[Tensor]] = []
    given: Set[int] = set()
    for t, n in zip(ins, need):
        parts = local.get(id(t)) if (n and t is not None) else None
        # The same value at several inputs (op(x, x)): its local gradient
        # already sums every use, so it is given to the first input only.
        if parts and id(t) not in given:
            given.add(id(t))
            result.append(_sum_partials(parts, t))
        else:
            result.append(None)
    return result


class _NeedGradGraph(BaseException):
    """Raised inside a graph's differentiation when a graph it calls has no
    gradient graph yet: the driver differentiates that graph first and then
    starts the caller again. (A BaseException, so that no rule's ``except
    Exception`` swallows it.) This keeps autodiff of deeply nested calls off
    the Python stack: depth is bounded by memory, not by the recursion limit."""

    def __init__(self, graph: Graph):
        super().__init__(graph.name)
        self.graph = graph


class _Autodiff:
    """State of one ``autodiff`` call: gradient infos by forward graph, and a
    journal of what was created or stitched (undone if the call fails)."""

    def __init__(self, ir, infos: Dict[Graph, GradGraphInfo]):
        self.ir = ir
        self.infos = infos
        self.touched: Dict[Graph, GradGraphInfo] = dict(infos)
        self.created: List[Graph] = []
        self.stitches: List[Tuple[Graph, int, List[Tuple[Op, int]]]] = []
        #: ``id`` of gradient-graph values kept as inputs even if no op of ours
        #: reads them (see ``sweep``).
        self.pinned: Set[int] = set()

    def subgraph_info(self, graph: Graph) -> GradGraphInfo:
        info = self.infos.get(graph)
        if info is not None:
            return info
        if not getattr(graph, "_can_be_recursively_autodiffed", True):
            raise popart_exception(
                f"Graph {graph.id} has been marked as unsafe to autodiff. Please provide a "
                "gradient graph via called_graphs_grad_info")
        raise _NeedGradGraph(graph)

    def _default_args(self, graph: Graph):
        """What a called graph's gradient graph takes and gives: every float
        output's gradient; every float input reachable from an output."""
        reach = _backward_reach(graph._ops, graph._outputs)
        required = [t for t in graph._inputs if _is_float(t) and id(t) in reach]
        provided = [t for t in graph._outputs if _is_float(t)]
        return provided, required

    def differentiate(self, graph: Graph, provided: List[Tensor], required: List[Tensor],
                      top: bool) -> GradGraphInfo:
        """Differentiate ``graph`` and, first, every graph it calls that needs
        a gradient graph: an explicit stack replaces recursion. An attempt
        that meets a called graph without one is undone, the called graph is
        differentiated, and the attempt starts again (each graph is attempted
        at most once per graph it calls)."""
        stack = [(graph, provided, required, top)]
        on_stack = {id(graph)}
        while stack:
            g, p, r, t = stack[-1]
            if g in self.infos:
                stack.pop()
                on_stack.discard(id(g))
                continue
            mark = (len(self.created), len(self.stitches))
            try:
                info = _GraphBuilder(self, g, p, r, t).build()
            except _NeedGradGraph as need:
                self._undo_to(*mark)
                child = need.graph
                if id(child) in on_stack:
                    raise popart_exception(f"autodiff: graph {child.id} calls itself") from None
                stack.append((child, *self._default_args(child), False))
                on_stack.add(id(child))
                continue
            stack.pop()
            on_stack.discard(id(g))
            self.infos[g] = info
            self.touched[g] = info
        return self.infos[graph]

    def _undo_to(self, n_created: int, n_stitches: int) -> None:
        """Drop the gradient graphs created (and their registrations as call
        sites) and the outputs stitched since the journal had these lengths."""
        dead = {g.name for g in self.created[n_created:]}
        for g in self.created[n_created:]:
            self.ir._graphs.pop(g.name, None)
            for op in g._ops:
                for c in op.called_graphs:
                    c._call_sites = [s for s in c._call_sites if s is not op]
        for fwd, n_out, sites in reversed(self.stitches[n_stitches:]):
            del fwd._outputs[n_out:]
            for op, n in sites:
                for o in op.outputs[n:]:
                    op.graph._tensors.pop(o.id, None)
                del op.outputs[n:]
        del self.created[n_created:]
        del self.stitches[n_stitches:]
        # A failed attempt registers nothing; only a full rollback must also
        # forget the gradient graphs finished earlier in this call.
        if n_created == 0:
            for g in list(self.touched):
                if self.touched[g].graph.name in dead:
                    del self.touched[g]
                    self.infos.pop(g, None)

    def rollback(self) -> None:
        """Undo a failed call: everything it created or stitched."""
        self._undo_to(0, 0)


def autodiff(graph: Graph, grads_provided: Optional[Iterable[Tensor]] = None,
             grads_required: Optional[Iterable[Tensor]] = None,
             called_graphs_grad_info: Optional[Mapping[Graph, GradGraphInfo]] = None,
             return_all_grad_graphs: bool = False
             ) -> Union[GradGraphInfo, Dict[Graph, GradGraphInfo]]:
    """Differentiate ``graph``; see the module docstring for the contract.

    Args:
        graph: the forward graph (normally a subgraph).
        grads_provided: forward tensors (normally outputs) whose gradients the
            gradient graph takes as its first inputs, in this order
            (default: all outputs, in order).
        grads_required: forward tensors whose gradients it outputs, in this
            order (default: all inputs).
        called_graphs_grad_info: gradient graphs to reuse for called graphs
            (for example the result of an earlier ``return_all_grad_graphs``).
        return_all_grad_graphs: return ``{forward graph: GradGraphInfo}`` for
            every graph differentiated or reused, instead of ``graph``'s info.

    Returns:
        The :class:`GradGraphInfo` of ``graph`` (or the dict, see above).
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
    if not provided:
        raise popart_exception(
            f"autodiff: graph {graph.name or 'main'!r} has no outputs and grads_provided is "
            "empty, so there is nothing to differentiate. Differentiate a subgraph "
            "(ir.create_graph) whose outputs carry the gradients, or pass grads_provided.")
    for t in provided:
        if not _is_float(t):
            raise popart_exception(
                f"autodiff: cannot provide a gradient for {t.id!r} of dtype {t.dtype.name}")
    infos: Dict[Graph, GradGraphInfo] = {}
    for k, v in dict(called_graphs_grad_info or {}).items():
        if not isinstance(k, Graph) or not isinstance(v, GradGraphInfo):
            raise TypeError("autodiff: called_graphs_grad_info must map Graph to GradGraphInfo, "
                            f"got {type(k).__name__} -> {type(v).__name__}")
        infos[k] = v
    if graph in infos:
        info = infos[graph]
        return dict(infos) if return_all_grad_graphs else info
    _check_no_modifying_ops(graph, infos)
    # A required gradient must have a differentiable path from a provided one.
    reach = _backward_reach(graph._ops, provided)
    for t in required:
        if not _is_float(t):
            raise popart_exception(
                f"[Autodiff] Unable to provide required gradient output for fwd id '{t.id}': "
                f"its dtype {t.dtype.name} carries no gradient")
        if id(t) not in reach:
            raise popart_exception(
                f"[Autodiff] Unable to provide required gradient output for fwd id '{t.id}': no "
                "differentiable path connects it to the provided gradients")
    ad = _Autodiff(graph.ir, infos)
    try:
        with gc_paused():
            info = ad.differentiate(graph, provided, required, top=True)
    except BaseException:
        ad.rollback()
        raise
    if return_all_grad_graphs:
        return dict(ad.touched)
    return info
