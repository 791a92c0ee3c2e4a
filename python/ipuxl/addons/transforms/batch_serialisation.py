"""Batch serialisation, mirroring ``popxl_addons.transforms.batch_serialisation``.

``batch_serialise(graph, steps, load_handles, store_streams, store_buffers)``
makes a graph that runs ``graph`` ``steps`` times in a loop; each iteration
loads the inputs named in ``load_handles`` (from a host stream, or from a
remote buffer), calls ``graph`` and stores the outputs (or inputs) named in
``store_streams`` / ``store_buffers``. Inputs without a handle become inputs
of the new graph ("passed through"). The new graph's one extra input is the
*row offset* ``n``: a remote buffer is a matrix of ``rows`` rows of
``steps`` entries, and iteration ``i`` of a call with row ``n`` uses entry
``n * steps + i`` (a handle's own row offset shifts it, ``None`` pins it to
row 0, a function maps ``n`` to the row).

``io_mode``: ``"compute"`` moves data on the compute tiles; ``"io"`` on the
IO tiles (``numIOTiles`` must be set), with ``io_tile_copy`` between the
two; ``"io_overlapped"`` arranges the loop so that iteration ``i`` loads the
inputs of ``i + 1`` and stores the results of ``i - 1`` on the IO tiles while
the compute tiles work on ``i`` (each exchange in one ``io_tile_exchange``).

``batch_serialise_fwd_and_grad`` does both halves of a training step: the
forward graph also stores the activations the gradient graph needs, in
buffers it creates, and the gradient graph loads them back.
"""
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ... import dtypes, ops
from ...context import in_sequence, io_tiles
from ...remote_buffer import RemoteBuffer
from ...replica_grouping import ReplicaGrouping
from ...streams import DeviceToHostStream, HostToDeviceStream
from ...tensor import Tensor, TensorByRef, constant, graph_input
from ...transforms import io_tile_exchange, merge_exchange
from ...transforms.autodiff import ExpectedConnectionType
from ..graph import GraphWithNamedArgs
from ..named_tensors import NamedTensors
from ..utils import null_context, suffix_graph_name
from .autodiff import remap_grad_info

__all__ = ["batch_serialise", "batch_serialise_fwd_and_grad", "batch_serial_buffer",
           "RemoteHandle", "BatchSerialResult"]


@dataclass
class RemoteHandle:
    """Where a tensor lives in a remote buffer: the buffer, its row offset
    (an int, None for row 0 whatever the call's row, or a function of the
    call's row tensor), and the shard group when it is replica-sharded."""

    buffer: RemoteBuffer
    row_offset: Union[int, None, Callable[[Tensor], Tensor]] = 0
    shard_group: Optional[ReplicaGrouping] = None


Handle = Union[HostToDeviceStream, RemoteHandle]


def _as_handle(value: Any) -> Any:
    """``(RemoteBuffer, row)`` tuples (the older form) as RemoteHandles."""
    if isinstance(value, (tuple, list)) and len(value) >= 2 and \
            isinstance(value[0], RemoteBuffer) and (value[1] is None or isinstance(value[1], int)):
        return RemoteHandle(*value)
    return value


@dataclass
class BatchSerialResult:
    """``graph``: the transformed graph; ``stored_buffers``: for tensors of
    the original graph, the RemoteHandle their values were stored in."""

    graph: GraphWithNamedArgs
    stored_buffers: Dict[Tensor, RemoteHandle]
    _remap_dict: Dict[Tensor, Tensor]

    def remap_tensors(self, ts: NamedTensors) -> NamedTensors:
        """``ts`` (tensors of the original graph) as the transformed graph's."""
        return ts.remap(self._remap_dict)


def batch_serial_buffer(t: Tensor, steps: int = 1, rows: int = 1,
                        shard_group: Optional[ReplicaGrouping] = None) -> RemoteBuffer:
    """A remote buffer of ``steps * rows`` entries for ``t``: entry
    ``row * steps + step``; sharded over ``shard_group`` when given."""
    from ..remote import create_remote_buffer

    shard_over = shard_group.group_size if shard_group else 1
    return create_remote_buffer(t.spec, entries=steps * rows, replica_group=shard_group,
                                shard_over=shard_over)


