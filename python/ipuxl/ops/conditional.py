"""``conditional``: run one of two graphs depending on a scalar condition."""
from typing import Iterable, List, Mapping, Optional, Tuple

from .. import dtypes
from .._positions import position
from ..errors import popart_exception
from ..graph import Graph
from ..op import Op, create_op
from ..tensor import Tensor
from ..grad import register_grad
from ..opdef import define_op
from .call import bind_inputs
from .rules import called_graph_outputs
from .utils import check_in_graph, to_tensor

__all__ = ["conditional", "conditional_with_info", "ConditionalSiteInfo"]


class ConditionalSiteInfo:
    """Parent-side view of a conditional: input 0 is the condition, then the
    then-branch inputs, then the else-branch inputs."""

    def __init__(self, op: Op, n_then: int):
        self._op = op
        self._n_then = n_then

    @property
    def called_graph(self) -> Tuple[Graph, Graph]:
        return tuple(self._op.called_graphs)

    @property
    def inputs(self) -> Tuple[Tensor, ...]:
        return tuple(self._op.inputs)

    @property
    def outputs(self) -> Tuple[Tensor, ...]:
        return tuple(self._op.outputs)

    def is_parent_index_in_then_branch(self, idx: int) -> bool:
        return 1 <= idx <= self._n_then

    def graph_to_parent_input_index(self, idx: int, then_branch: bool = True) -> int:
        return 1 + idx if then_branch else 1 + self._n_then + idx

    def parent_to_graph_input_index(self, idx: int) -> int:
        if idx < 1 or idx >= len(self._op.inputs):
            raise IndexError(f"parent input index {idx} is not a branch input")
        return idx - 1 if idx <= self._n_then else idx - 1 - self._n_then

    def graph_to_parent_output_index(self, idx: int, then_branch: bool = True) -> int:
        """Both branches' outputs map to the op's outputs in order, so
        ``then_branch`` (PopXL's parameter) selects nothing different."""
        return idx

    def parent_to_graph_output_index(self, idx: int, then_branch: bool = True) -> int:
        """See ``graph_to_parent_output_index``."""
        return idx

    def parent_input(self, idx: int) -> Tensor:
        return self._op.inputs[idx]

    def parent_output(self, idx: int) -> Tensor:
        return self._op.outputs[idx]

    def graph_to_parent(self, graph_tensor: Tensor) -> Tensor:
        then_g, else_g = self.called_graph
        k = position(then_g, "_inputs", graph_tensor)
        if k >= 0:
            return self._op.inputs[1 + k]
        k = position(else_g, "_inputs", graph_tensor)
        if k >= 0:
            return self._op.inputs[1 + self._n_then + k]
        for g in (then_g, else_g):
            k = position(g, "_outputs", graph_tensor)
            if k >= 0:
                return self._op.outputs[k]
        raise ValueError(f"Tensor {graph_tensor.id} is not an input or output of either branch")

    def parent_to_graph(self, parent_tensor: Tensor) -> Tensor:
        then_g, else_g = self.called_graph
        for i, t in enumerate(self._op.inputs[1:], start=1):
            if t == parent_tensor:
                return then_g._inputs[i - 1] if i <= self._n_then else \
                    else_g._inputs[i - 1 - self._n_then]
        raise ValueError(f"Tensor {parent_tensor.id} is not a branch input of this conditional")

    def set_parent_input_modified(self, parent_tensor: Tensor, infer_modified_regions: bool = False):
        raise NotImplementedError(
            "ConditionalSiteInfo.set_parent_input_modified is not supported by ipuxl")


def conditional_with_info(cond: Tensor, then_branch: Graph, else_branch: Graph,
                          then_inputs: Optional[Iterable[Tensor]] = None,
                          else_inputs: Optional[Iterable[Tensor]] = None,
                          then_inputs_dict: Optional[Mapping[Tensor, Tensor]] = None,
                          else_inputs_dict: Optional[Mapping[Tensor, Tensor]] = None,
                          check_inputs: bool = True) -> ConditionalSiteInfo:
    """As :func:`conditional`, returning a :class:`ConditionalSiteInfo`."""
    cond = to_tensor(cond, op="conditional")
    check_in_graph("conditional", cond=cond)
    if cond.nelms != 1:
        raise ValueError(f"conditional: the condition {cond.id!r} must have one element, has "
                         f"shape {cond.shape}")
    if cond.dtype != dtypes.bool:
        # PopART's If takes a BOOL condition only (its OpDefinition).
        raise popart_exception(
            f"conditional: the condition {cond.id!r} must be a bool tensor, got "
            f"{cond.dtype.name}; compare it explicitly (ops.greater, ops.equal) or cast it")
    t_par = bind_inputs("conditional", then_branch, then_inputs or [], then_inputs_dict, check_inputs)
    e_par = bind_inputs("conditional", else_branch, else_inputs or [], else_inputs_dict, check_inputs)
    # As PopXL (whose If op has no modified inputs, T66328): a branch input
    # passed by reference is refused rather than run with its writes dropped.
    # Checked before the op exists, so the graph is left as it was.
    for branch, which in ((then_branch, "then_branch"), (else_branch, "else_branch")):
        for t in branch.inputs:
            if t in branch._by_ref_inputs:
                raise NotImplementedError(
                    "TensorByRef is not implemented for the conditional op. You cannot call "
                    f"this input to the {which} graph by ref: {t}")
    if len(then_branch.outputs) != len(else_branch.outputs):
        raise popart_exception(
            f"conditional: then branch {then_branch.name!r} has {len(then_branch.outputs)} "
            f"outputs, else branch {else_branch.name!r} has {len(else_branch.outputs)}")
    for i, (a, b) in enumerate(zip(then_branch.outputs, else_branch.outputs)):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise popart_exception(
                f"conditional: output {i} differs between branches: {a.id!r} "
                f"{a.dtype.name}{a.shape} vs {b.id!r} {b.dtype.name}{b.shape}")
    nt = len(t_par)
    attrs = {"then_inputs": list(range(1, 1 + nt)),
             "else_inputs": list(range(1 + nt, 1 + nt + len(e_par)))}
    outs = [t.name.split("/")[-1] for t in then_branch.outputs]
    op = create_op("If", [cond] + t_par + e_par, outs, attrs, name="if",
                   called_graphs=[then_branch, else_branch])
    return ConditionalSiteInfo(op, nt)


