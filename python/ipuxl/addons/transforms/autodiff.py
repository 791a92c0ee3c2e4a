"""``autodiff`` and ``autodiff_with_accumulation`` (``popxl_addons.transforms.autodiff``).

Both run ``ipuxl.transforms.autodiff`` (PopXL's contract: the forward graph
gains outputs for the activations the gradient graph needs, so differentiate
*before* calling the forward graph).

Differences from popxl_addons, by design:

* popxl_addons then sets the PopART pattern level to Default and runs the
  pre-alias and inplace patterns on every produced gradient graph, because
  PopART's grad ops must be rewritten before lowering. ipuxl's gradient rules
  emit ordinary, directly lowerable ops and the simulator needs no in-place
  rewriting, so no pattern pass runs (the ``MulLhsInplace``/``MulRhsInplace``
  op types popxl_addons' tests count never appear).
* The returned GraphWithNamedArgs has named args: every ``Fwd`` input of the
  gradient graph that is a *named* input of the forward graph (a variable)
  gets the forward key, so ``bwd.bind(variables)`` can supply the weights.
  popxl_addons returns no named args there; binding by key intersection
  makes the extra names harmless to code written for it.
"""
from functools import partial
from typing import Dict, Iterable, Mapping, Optional, Tuple, Union

import numpy as np

from ... import dtypes
from ..._positions import position
from ...context import in_sequence
from ...graph import Graph
from ...tensor import Tensor, constant
from ...transforms.autodiff import ExpectedConnectionType, GradGraphInfo
from ...transforms.autodiff import autodiff as _popxl_autodiff
from ..dot_tree import sanitise
from ..graph import GraphWithNamedArgs, _normalise_grad_info_map
from ..named_replica_grouping import NamedReplicaGrouping
from ..named_tensors import NamedTensors
from ..variable_factory import NamedVariableFactories, add_variable_input

__all__ = ["autodiff", "autodiff_with_accumulation", "remap_grad_info"]

GraphLike = Union[Graph, GraphWithNamedArgs]


def _split(graph: GraphLike) -> Tuple[Graph, NamedTensors, dict]:
    if isinstance(graph, GraphWithNamedArgs):
        return graph.graph, graph.args, dict(graph.called_graphs_grad_info)
    if isinstance(graph, Graph):
        return graph, NamedTensors(), {}
    raise TypeError(f"autodiff expects a popxl Graph or a GraphWithNamedArgs, got "
                    f"{type(graph).__name__}")


def _named_fwd_args(info: GradGraphInfo, fwd_args: NamedTensors) -> NamedTensors:
    """Named args of the gradient graph: its Fwd inputs that are named forward inputs."""
    key_of = {}
    for k, t in sorted(fwd_args.to_dict().items()):
        key_of.setdefault(t, k)
    named = {}
    for ec, gin in zip(info.expected_inputs, info.graph.inputs):
        if ec.connection_type == ExpectedConnectionType.Fwd and ec.fwd_tensor in key_of:
            named[key_of[ec.fwd_tensor]] = gin
    return NamedTensors.from_dict(named)


def _run(graph: Graph, grads_provided, grads_required, called) -> Dict[Graph, GradGraphInfo]:
    return _popxl_autodiff(graph, grads_provided=grads_provided, grads_required=grads_required,
                           called_graphs_grad_info=called, return_all_grad_graphs=True)


def autodiff(graph: GraphLike, grads_provided: Optional[Iterable[Tensor]] = None,
             grads_required: Optional[Iterable[Tensor]] = None,
             called_graphs_grad_info: Optional[Mapping] = None,
             return_all_grad_graphs: bool = False
             ) -> Union[GraphWithNamedArgs, Dict[Graph, GraphWithNamedArgs]]:
    """Differentiate ``graph``; returns the gradient graph as a
    GraphWithNamedArgs carrying ``grad_graph_info``.

    Args:
        graph: forward graph (GraphWithNamedArgs or popxl Graph).
        grads_provided: forward outputs whose gradients are the first inputs
            of the gradient graph (default: all outputs).
        grads_required: forward inputs whose gradients it outputs, in order
            (default: all inputs).
        called_graphs_grad_info: ``{forward graph: GradGraphInfo or gradient
            GraphWithNamedArgs}`` to reuse for called graphs; merged with the
            graph's own ``called_graphs_grad_info`` (the explicit one wins).
        return_all_grad_graphs: return ``{forward Graph: GraphWithNamedArgs}``
            for every graph differentiated or reused (ipuxl extension, as in
            ``popxl.transforms.autodiff``).

    Usage (the tutorials' pattern)::

        bwd = addons.autodiff(fwd)                 # before calling fwd
        info = fwd.bind(vars).call_with_info(x)
        loss, dy = addons.ops.cross_entropy_with_grad(info.outputs[0], labels)
        bwd_info = bwd.call_with_info(dy, args=bwd.grad_graph_info.inputs_dict(info))
        grads = bwd.grad_graph_info.fwd_parent_ins_to_grad_parent_outs(info, bwd_info)
    """
    g, args, own = _split(graph)
    called = {**own, **_normalise_grad_info_map(called_graphs_grad_info)}
    infos = _run(g, grads_provided, grads_required, called)
    if return_all_grad_graphs:
        return {fg: GraphWithNamedArgs.from_grad_graph(i, _named_fwd_args(i, args) if fg is g
                                                       else None)
                for fg, i in infos.items()}
    info = infos[g]
    return GraphWithNamedArgs.from_grad_graph(info, _named_fwd_args(info, args))