class _Plan:
    """Which tensors of ``graph`` are loaded, stored and passed through."""

    def __init__(self, graph: GraphWithNamedArgs, load: Dict[Tensor, Handle],
                 streams: Dict[Tensor, DeviceToHostStream], buffers: Dict[Tensor, RemoteHandle],
                 seed_input: Optional[Tensor], steps: int, rows: int):
        g = graph.graph
        self.graph, self.load, self.streams, self.buffers = graph, load, streams, buffers
        self.seed_input, self.steps, self.rows = seed_input, steps, rows
        self.loaded = [t for t in g.inputs if t in load]

        def stored(t):
            from_buffer = t in load and not isinstance(load[t], HostToDeviceStream)
            return not from_buffer and (t in streams or t in buffers)

        self.stored = [t for t in list(g.inputs) + list(g.outputs) if stored(t)]
        self.passed = [t for t in g.inputs if t is not seed_input and t not in load]

    # ---- offsets
    def _entry(self, index: Tensor, handle: RemoteHandle) -> Tensor:
        steps, rows, row = self.steps, self.rows, handle.row_offset
        if row is None:
            entry, size = index % steps, steps
        elif callable(row):
            # index = n * steps + i: map the row n, keep the step i.
            steps_t = constant(steps, dtypes.int32)
            entry, size = row(index / steps_t) * steps + (index % steps_t), steps * rows
        elif row:
            entry, size = index + row * steps, steps * (row + rows)
        else:
            entry, size = index, steps * rows
        handle.buffer.entries = max(handle.buffer.entries, size)
        return entry

    def load_sources(self, index: Tensor) -> List[Tuple[Tensor, Any]]:
        out = []
        for t in self.loaded:
            h = self.load[t]
            if isinstance(h, HostToDeviceStream):
                out.append((t, h))
            elif isinstance(h, RemoteHandle):
                out.append((t, (h.buffer, self._entry(index, h))))
            else:
                raise TypeError(f"Incompatible handle in `load_handles` for tensor {t} : {h}")
        return out

    def store_targets(self, index: Tensor) -> Dict[Tensor, Tuple[RemoteBuffer, Tensor]]:
        return {t: (self.buffers[t].buffer, self._entry(index, self.buffers[t]))
                for t in self.stored if t in self.buffers}

    # ---- moving data
    @staticmethod
    def load_all(sources) -> List[Tensor]:
        return [ops.host_load(h, t.name) if isinstance(h, HostToDeviceStream)
                else ops.remote_load(h[0], h[1], t.name) for t, h in sources]

    def store_all(self, values: List[Tensor], targets) -> None:
        for t, v in zip(self.stored, values):
            if t in self.streams:
                ops.host_store(self.streams[t], v)
            if t in targets:
                buf, entry = targets[t]
                ops.remote_store(buf, entry, v)

    def gather(self, values: List[Tensor]) -> List[Tensor]:
        """All-gather loaded shards of replica-sharded tensors."""
        from ..rts import gather_replica_sharded_tensor

        out = []
        for t, v in zip(self.loaded, values):
            h = self.load[t]
            if isinstance(h, RemoteHandle) and h.shard_group and h.shard_group.group_size != 1:
                v = gather_replica_sharded_tensor(v, use_io_tiles=False, replica_group=h.shard_group)
            out.append(v)
        return out

    def slice(self, values: List[Tensor]) -> List[Tensor]:
        """This replica's shard of values stored sharded."""
        out = []
        for t, v in zip(self.stored, values):
            h = self.buffers.get(t)
            if h is not None and h.shard_group and h.shard_group.group_size != 1:
                v = ops.collectives.replica_sharded_slice(v, group=h.shard_group)
            out.append(v)
        return out

    def call(self, loaded: List[Tensor], passed: List[Tensor], seed: Optional[Tensor]):
        args = {}
        if self.seed_input is not None:
            args[self.seed_input] = seed
        args.update(zip(self.loaded, loaded))
        args.update(zip(self.passed, passed))
        info = self.graph.call_with_info(args=args)
        return [info.graph_to_parent(t) for t in self.stored]

    def passed_inputs(self) -> List[Tensor]:
        by_ref = self.graph.graph._by_ref_inputs
        return [graph_input(t.shape, t.dtype, t.name, t in by_ref, t.meta_shape)
                for t in self.passed]

    def split(self, passed: List[Tensor]) -> Tuple[List[Tensor], List[Tensor]]:
        """Passed-through tensors the graph writes (by reference) and the
        others: only the first are by reference in the loop body, so that
        the rest need not be copied around it."""
        by_ref = self.graph.graph._by_ref_inputs
        ref = [p for t, p in zip(self.passed, passed) if t in by_ref]
        val = [p for t, p in zip(self.passed, passed) if t not in by_ref]
        return ref, val

    def join(self, ref: List[Tensor], val: List[Tensor]) -> List[Tensor]:
        by_ref = self.graph.graph._by_ref_inputs
        ref_it, val_it = iter(ref), iter(val)
        return [next(ref_it) if t in by_ref else next(val_it) for t in self.passed]

    def result(self, repeat_graph, passed: List[Tensor]) -> BatchSerialResult:
        remap = dict(zip(self.passed, passed))
        stored = {}
        for t in self.buffers:
            if t in self.graph.graph:
                h = self.load.get(t)
                stored[t] = h if h is not None and not isinstance(h, HostToDeviceStream) \
                    else self.buffers[t]
        return BatchSerialResult(GraphWithNamedArgs(repeat_graph, self.graph.args.remap(remap)),
                                 stored, remap)


