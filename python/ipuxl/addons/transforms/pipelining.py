"""``pipelined_execution`` (``popxl_addons.transforms.pipelining``).

Inside ``with pipelined_execution(steps) as p:`` every op of the current
graph is created in a ``with p.stage(i):`` block (an op-created hook
refuses others: ``RuntimeError("Operation must be created in a stage
context.")``). On exit the transform, as popxl_addons:

1. sorts each stage's ops, in schedule order, into host loads (a
   ``host_load`` and any input-less op only it reads), compute ops, host
   stores and ``ipu_copy`` ops, and moves them into new graphs
   ``loads_stage_i``, ``stage_i``, ``stores_stage_i`` and one
   ``ipu_copies`` graph; tensors crossing from one of those graphs to
   another become outputs of the first and inputs of the second; tensors
   from outside (variables, constants, earlier results) are routed in, by
   reference where a moved op writes them;
2. builds ``pipeline_graph``, called from the current graph: a ramp-up of
   ``S - 1`` cycles (cycle ``i`` runs stages ``0..i-1``), then
   ``ops.repeat`` of the full cycle ``steps - (S - 1)`` times (on IPU 0),
   whose loop-carried values are the ``ipu_copy`` results, then a
   ramp-down of ``S - 1`` cycles (cycle ``i`` runs stages ``i..S-1``).
   Each cycle calls, for its stages, the loads, then the compute, then
   the stores, then (except when only the last stage runs) the copies
   between IPUs. Before a stage has produced anything, the copies read
   ``dummy__`` tensors (``ops.init`` on the source IPU), as popxl_addons.

So each stage runs ``steps`` times and a micro-batch reaches stage ``k``
``k`` cycles after stage 0 read it: a value that a later stage on the same
IPU needs (an activation for the backward pass) must go through
``stash_and_restore_tensor`` / ``stash_and_restore_activations``: the
``Stash`` and ``Restore`` modules, a FIFO of ``to - from + 1`` entries in a
variable with a ``uint32`` counter. Pipelining needs ``steps >= 2 * S``
(``ValueError`` otherwise). A tensor a stage reads from an earlier stage
without a copy or a stash is an error wherever the earlier stage did not run
in the same cycle.

The simulator runs the cycle's stages one after the other; on IPUs they
overlap. The results are those of the IPU program, which
``ipu_model_tests/addons/test_addons_pipelining.py`` checks against the
unpipelined model.
"""
from collections import defaultdict
from contextlib import contextmanager
from functools import partial
from typing import Dict, List, Optional

import numpy as np

from ... import dtypes, ops
from ...context import get_current_graph, in_sequence, ipu
from ...graph import Graph
from ...op import Op
from ...opdef import get_opdef
from ...tensor import Constant, Tensor, graph_input, graph_output
from ...transforms.autodiff import GradGraphInfo
from ..module import Module
from ._surgery import clone_op, erase_op

__all__ = ["pipelined_execution"]


def get_op_pipeline_stage(op: Op, op_dict: Dict[int, List[Op]]) -> Optional[int]:
    """The stage whose list in ``op_dict`` holds ``op`` (None: none)."""
    for stage, op_list in op_dict.items():
        if any(o is op for o in op_list):
            return stage
    return None


def _written_inputs(graph: Graph) -> List[Tensor]:
    """Inputs of ``graph`` that its ops write (directly or through views)."""
    out = []
    inputs = {id(t) for t in graph._inputs}
    for op in graph._ops:
        for i in op.modified:
            t = op.inputs[i] if i < len(op.inputs) else None
            seen = 0
            while t is not None and t.producer is not None and seen < 100000:
                src = t.producer
                k = src.outputs.index(t)
                nxt = [src.inputs[j] for o, j in src.aliases if o == k]
                t = nxt[0] if nxt else None
                seen += 1
            if t is not None and id(t) in inputs and all(t is not o for o in out):
                out.append(t)
    return out


