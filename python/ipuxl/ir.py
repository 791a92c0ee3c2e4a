"""``Ir``, mirroring ``popxl.Ir``: the main graph, subgraphs and program options."""
import inspect
import numbers
import typing
from typing import Any, Callable, Dict, List, Optional, Union

from . import dtypes
from .graph import Graph

__all__ = ["Ir"]

_IR_COUNTER = [0]


class Ir:
    """An intermediate representation: a main graph plus the subgraphs it calls.

    Args:
        replication: number of replicas the program runs on, or ``"popdist"``:
            the layout ``ipuxl poprun`` gives this instance (see
            :mod:`ipuxl.popdist`). Then ``replication_factor`` is the
            replicas of all instances, ``instance_replication_factor`` this
            instance's, and groupings and collectives span all instances.
    """

    def __init__(self, replication: Union[int, str] = 1):
        #: The instance layout under popdist (``ipuxl.popdist.Layout``), else None.
        self._popdist = None
        if isinstance(replication, str) and replication == "popdist":
            from . import popdist

            self._popdist = popdist.layout()
            popdist.init()
            replication = self._popdist.total
        elif not isinstance(replication, numbers.Integral) or isinstance(replication, bool) \
                or replication < 1:
            raise ValueError(f"replication must be a positive int or 'popdist', got "
                             f"{replication!r}")
        replication = int(replication)
        self._id = _IR_COUNTER[0]
        _IR_COUNTER[0] += 1
        self._replication_factor = replication
        self._num_host_transfers = 1
        self._op_counter = 100  # op ids count from 100, as in PopART (print_schedule, FLOP breakdowns)
        self._graph_counter = 0
        self._tensor_counter = 0
        self._graphs: Dict[str, Graph] = {}
        self._main = Graph._create(self, "")
        self._graphs[""] = self._main
        self._streams: List[Any] = []
        self._prepared = False
        self._graph_cache: Dict[Any, Graph] = {}
        self._remote_buffers: List[Any] = []  # popxl.RemoteBuffer, in creation order
        self._remote_buffer_infos: Dict[int, Any] = {}  # id -> (shape, dtype, entries)
        from . import settings

        # An abstract build (ipuxl._abstract): fixed when the Ir is created,
        # so every variable of one Ir is of one kind.
        self._abstract = settings.abstract_builds()

    # ---- properties
    @property
    def id(self) -> int:
        return self._id

    @property
    def abstract(self) -> bool:
        """Whether this Ir is an abstract build (an ipuxl extension): its
        variables have shapes and dtypes but no host data, so it can be
        profiled but not run (see :mod:`ipuxl._abstract`). Set by the
        ``abstract`` setting when the Ir is created."""
        return self._abstract

    @property
    def main_graph(self) -> Graph:
        return self._main

    @property
    def num_host_transfers(self) -> int:
        """How many times each host stream may be loaded/stored per ``Session.run``."""
        return self._num_host_transfers

    @num_host_transfers.setter
    def num_host_transfers(self, value: int):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"num_host_transfers must be a positive int, got {value!r}")
        self._num_host_transfers = value

    @property
    def replication_factor(self) -> int:
        """The replicas of the program: of all instances under popdist."""
        return self._replication_factor

    @replication_factor.setter
    def replication_factor(self, value: int):
        if self._prepared:
            raise RuntimeError(
                f"The Ir {self.id} is already prepared (a Session was created for it); its "
                "replication_factor cannot change.")
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"replication_factor must be a positive int, got {value!r}")
        if self._popdist is not None:
            raise RuntimeError(
                f"The Ir {self.id} takes its replication from popdist "
                f"({self._popdist.total} replicas over {self._popdist.instances} instances); set "
                "--num-replicas of `ipuxl poprun` instead.")
        self._replication_factor = value

    @property
    def instance_replication_factor(self) -> int:
        """The replicas this process runs (``replication_factor`` but under popdist)."""
        if self._popdist is not None:
            return self._popdist.local
        return self._replication_factor

    def replica_grouping(self, stride: int = 1, group_size: Optional[int] = None):
        """Groups of ``group_size`` replicas ``stride`` apart (default: one
        group of all replicas). ``ValueError`` unless ``stride * group_size``
        divides the replication factor."""
        from .replica_grouping import ReplicaGrouping

        return ReplicaGrouping._from_params(self, stride, group_size)

    def replica_grouping_from_assignments(self, assignment: List[int]):
        """A grouping from the group of each replica: groups of equal size,
        numbered from 0 in the order of their first replica. A partition that
        no ``(stride, group_size)`` describes is a non-constant grouping
        (usable for variables, not for collectives)."""
        from .replica_grouping import ReplicaGrouping

        return ReplicaGrouping._from_assignment(self, assignment)

    @property
    def _pb_ir(self):
        """``ir._pb_ir.getSessionOptions()``, the one PopART path PopXL
        programs use (``numIOTiles`` and the options of
        :mod:`ipuxl.session_options`)."""
        from .session_options import IrHandle

        return IrHandle(self)

    @property
    def num_io_tiles(self) -> int:
        """IO tiles set aside on each IPU (``numIOTiles``; ipuxl)."""
        return self.__dict__.get("_num_io_tiles", 0)

    # ---- graphs
    def create_empty_graph(self, name: str = "graph") -> Graph:
        """An empty subgraph, to be filled with ``with g:``."""
        return self._new_graph(name)

    def _new_graph(self, base: str) -> Graph:
        name = f"{base}_subgraph({self._graph_counter})"
        self._graph_counter += 1
        g = Graph._create(self, name)
        self._graphs[name] = g
        return g

    def create_graph(self, fn: Callable, *args, **kwargs) -> Graph:
        """Trace ``fn`` (a function or a ``popxl.Module``) into a new subgraph.

        Every Tensor or TensorSpec argument becomes a graph input named after
        its parameter (a list of them becomes ``name_0``, ``name_1`` ...);
        other arguments are passed through. Returned tensors become outputs.
        """
        from .context import get_current_context
        from .tensor import Tensor, TensorByRef, TensorSpec, graph_input, graph_output

        if not callable(fn):
            raise TypeError(f"Callable `fn` must be a function or a popxl.Module, got "
                            f"{type(fn).__name__}")
        target = fn.build if hasattr(fn, "build") and not inspect.isfunction(fn) and \
            not inspect.ismethod(fn) else fn
        qual = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        qual = qual.replace(".<locals>", "")
        try:
            sig = inspect.signature(target)
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise ValueError(f"create_graph: arguments do not match the signature of {qual}: {e}") from None
        try:
            hints = typing.get_type_hints(target)
        except Exception:  # noqa: BLE001 - annotations are optional
            hints = getattr(target, "__annotations__", {})

        def is_by_ref(pname):
            h = hints.get(pname)
            if h is None:
                return False
            if h is TensorByRef:
                return True
            return TensorByRef in getattr(h, "__args__", ())

        g = self._new_graph(qual)
        ctx = get_current_context()
        saved_scopes = ctx._name_scopes
        ctx._name_scopes = []
        try:
            with g:
                def make_input(v, name, by_ref):
                    spec = v.spec if isinstance(v, Tensor) else v
                    return graph_input(spec.shape, spec.dtype, name, by_ref=by_ref,
                                       meta_shape=spec.meta_shape)

                def is_tensorlike(v):
                    return isinstance(v, (Tensor, TensorSpec))

                new_args = {}
                for pname, value in bound.arguments.items():
                    kind = sig.parameters[pname].kind
                    by_ref = is_by_ref(pname)
                    if kind is inspect.Parameter.VAR_POSITIONAL:
                        items = list(value)
                        if items and all(is_tensorlike(v) for v in items):
                            value = tuple(make_input(v, f"{pname}_{i}", by_ref) for i, v in enumerate(items))
                        elif any(is_tensorlike(v) for v in items):
                            raise TypeError(f"create_graph: *{pname} mixes tensors and other values")
                    elif kind is inspect.Parameter.VAR_KEYWORD:
                        out = {}
                        for k, v in value.items():
                            out[k] = make_input(v, k, by_ref) if is_tensorlike(v) else v
                        value = out
                    elif is_tensorlike(value):
                        value = make_input(value, pname, by_ref)
                    elif isinstance(value, (list, tuple)) and value and any(is_tensorlike(v) for v in value):
                        if not all(is_tensorlike(v) for v in value):
                            raise TypeError(
                                f"create_graph: argument {pname!r} mixes tensors and other values")
                        value = type(value)(make_input(v, f"{pname}_{i}", by_ref)
                                            for i, v in enumerate(value))
                    new_args[pname] = value
                bound.arguments.update(new_args)
                result = target(*bound.args, **bound.kwargs)
                if result is None:
                    outs = []
                elif isinstance(result, Tensor):
                    outs = [result]
                else:
                    try:
                        outs = list(result)
                    except TypeError:
                        raise ValueError(
                            f"create_graph: {qual} must return None, a Tensor or an iterable of "
                            f"Tensors, got {type(result).__name__}") from None
                    if not all(isinstance(t, Tensor) for t in outs):
                        raise ValueError(
                            f"create_graph: {qual} must return None, a Tensor or an iterable of "
                            "Tensors")
                for t in outs:
                    graph_output(t)
        finally:
            ctx._name_scopes = saved_scopes
        return g

    # ---- streams
    def get_all_h2d_streams(self):
        """Host-to-device streams that at least one ``host_load`` reads."""
        return {s for s in self._streams if s._direction == "h2d" and s._used}

    def get_all_d2h_streams(self):
        """Device-to-host streams that at least one ``host_store`` writes."""
        return {s for s in self._streams if s._direction == "d2h" and s._used}

    # ---- counters (deterministic names)
    def _next_op_id(self) -> int:
        self._op_counter += 1
        return self._op_counter - 1

    def _unique_tensor_id(self, base: str, taken) -> str:
        while True:
            cand = f"{base}__t{self._tensor_counter}"
            self._tensor_counter += 1
            if cand not in taken:
                return cand

    def dot_checkpoint(self, check: str, save_dir: Optional[str] = None) -> None:
        raise NotImplementedError("Ir.dot_checkpoint (PopART DOT export) is not implemented in ipuxl")

    def __hash__(self):
        return hash(self._id)

    def __eq__(self, other):
        if not isinstance(other, Ir):
            raise TypeError(f"Cannot compare an Ir with {type(other).__name__}")
        return other is self

    def __repr__(self):
        return f"Ir[id={self._id}]"