def _io_copy(ts: List[Tensor]) -> List[Tensor]:
    return [ops.io_tile_copy(t) for t in ts]


def _loop_inputs(ir, plan: _Plan, use_io: bool):
    """The serialised graph's inputs: row, seed, passed-through tensors;
    and the first entry index ``row * steps``."""
    index = graph_input([], dtypes.int32, "batch_serial_loop_index")
    with (io_tiles() if use_io else null_context()):
        if use_io:
            index = ops.io_tile_copy(index)
        index = index * plan.steps
    if plan.seed_input is not None:
        seed = graph_input((2,), dtypes.uint32, "batch_serial_random_seed")
    else:
        seed = constant((0, 0), dtypes.uint32, "dummy_random_seed")
    return index, seed, plan.passed_inputs()


def _check(ir, rows: int, need_io: bool) -> None:
    if rows < 1:
        raise ValueError("rows must be >0")
    if need_io and ir.num_io_tiles < 1:
        raise ValueError("IR must have IO tiles")


def _serialise(plan: _Plan, use_io: bool) -> BatchSerialResult:
    ir = plan.graph.graph.ir
    tiles = io_tiles if use_io else null_context

    @in_sequence(True)
    def step(index: Tensor, seed: Tensor, passed_ref: List[TensorByRef],
             passed_val: List[Tensor]):
        passed = plan.join(passed_ref, passed_val)
        seed, next_seed = ops.split_random_seed(seed)
        with tiles():
            sources = plan.load_sources(index)
            targets = plan.store_targets(index)
        with tiles(), merge_exchange(), in_sequence(False):
            loaded = plan.load_all(sources)
        with tiles():
            loaded = plan.gather(loaded)
        if use_io:
            loaded = _io_copy(loaded)
        stored = plan.call(loaded, passed, seed)
        if use_io:
            stored = _io_copy(stored)
        with tiles():
            stored = plan.slice(stored)
        with tiles(), merge_exchange(), in_sequence(False):
            plan.store_all(stored, targets)
        with tiles():
            index = index + 1
        return index, next_seed

    graph = ir.create_empty_graph(suffix_graph_name(plan.graph.graph.name, "_repeat_graph"))
    with graph, in_sequence():
        index, seed, passed = _loop_inputs(ir, plan, use_io)
        ref, val = plan.split(passed)
        body = ir.create_graph(step, index, seed, ref, val)
        ops.repeat(body, plan.steps, index, seed, *ref, *val)
    return plan.result(graph, passed)