def _mark_by_ref(graph: Graph) -> None:
    """Pass by reference the inputs of ``graph`` its ops write, so that the
    writes reach the caller (as popxl_addons routes them)."""
    for t in _written_inputs(graph):
        graph._by_ref_inputs.add(t)


class _StageGraph:
    """One graph the transform builds: the original tensors it reads (one
    input each) and those it gives back (one output each)."""

    def __init__(self, graph: Graph, stage: int, ipu_id: int):
        self.graph = graph
        self.stage = stage
        self.ipu = ipu_id
        self.input_of: Dict[Tensor, Tensor] = {}    # original -> graph input
        self.clone_of: Dict[Tensor, Tensor] = {}    # original -> graph tensor
        self.outputs: List[Tensor] = []             # originals, in output order

    def add_output(self, orig: Tensor) -> None:
        if any(o is orig for o in self.outputs):
            return
        with self.graph:
            graph_output(self.clone_of[orig])
        self.outputs.append(orig)


class Pipelining:
    """The transform ``pipelined_execution`` applies (see the module docstring)."""

    def __init__(self, graph: Graph, steps: int):
        if isinstance(steps, bool) or not hasattr(steps, "__index__"):
            raise TypeError(f"pipelined_execution: steps must be an int, got {steps!r}")
        self.ir = graph.ir
        self.original_graph = graph
        self.steps = int(steps)

    # ---------------------------------------------------------------- sorting
    def _is_load(self, op: Op, members) -> bool:
        if get_opdef(op.type).kind == "host_load":
            return True
        # An input-less op feeding only a host load (PopXL's Init before HostLoad).
        if op.inputs or not op.outputs:
            return False
        users = [c for o in op.outputs for c in o._consumers]
        return len(users) == 1 and get_opdef(users[0].type).kind == "host_load" \
            and id(users[0]) in members

    def apply(self, include_ops: Dict[int, List[Op]]) -> None:
        g = self.original_graph
        members = {}
        for stage, lst in include_ops.items():
            for op in lst:
                members[id(op)] = stage
        schedule = [op for op in g._ops if id(op) in members]
        groups = {"load": defaultdict(list), "compute": defaultdict(list),
                  "store": defaultdict(list), "copy": defaultdict(list)}
        for op in schedule:
            kind = get_opdef(op.type).kind
            st = members[id(op)]
            if self._is_load(op, members):
                groups["load"][st].append(op)
            elif kind == "host_store":
                groups["store"][st].append(op)
            elif kind == "ipu_copy":
                groups["copy"][st].append(op)
            else:
                groups["compute"][st].append(op)
        stages = sorted(groups["compute"])
        self.num_stages = len(stages)
        if self.steps < 2 * self.num_stages:
            raise ValueError(
                "Pipelining requires the steps at least 2x the number of stages in the pipeline. "
                f"steps={self.steps} stages={self.num_stages}")
        if stages != list(range(self.num_stages)):
            raise ValueError(f"pipelined_execution: the stages with compute ops are {stages}; "
                             f"expected 0..{self.num_stages - 1}, each with compute ops")
        for kind in ("load", "store", "copy"):
            extra = sorted(set(groups[kind]) - set(stages))
            if extra:
                raise ValueError(f"pipelined_execution: stage {extra[0]} has {kind} ops but no "
                                 "compute ops")
        moved = {id(op) for op in schedule}
        for op in schedule:
            for t in op.outputs:
                for c in t._consumers:
                    if id(c) not in moved:
                        raise ValueError(
                            f"pipelined_execution: {t.id!r}, computed in pipeline stage "
                            f"{members[id(op)]}, is read by {c.type} {c.name!r} outside the "
                            "pipeline; results leave a pipeline through host stores or "
                            "variables")
        self._construct(groups, schedule, members)
        self._build()
        for op in reversed(schedule):
            erase_op(op)

    # ---------------------------------------------------------------- graphs
    def _new(self, name: str, stage: int, ops_: List[Op]) -> _StageGraph:
        first = next((o.ipu for o in ops_ if o.ipu is not None), 0)
        return _StageGraph(self.ir.create_empty_graph(name), stage, first)

    def _construct(self, groups, schedule, members) -> None:
        S = self.num_stages
        self.loads: Dict[int, _StageGraph] = {}
        self.stages: Dict[int, _StageGraph] = {}
        self.stores: Dict[int, _StageGraph] = {}
        all_copies = [op for s in range(S) for op in groups["copy"].get(s, [])]
        self.copies = self._new("ipu_copies", -1, all_copies) if all_copies else None
        self.producer_graph: Dict[Tensor, _StageGraph] = {}
        self.copy_inputs: List[Tensor] = []
        self.external: List[Tensor] = []
        order = []
        for s in range(S):
            if groups["load"].get(s):
                self.loads[s] = self._new(f"loads_stage_{s}", s, groups["load"][s])
                order.append((self.loads[s], groups["load"][s]))
            self.stages[s] = self._new(f"stage_{s}", s, groups["compute"][s])
            order.append((self.stages[s], groups["compute"][s]))
            if groups["store"].get(s):
                self.stores[s] = self._new(f"stores_stage_{s}", s, groups["store"][s])
                order.append((self.stores[s], groups["store"][s]))
            if groups["copy"].get(s):
                order.append((self.copies, groups["copy"][s]))
        for sg, ops_ in order:
            for op in ops_:
                self._move(sg, op)
        for sg in self._graphs():
            _mark_by_ref(sg.graph)

    def _graphs(self) -> List[_StageGraph]:
        out = []
        for s in range(self.num_stages):
            for d in (self.loads, self.stages, self.stores):
                if s in d:
                    out.append(d[s])
        if self.copies is not None:
            out.append(self.copies)
        return out

    def _move(self, sg: _StageGraph, op: Op) -> None:
        ins = []
        for t in op.inputs:
            if t is None:
                ins.append(None)
                continue
            if t in sg.clone_of:
                ins.append(sg.clone_of[t])
                continue
            with sg.graph:
                gi = graph_input(t.shape, t.dtype, t.name)
            sg.input_of[t] = gi
            sg.clone_of[t] = gi
            src = self.producer_graph.get(t)
            if src is not None:
                src.add_output(t)
            elif all(t is not e for e in self.external):
                self.external.append(t)
            if get_opdef(op.type).kind == "ipu_copy" and all(t is not c for c in self.copy_inputs):
                self.copy_inputs.append(t)
            ins.append(gi)
        new = clone_op(op, sg.graph, ins)
        for o, no in zip(op.outputs, new.outputs):
            sg.clone_of[o] = no
            self.producer_graph[o] = sg

    # ---------------------------------------------------------------- calls
    def _call(self, sg: _StageGraph, env: Dict[Tensor, Tensor],
              fallback: Optional[Dict[Tensor, Tensor]] = None) -> None:
        inputs = {}
        for orig, gi in sg.input_of.items():
            v = env.get(orig)
            if v is None and fallback is not None:
                v = fallback.get(orig)
            if v is None:
                src = self.producer_graph.get(orig)
                where = f"pipeline stage {src.stage}" if src is not None else "outside"
                raise ValueError(
                    f"pipelined_execution: {sg.graph.name} reads {orig.id!r} (computed in "
                    f"{where}) in a cycle where it is not available: a value passed between "
                    "stages must go through an ipu_copy or "
                    "stash_and_restore_tensor/stash_and_restore_activations")
            inputs[gi] = v
        with ipu(sg.ipu):
            outs = ops.call(sg.graph, inputs_dict=inputs)
        for orig, v in zip(sg.outputs, outs):
            env[orig] = v

    def _cycle(self, start: int, end: int, env: Dict[Tensor, Tensor]) -> None:
        # What a cycle starts from: the routed-in tensors and the copies
        # between IPUs of the cycle before; stage results are this cycle's.
        for k in list(env):
            src = self.producer_graph.get(k)
            if src is not None and src is not self.copies:
                del env[k]
        for group in (self.loads, self.stages, self.stores):
            for s in range(start, end):
                if s in group:
                    self._call(group[s], env)
        if start == self.num_stages - 1 or self.copies is None:
            return
        # Stages that did not run in this cycle (ramp up and down) give
        # the copies their dummy__ tensors.
        self._call(self.copies, env, self._dummies)

    @staticmethod
    def _external_input(t: Tensor) -> Tensor:
        return graph_input(t.shape, t.dtype, t.name)

    def _build(self) -> None:
        S = self.num_stages
        pipe = self.ir.create_empty_graph("pipeline_graph")
        carried = list(self.copies.outputs) if self.copies is not None else []
        with pipe, in_sequence(True):
            env: Dict[Tensor, Tensor] = {}
            pipe_inputs = {}
            for t in self.external:
                gi = self._external_input(t)
                pipe_inputs[gi] = t
                env[t] = gi
            dummies = {}
            for t in self.copy_inputs:
                src = self.producer_graph.get(t)
                src_ipu = next(c.attrs["_source"] for c in t._consumers
                               if get_opdef(c.type).kind == "ipu_copy")
                if src is not None:
                    with ipu(src_ipu):
                        dummies[t] = ops.init(t.shape, t.dtype, "dummy__" + t.name)
            self._dummies = dummies
            # Ramp up.
            for i in range(1, S):
                self._cycle(0, i, env)
            # Main cycles: the ipu_copy results are carried from one to the next.
            body = self.ir.create_empty_graph("main_repeat")
            with body:
                benv: Dict[Tensor, Tensor] = {}
                # (the dummies are not in the body: in a full cycle every stage runs)
                saved, self._dummies = self._dummies, {}
                for t in carried:
                    benv[t] = graph_input(t.shape, t.dtype, t.name)
                body_ext = {}
                for t in self.external:
                    gi = self._external_input(t)
                    body_ext[gi] = t
                    benv[t] = gi
                self._cycle(0, S, benv)
                self._dummies = saved
                for t in carried:
                    graph_output(benv[t])
            _mark_by_ref(body)
            missing = [t for t in carried if t not in env]
            if missing:
                raise ValueError(f"pipelined_execution: {missing[0].id!r} is copied between "
                                 "IPUs before any stage computes it")
            with ipu(0):
                info = ops.repeat_with_info(
                    body, self.steps - (S - 1), *[env[t] for t in carried],
                    inputs_dict={gi: env[t] for gi, t in body_ext.items()})
            env = {t: env[t] for t in self.external}
            for t, out in zip(carried, info.outputs):
                env[t] = out
            # Stage results of the last main cycle stay in the loop body.
            # Ramp down.
            for i in range(1, S):
                self._cycle(i, S, env)
        _mark_by_ref(pipe)
        ops.call(pipe, inputs_dict=pipe_inputs)