define_op("If", called_graph_outputs, kind="if", side_effects=True)


def conditional(cond: Tensor, then_branch: Graph, else_branch: Graph,
                then_inputs: Optional[Iterable[Tensor]] = None,
                else_inputs: Optional[Iterable[Tensor]] = None,
                then_inputs_dict: Optional[Mapping[Tensor, Tensor]] = None,
                else_inputs_dict: Optional[Mapping[Tensor, Tensor]] = None) -> Tuple[Tensor, ...]:
    """Run ``then_branch`` if ``cond`` is true, else ``else_branch``; both must
    have outputs of the same shapes and dtypes. Returns the outputs."""
    return conditional_with_info(cond, then_branch, else_branch, then_inputs, else_inputs,
                                 then_inputs_dict, else_inputs_dict).outputs


# ---- gradient rule
#
# The gradient of a conditional is a conditional over the branches'
# gradients (PopART's IfGradOp). Both branches of it take the same inputs
# (the output gradients and every input of the forward conditional) and
# give a gradient for every float input: the taken branch's gradient graph
# for its own inputs, zeros for the other branch's. Each recomputes its
# branch's forward values (a conditional's activations cannot be stitched
# out of it) before calling the branch's gradient graph.

@register_grad("If", nondiff=(0,))
def _if_grad(ctx):
    from ..tensor import graph_input, graph_output
    from ..transforms.autodiff import ExpectedConnectionType
    from .call import call, call_with_info
    from .init import init

    op = ctx.op
    branches = op.called_graphs
    infos = [ctx.subgraph_grad_info(b) for b in branches]  # first: autodiff may restart
    maps = [list(op.attrs["then_inputs"]), list(op.attrs["else_inputs"])]
    ins = list(op.inputs)
    outs = list(op.outputs)
    float_out = [j for j, t in enumerate(outs) if t.dtype.is_floating_point]
    float_in = [i for i in range(1, len(ins)) if ins[i].dtype.is_floating_point]

    def wrapper(b: int):
        branch, info, mapping = branches[b], infos[b], maps[b]
        g = ctx.new_graph(f"if_grad_{'then' if b == 0 else 'else'}")
        with g:
            gs = {j: graph_input(outs[j].shape, outs[j].dtype, f"grad_out_{j}") for j in float_out}
            xs = {i: graph_input(ins[i].shape, ins[i].dtype, f"input_{i}")
                  for i in range(1, len(ins))}
            site = call_with_info(branch, *[xs[i] for i in mapping])
            idx_of = {id(t): k for k, t in enumerate(branch.inputs)}
            out_of = {id(t): k for k, t in enumerate(branch.outputs)}
            args = []
            for ec in info.expected_inputs:
                t = ec.fwd_tensor
                if ec.connection_type == ExpectedConnectionType.FwdGrad:
                    j = out_of[id(t)]
                    args.append(gs[j] if j in gs else init(t.shape, t.dtype))
                elif id(t) in idx_of:
                    args.append(xs[mapping[idx_of[id(t)]]])
                else:
                    args.append(site.outputs[out_of[id(t)]])
            grads = call(info.graph, *args) if info.expected_outputs else ()
            total = {}
            for ec, gr in zip(info.expected_outputs, grads):
                i = mapping[idx_of[id(ec.fwd_tensor)]]
                total[i] = total[i] + gr if i in total else gr
            for i in float_in:
                graph_output(total[i] if i in total
                             else init(ins[i].shape, ins[i].dtype, f"zero_grad_{i}"))
        return g

    then_g, else_g = wrapper(0), wrapper(1)
    args = [ctx.g_or_zeros(j) for j in float_out] + [ctx.x(i) for i in range(1, len(ins))]
    res = conditional(ctx.x(0), then_g, else_g, then_inputs=args, else_inputs=args)
    result = [None] * len(ins)
    for pos, i in enumerate(float_in):
        result[i] = res[pos] if ctx.needs(i) else None
    return result