def _serialise_overlapped(plan: _Plan) -> BatchSerialResult:
    """load 0; load 1 + compute 0; repeat(store i-2 + load i + compute i-1);
    store n-2 + compute n-1; store n-1."""
    ir = plan.graph.graph.ir
    steps = plan.steps

    def finish(values: List[Tensor]) -> List[Tensor]:
        values = _io_copy(values)
        with io_tiles():
            return plan.slice(values)

    @in_sequence()
    def step(index: Tensor, seed: Tensor, loaded: List[Tensor], stored_io: List[Tensor],
             passed_ref: List[TensorByRef], passed_val: List[Tensor]):
        passed = plan.join(passed_ref, passed_val)
        seed, next_seed = ops.split_random_seed(seed)
        with io_tiles():
            sources = plan.load_sources(index)
            targets = plan.store_targets(index - 2)
        with io_tile_exchange():
            loaded_io = plan.load_all(sources)
            plan.store_all(stored_io, targets)
        stored = plan.call(loaded, passed, seed)
        with io_tiles():
            loaded_io = plan.gather(loaded_io)
        next_loaded = _io_copy(loaded_io)
        stored_io = finish(stored)
        with io_tiles():
            index = index + 1
        return (index, next_seed, *next_loaded, *stored_io)

    graph = ir.create_empty_graph(suffix_graph_name(plan.graph.graph.name, "_repeat_graph"))
    with graph, in_sequence():
        index, seed, passed = _loop_inputs(ir, plan, True)

        def load(at):
            with io_tiles():
                sources = plan.load_sources(at)
            with io_tile_exchange():
                loaded = plan.load_all(sources)
            with io_tiles():
                return plan.gather(loaded)

        loaded_0 = _io_copy(load(index))
        with io_tiles():
            index = index + 1
        seed_0, seed = ops.split_random_seed(seed)
        loaded_1 = load(index)
        stored_0 = finish(plan.call(loaded_0, passed, seed_0))
        loaded_1 = _io_copy(loaded_1)
        with io_tiles():
            index = index + 1
        if steps > 2:
            ref, val = plan.split(passed)
            body = ir.create_graph(step, index, seed, loaded_1, stored_0, ref, val)
            index, seed, *rest = ops.repeat(body, steps - 2, index, seed, *loaded_1, *stored_0,
                                            *ref, *val)
            loaded_n, stored_prev = rest[:len(loaded_1)], rest[len(loaded_1):]
        else:
            loaded_n, stored_prev = loaded_1, stored_0
        with io_tiles():
            store_index = index - 2
        seed_n, seed = ops.split_random_seed(seed)
        with io_tiles():
            targets = plan.store_targets(store_index)
        with io_tile_exchange():
            plan.store_all(stored_prev, targets)
        stored_n = finish(plan.call(loaded_n, passed, seed_n))
        with io_tiles():
            store_index = store_index + 1
            targets = plan.store_targets(store_index)
        with io_tile_exchange():
            plan.store_all(stored_n, targets)
    return plan.result(graph, passed)


def batch_serialise(graph: GraphWithNamedArgs, steps: int,
                    load_handles: Dict[Tensor, Any], store_streams: Dict[Tensor, DeviceToHostStream],
                    store_buffers: Dict[Tensor, Any], seed_input: Optional[Tensor] = None,
                    rows: int = 1, io_mode: str = "io") -> BatchSerialResult:
    """``graph`` run ``steps`` times with its inputs loaded and outputs stored
    as the handles say (see the module docstring)."""
    load_handles = {t: _as_handle(h) for t, h in load_handles.items()}
    store_buffers = {t: _as_handle(h) for t, h in store_buffers.items()}
    if io_mode not in ("compute", "io", "io_overlapped"):
        raise ValueError(f"Unknown 'io_mode' {io_mode}. Supported: (compute, io, io_overlapped)")
    if io_mode == "io_overlapped" and steps < 2:
        logging.warning("batch_serialisation with io_mode='io_overlapped' requires at least 2 "
                        "steps. Falling back to io_mode='io'.")
        io_mode = "io"
    ir = graph.graph.ir
    _check(ir, rows, io_mode != "compute")
    plan = _Plan(graph, load_handles, store_streams, store_buffers, seed_input, steps, rows)
    if io_mode == "io_overlapped":
        return _serialise_overlapped(plan)
    return _serialise(plan, io_mode == "io")