class StageContext:
    """What ``pipelined_execution`` yields: ``stage(i)`` places the ops
    created inside in pipeline stage ``i``; ``ops`` lists each stage's ops."""

    def __init__(self):
        self._stage = None
        self.ops: Dict[int, List[Op]] = defaultdict(list)

    def hook(self, op: Op) -> None:
        if self._stage is None:
            raise RuntimeError("Operation must be created in a stage context.")
        self.ops[self._stage].append(op)

    @contextmanager
    def stage(self, i: int):
        """Set the pipeline stage of the ops created in this scope."""
        if isinstance(i, bool) or not hasattr(i, "__index__") or int(i) < 0:
            raise ValueError(f"pipeline stage must be a non-negative int, got {i!r}")
        prev = self._stage
        self._stage = int(i)
        try:
            yield
        finally:
            self._stage = prev

    def _is_external_input(self, t: Tensor) -> bool:
        if t.producer is not None:
            return get_op_pipeline_stage(t.producer, self.ops) is None
        return True

    def stash_and_restore_tensor(self, t: Tensor, from_stage: Optional[int] = None) -> Tensor:
        """Stash ``t`` in stage ``from_stage`` (default: the stage of its
        producer) and restore it in the current stage; returns the restored
        tensor.

        Raises:
            RuntimeError: ``from_stage`` is not given and ``t`` has no
                producer, or this is not called in a stage context.
        """
        if from_stage is None:
            if t.producer is None:
                raise RuntimeError(
                    "If the tensor to be stash does not have a producer `from_stage` must be "
                    "specified to `stash_and_restore_tensor`")
            from_stage = get_op_pipeline_stage(t.producer, self.ops)
        to_stage = self._stage
        if to_stage is None:
            raise RuntimeError("`stash_and_restore_tensor` must be called in a stage context.")
        if from_stage is None:
            raise RuntimeError(f"stash_and_restore_tensor: {t.id!r} is not produced in a "
                               "pipeline stage; give `from_stage`")
        stash_size = (to_stage - from_stage) + 1
        with self.stage(from_stage):
            args, graph = Stash().create_graph(t, stash_size)
            stash_args = args.init()
            graph.bind(stash_args).call(t)
        with self.stage(to_stage):
            args, graph = Restore().create_graph(stash_args.stash)
            (restored,) = graph.bind(args.init()).call(stash_args.stash)
        return restored

    def stash_and_restore_activations(self, call_info, grad_info: GradGraphInfo
                                      ) -> Dict[Tensor, Tensor]:
        """``grad_info.inputs_dict(call_info)`` where every activation
        computed in an earlier stage is passed through a stash."""
        activations = grad_info.inputs_dict(call_info)
        from_stage = get_op_pipeline_stage(call_info._op, self.ops)
        to_stage = self._stage
        if to_stage != from_stage:
            for sg_tensor, act in activations.items():
                if not self._is_external_input(act):
                    act = self.stash_and_restore_tensor(act, from_stage=from_stage)
                activations[sg_tensor] = act
        return activations