def autodiff_with_accumulation(
        graph: GraphLike, tensors_to_accumulate_grads: Iterable[Tensor],
        grads_provided: Optional[Iterable[Tensor]] = None,
        grads_required: Optional[Iterable[Tensor]] = None,
        called_graphs_grad_info: Optional[Mapping] = None,
        replica_groupings: Optional[NamedReplicaGrouping] = None
) -> Tuple[NamedVariableFactories, GraphWithNamedArgs]:
    """Autodiff, then accumulate the gradients of ``tensors_to_accumulate_grads``
    into by-reference accumulators instead of outputting them.

    The gradient graph gains the named by-reference inputs
    ``mean_accum_counter`` (float32 scalar) and ``accum.<key>`` per tensor
    (``<key>``: its key in ``graph.args``, else its sanitised name). Each call
    does ``accumulate_mean_(accum, grad, counter)`` for every accumulator,
    then ``counter += 1``: the accumulators hold the **mean** of the
    gradients since the counter was last reset (reset with
    ``ops.var_updates.accumulator_scale_(counter, 0.0)``). Only the
    gradients of ``grads_required`` remain outputs (default: none).

    Returns:
        ``(factories, grad_graph)``: zero-initialised factories for the
        counter and accumulators (accumulators use ``replica_groupings[key]``
        or all replicas), and the gradient graph with those named args.
    """
    g, args, own = _split(graph)
    to_acc = list(tensors_to_accumulate_grads)
    if not to_acc:
        raise ValueError("autodiff_with_accumulation: tensors_to_accumulate_grads is empty")
    for t in to_acc:
        if not isinstance(t, Tensor) or t not in g.inputs:
            raise ValueError(f"autodiff_with_accumulation: {t} is not an input of {g.name}")
    keep = list(grads_required or [])
    called = {**own, **_normalise_grad_info_map(called_graphs_grad_info)}
    info = _run(g, grads_provided, keep + to_acc, called)[g]
    bwd = info.graph
    groups = replica_groupings.to_dict() if replica_groupings is not None else {}
    key_of = {}
    for k, t in args.to_dict().items():
        key_of.setdefault(t, k)

    named: Dict[str, Tensor] = {}
    facts: Dict[str, object] = {}

    def add(name, *a, **kw):
        t, f = add_variable_input(name, *a, **kw)
        named[name] = t
        facts[name] = f
        return t

    from ... import ops

    n_keep = len(keep)
    with bwd, in_sequence(True):
        counter = add("mean_accum_counter", partial(np.zeros, shape=()), dtypes.float32, by_ref=True)
        with in_sequence(False):
            for i, t in enumerate(to_acc):
                grad = bwd.outputs[n_keep + i]
                key = key_of.get(t, sanitise(t.name))
                rg = groups.get(key) or bwd.ir.replica_grouping()
                accum = add("accum." + key, partial(np.zeros, shape=t.shape), t.dtype, by_ref=True,
                            replica_grouping=rg)
                ops.var_updates.accumulate_mean_(accum, grad, counter)
        ops.var_updates.accumulate_(counter, constant(1, dtypes.float32))
    # The accumulated gradients are no longer outputs.
    bwd._outputs = list(bwd._outputs[:n_keep])
    new_info = GradGraphInfo._create(bwd, g, info.expected_inputs, info.expected_outputs[:n_keep])
    # As popxl_addons: the named args are the counter and the accumulators
    # (the variables the factories make); forward tensors the gradient graph
    # reads stay positional, connected through grad_graph_info.inputs_dict
    # (programs bind the accumulators by these names: tutorial 6's phases).
    return (NamedVariableFactories.from_dict(facts),
            GraphWithNamedArgs.from_grad_graph(new_info, NamedTensors.from_dict(named)))


def remap_grad_info(grad_info: GradGraphInfo, forward_graph: Graph,
                    backward_graph: Graph) -> GradGraphInfo:
    """The same connections, re-targeted at ``forward_graph``/``backward_graph``
    by input/output index (for transforms that rebuild both graphs)."""
    from ...transforms.autodiff import ExpectedConnection

    old = grad_info.forward_graph

    def remap(t: Tensor) -> Tensor:
        k = position(old, "_inputs", t)
        if k >= 0:
            return forward_graph.inputs[k]
        k = position(old, "_outputs", t)
        if k >= 0:
            return forward_graph.outputs[k]
        raise ValueError(f"remap_grad_info: {t} is neither an input nor an output of {old.name}")

    ins = [ExpectedConnection._create(remap(ec.fwd_tensor), ec.connection_type)
           for ec in grad_info.expected_inputs]
    outs = [ExpectedConnection._create(remap(ec.fwd_tensor), ec.connection_type)
            for ec in grad_info.expected_outputs]
    return GradGraphInfo._create(backward_graph, forward_graph, ins, outs)