def batch_serialise_fwd_and_grad(forward_graph: GraphWithNamedArgs,
                                 gradient_graph: GraphWithNamedArgs,
                                 named_inputs_for_grad_graph: NamedTensors, steps: int,
                                 load_handles: Dict[Tensor, Any],
                                 store_streams: Dict[Tensor, DeviceToHostStream],
                                 store_buffers: Dict[Tensor, Any],
                                 seed_input: Optional[Tensor] = None, rows: int = 1,
                                 io_mode: str = "io"
                                 ) -> Tuple[BatchSerialResult, BatchSerialResult]:
    """Serialise a forward graph and its gradient graph together: the
    activations the gradient graph reads are stored by the forward loop (in
    buffers made here unless a handle is given; a ReplicaGrouping value in
    ``store_buffers`` shards that activation) and loaded by the gradient
    loop; ``named_inputs_for_grad_graph`` (usually the forward variables)
    become named inputs of the gradient graph instead."""
    shard_groups = {t: v for t, v in store_buffers.items() if isinstance(v, ReplicaGrouping)}
    store_buffers = {t: _as_handle(v) for t, v in store_buffers.items()
                     if not isinstance(v, ReplicaGrouping)}
    load_handles = {t: _as_handle(h) for t, h in load_handles.items()}
    info = gradient_graph.grad_graph_info
    grad_inputs = gradient_graph.graph.inputs
    named_fwd = named_inputs_for_grad_graph.named_tensors
    fwd_connections = [(i, ec) for i, ec in enumerate(info.expected_inputs)
                       if ec.connection_type == ExpectedConnectionType.Fwd]
    for _, ec in fwd_connections:
        t = ec.fwd_tensor
        if t in store_buffers or t in named_inputs_for_grad_graph.tensors:
            continue
        h = load_handles.get(t)
        if h is not None and not isinstance(h, HostToDeviceStream):
            store_buffers[t] = h
            continue
        group = shard_groups.get(t)
        store_buffers[t] = RemoteHandle(batch_serial_buffer(t, steps, rows, group), 0, group)

    forward = batch_serialise(forward_graph, steps, load_handles, store_streams, store_buffers,
                              seed_input, rows, io_mode)

    grad_loads, named = {}, {}
    for i, ec in fwd_connections:
        t = ec.fwd_tensor
        if t in named_inputs_for_grad_graph.tensors:
            name = next(k for k, v in named_fwd.items() if v is t)
            named[name] = grad_inputs[i]
        elif t in forward.stored_buffers:
            grad_loads[grad_inputs[i]] = forward.stored_buffers[t]
        else:
            raise RuntimeError(f"Fwd Connection {t} missing. You need to provide it either in "
                               "forward_variables or in load_handles")
    named.update(gradient_graph.args.named_tensors)
    gradient_graph.args = NamedTensors.from_dict(named)
    for i, ec in enumerate(info.expected_inputs):
        if ec.connection_type != ExpectedConnectionType.FwdGrad:
            continue
        g = grad_inputs[i]
        if g not in load_handles:
            raise ValueError(f"FwdGrad input (idx={i} {g}) to Gradient graph must have a "
                             "load_handle specified")
        grad_loads[g] = load_handles[g]

    gradient = batch_serialise(gradient_graph, steps, grad_loads, store_streams, store_buffers,
                               None, rows, io_mode)
    gradient.graph.grad_graph_info = remap_grad_info(info, forward_graph.graph,
                                                     gradient_graph.graph)
    return forward, gradient