@contextmanager
def pipelined_execution(steps: int):
    """Pipeline the ops created in this context: each stage (``stage(i)``)
    runs ``steps`` times, stage ``i`` on the micro-batch stage ``i-1``
    handled one cycle before (see the module docstring).

    Raises:
        RuntimeError: an op is created outside a ``stage`` context.
        ValueError: ``steps`` is less than twice the number of stages.

    Args:
        steps: how many times the scoped computation runs.
    """
    graph = get_current_graph()
    transform = Pipelining(graph, steps)
    stages = StageContext()
    handle = graph.register_op_created_hook(stages.hook)
    try:
        yield stages
    finally:
        graph.remove_op_created_hook(handle)
    transform.apply(stages.ops)


class Stash(Module):
    """A FIFO of ``stash_size`` entries of ``t`` in a variable; each call
    writes the next entry."""

    @in_sequence()
    def build(self, t: Tensor, stash_size: int):
        counter = self.add_variable_input("counter", partial(np.zeros, (1,)), dtypes.uint32,
                                          by_ref=True)
        stashed_shape = t.shape
        if stashed_shape == ():
            stashed_shape = (1,)
        t = t.reshape((1, *stashed_shape))
        if stash_size <= 1:
            raise TypeError(f"Stash must be larger than 1. size={stash_size}, t={t}")
        stash = self.add_variable_input("stash", partial(np.zeros, (stash_size, *stashed_shape)),
                                        t.dtype, by_ref=True)
        ops.dynamic_update_(stash, counter, t, axes=[0], sizes=[1], no_overlap=True)
        ops.increment_mod_(counter, 1, stash_size)


class Restore(Module):
    """Reads a Stash's entries in the order they were written."""

    @in_sequence()
    def build(self, stash: Tensor):
        counter = self.add_variable_input("counter", partial(np.zeros, (1,)), dtypes.uint32,
                                          by_ref=True)
        t = ops.dynamic_slice(stash, counter, axes=[0], sizes=[1], no_overlap=True)
        ops.increment_mod_(counter, 1, stash.shape[0])
        return t.reshape(t.shape[1:])

