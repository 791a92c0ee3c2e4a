"""``Session``, mirroring ``popxl.Session``: compiles an Ir once and runs it.

The Ir is lowered into the C++ core's program (see :mod:`ipuxl.lowering`) and
an Engine is built; ``run`` validates the host arrays and crosses into C++ once.
Host copies of variables follow PopXL's rules: ``weights_from_host`` when a
context attaches, ``weights_to_host`` when it detaches, lazily on
``get_tensor_data`` when the device copy is newer.
"""
import functools
import sys
import threading
import warnings
import weakref
from collections import abc
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional

import numpy as np

from . import _abstract, dtypes, settings
from ._gc import gc_paused
from ._host_memory import aligned_copy, aligned_empty, is_aligned
from .lowering import LoweredProgram, build
from .ir import Ir
from .streams import DeviceToHostStream, HostToDeviceStream
from .tensor import Constant, Tensor, Variable

__all__ = ["Session"]

_DEVICES = ("cpu", "ipu_model", "ipu_hw")
HW_FALLBACK_ENV = "IPUXL_REQUIRE_IPU_HW"


def _sdk_importable() -> bool:
    """Whether the SDK's own ``popart`` is importable; ipuxl's compat alias of
    that name is not the SDK."""
    from . import compat

    return compat.real_package_importable("popart")


def _exclusive(method):
    """One thread at a time in this Session: the host-side bookkeeping
    (which copy of the weights is current, whether a run failed) and the
    engine calls of one entry point form one unit, so two threads sharing a
    Session see the result of running their calls one after the other. The
    lock is re-entrant (entry points call each other). The Engine takes its
    own lock too, for callers that use it directly."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        if self._engine is None and method.__name__ not in _abstract.SESSION_ALLOWED:
            raise _abstract.refuse_session(self, method.__name__)
        with self._lock:
            return method(self, *args, **kwargs)
    return locked


class Session:
    """Compile ``ir`` for ``device_desc`` (``"cpu"``, ``"ipu_model"`` or
    ``"ipu_hw"``) and run it.

    ``"ipu_model"`` and ``"cpu"`` run the ipuxl simulator. ``"ipu_hw"`` needs a
    Poplar SDK bridge, which ipuxl does not ship: it runs on the simulator
    after a one-line warning, or raises if ``IPUXL_REQUIRE_IPU_HW=1``.

    Host and device copies of variables follow PopXL. On the simulator the
    device copy of a variable no op writes lives in its host array (the two
    are always equal there, so nothing observable changes and the weights
    of an inference program are held once).

    ``share_host_weights=True`` (an ipuxl extension, like JAX's buffer
    donation) does the same for variables the program updates: a training
    program then holds one copy of its weights, and ``weights_to_host`` is
    free. The price is PopXL's separate host copy: the host values are
    always the device's current values, so ``weights_from_host`` cannot
    restore values from before a run, and leaving the context after an
    exception or with ``weights_to_host_on_exit=False`` leaves the device
    values on the host. Only one live Session per Ir shares host arrays.
    After a run that failed part-way, the host values of shared variables
    the program writes are half-updated: ``save_checkpoint`` refuses them
    until known values are written.

    Threads: one Session may be used from several threads; each call
    (``run``, weights copies, tensor data, checkpoints) runs alone, so the
    result is that of the calls one after another. Signals: a run on the
    main thread checks for pending signals between program steps (every
    50 ms): Ctrl-C raises ``KeyboardInterrupt`` and leaves the device state
    undefined, as any run that fails part-way.
    """

    @gc_paused()  # compiling keeps tens of objects an op alive (ipuxl._gc)
    def __init__(self, ir: Ir, device_desc="cpu", weights_to_host_on_exit: bool = True,
                 *, share_host_weights: bool = False, host_passes=None):
        from .profile.model import IpuModel

        if not isinstance(ir, Ir):
            raise TypeError(f"Session expects an Ir, got {type(ir).__name__}")
        model = None
        if isinstance(device_desc, IpuModel):  # as PopXL takes a DeviceInfo
            model, device_desc = device_desc, "ipu_model"
        opts = settings.current()
        if device_desc == "ipu_hw" and opts.offline_device:
            device_desc = opts.offline_device
        if device_desc not in _DEVICES:
            raise ValueError(f"device_desc must be one of {_DEVICES}, got {device_desc!r}")
        if device_desc == "ipu_hw":
            why = ("a Poplar SDK is importable but ipuxl has no bridge to it yet"
                   if _sdk_importable() else "no Poplar SDK is importable")
            if opts.require_ipu_hw:
                raise RuntimeError(
                    f"Session(device_desc='ipu_hw'): {why}, and {HW_FALLBACK_ENV} is set, so "
                    "ipuxl will not fall back to the simulator.")
            print(f"ipuxl: warning: 'ipu_hw' requested but {why}; running on the ipu_model "
                  f"simulator (set {HW_FALLBACK_ENV}=1 to make this an error)", file=sys.stderr)
        rf = ir.replication_factor
        if device_desc == "cpu" and rf > 1:
            raise ValueError(
                f"The 'cpu' device does not support replication (replication_factor={rf}); "
                "use 'ipu_model'.")
        if not any(g._ops for g in ir._graphs.values()):
            raise RuntimeError(
                f"The Ir {ir.id} has no graphs with ops: add ops to ir.main_graph before creating "
                "a Session.")
        self._lock = threading.RLock()
        self._ir = ir
        self._device = device_desc
        self.weights_to_host_on_exit = weights_to_host_on_exit
        ir._prepared = True
        from .session_options import warn_unmodelled_options

        warn_unmodelled_options(ir)
        if ir._abstract:  # modelled, never run: no Engine (ipuxl._abstract)
            _abstract.init_session(self, device_desc, model)
            return
        self._prog: LoweredProgram = build(ir, host_passes)
        self._engine = self._prog.engine
        # Under popdist with several instances: collectives between them go
        # through MPI, and the weight code sees every instance's replicas.
        self._instances = self._distribute(self._prog.engine)
        self._hosteng = self._instances or self._engine
        # The IPU model: "ipu_model"/"ipu_hw" programs that do not fit raise
        # here, at compile time, as Poplar does (ipuxl.profile).
        from .profile import session_model

        self._model = model
        self._profile = session_model(self, device_desc, model)
        # IPUXL_CHECK_HOST_PASSES=1: every run also runs the program without
        # host passes and compares (a test mode: ipuxl.testing).
        self._host_pass_checker = None
        if opts.check_host_passes and any(self._prog.host_passes.values()):
            from .testing import HostPassChecker

            self._host_pass_checker = HostPassChecker(self)
        # The host copy of each variable is the variable's own data, as in
        # PopXL where the IR's tensor data is the host side of the weights
        # (a Session owns its Ir). Read-only data (a memmap) is copied.
        self._host: Dict[Variable, np.ndarray] = {}
        for v in self._prog.variables + self._prog.remote_variables:
            data = v._host_data
            if not (isinstance(data, np.ndarray) and data.flags.writeable and
                    data.flags.c_contiguous and data.dtype == v.dtype.as_numpy()):
                data = np.array(data, dtype=v.dtype.as_numpy(), order="C", copy=True)
                if not isinstance(v._host_data, np.memmap):
                    v._host_data = data
            self._host[v] = data
        # Remote variables live in each replica's Streaming Memory.
        from ._remote_state import RemoteVariables

        self._remote = RemoteVariables(self._prog, self._hosteng)
        # all_replicas variables: every replica's value, from the last
        # weights_to_host.
        self._all_replicas: Dict[Variable, np.ndarray] = {}
        self._shared = self._share_host_arrays(bool(share_host_weights))
        self._attached = False
        self._host_in_sync = True
        # Why the device state is undefined (a run failed part-way), or None.
        self._failed_run: Optional[str] = None
        # Shared variables the program writes: after a failed run their host
        # arrays (the device storage) hold a half-applied step, until known
        # values are written (see _assert_host_values_defined).
        self._shared_written = frozenset(
            v for v in self._shared if self._engine.program_writes(self._prog.tensor_index[v]))
        self._half_applied: FrozenSet[Variable] = frozenset()
        self._short_warned = set()
        self._overflow_warned = set()  # streams whose downcast overflowed once
        self._op_count = ir._op_counter
        self._attach_stack: List[bool] = []
        # The Ir is frozen from here on: precompute what every run checks.
        self._h2d = frozenset(ir.get_all_h2d_streams())
        self._d2h = frozenset(ir.get_all_d2h_streams())
        self._io = {s: (self._prog.stream_index[s], self._full_shape(s.shape),
                        s.dtype.as_numpy()) for s in self._h2d | self._d2h}
        # Streams whose tensor the program computes straight into the output
        # array when the array is 64-byte aligned (host pass
        # direct_host_stores): run() allocates theirs so.
        self._aligned_outputs = frozenset(self._prog.direct_store_streams)
        self._d2h_sorted = sorted(self._d2h)
        # The transfers per run the arrays above were shaped for (PopXL, too,
        # fixes them when the Session is created).
        self._n_transfers = ir.num_host_transfers

    def _distribute(self, engine):
        """Under popdist with several instances: makes ``engine`` one instance
        of the global replicas (collectives that cross instances exchange
        through :func:`ipuxl.popdist.communicator`) and returns the host view
        over all replicas (:class:`ipuxl._instances.GlobalReplicas`); else None."""
        lay = self._ir._popdist
        if lay is None or lay.instances == 1:
            return None
        from . import popdist
        from ._instances import GlobalReplicas

        comm = popdist.communicator()
        if comm.native is not None:  # the C exchange: no call back into Python
            engine.set_distributed_native(lay.offset, lay.total, comm.native.function,
                                          comm.native.context, comm.native)
        else:
            engine.set_distributed(lay.offset, lay.total, comm.exchange_blocks)
        return GlobalReplicas(engine, lay, comm)

    def _prefetch_other_instances(self) -> None:
        """Before reading weights back: all-gathers the values that
        ``_read_replicas`` / ``RemoteVariables.read`` read from other
        instances' replicas (grouped, ``all_replicas`` and remote variables;
        a variable with one value for all replicas is read locally).
        Collective: every instance makes the same call."""
        if self._instances is None:
            return
        tensors = []
        for v in self._host:
            if v._remote is not None:
                continue
            rg = v.replica_grouping
            if (rg is not None and rg.num_groups > 1) or v.retrieval_mode == "all_replicas":
                tensors.append((self._prog.tensor_index[v], tuple(v.shape), v.dtype.as_numpy()))
        remote = [(p.buffer, p.entry, tuple(p.var._remote[0].tensor_shape),
                   p.var.dtype.as_numpy()) for p in self._remote.placed]
        self._instances.prefetch(tensors, remote, "weights_to_host")

    def _share_host_arrays(self, share_written: bool) -> FrozenSet[Variable]:
        """Lets variables use their host arrays as device storage: always for
        those no op writes (both copies stay equal, so nothing can tell),
        and for written ones with ``share_host_weights``.

        The host arrays belong to the Ir, and every Session on it writes
        them (``weights_to_host``, ``write_variable_data``): with two live
        Sessions on one Ir, neither shares, so one's host writes never reach
        the other's device."""
        sessions = self._ir.__dict__.setdefault("_sessions", weakref.WeakSet())
        others = list(sessions)
        sessions.add(self)
        if int(self._engine.replicas) > 1 or self._instances is not None:
            return frozenset()  # each replica keeps its own storage
        if others:
            for s in others:
                s._unshare()
            return frozenset()
        shared = set()
        for v, data in self._host.items():
            if v._remote is not None:
                continue  # in Streaming Memory, not a device tensor
            idx = self._prog.tensor_index[v]
            size = v.nelms * v.dtype.itemsize
            if isinstance(data, np.memmap) or size == 0 or data.nbytes != size:
                continue
            if self._engine.program_writes(idx) and not share_written:
                continue
            if not is_aligned(data):
                data = aligned_copy(data)
                v._host_data = self._host[v] = data
            self._engine.bind_external(idx, data)
            shared.add(v)
        return frozenset(shared)

    @_exclusive
    def _unshare(self) -> None:
        """Gives every shared variable its own device storage again (with
        the current device values)."""
        for v in self._shared:
            self._engine.unbind_external(self._prog.tensor_index[v])
        self._shared = frozenset()

    # ---- properties
    @property
    def ir(self) -> Ir:
        return self._ir

    @property
    def device(self) -> "DeviceInfo":
        """The device (a :class:`ipuxl.device_info.DeviceInfo`, PopXL's
        ``popart.DeviceInfo``)."""
        from .device_info import DeviceInfo

        return DeviceInfo(self)

    @property
    def is_attached(self) -> bool:
        return self._attached

    def _get_ipus_per_replica(self) -> int:
        """IPUs one replica uses: one more than the highest IPU an op of the
        Ir is placed on (an ``ipu_copy``'s destination included), as PopXL."""
        return ipus_per_replica(self._ir)

    def _get_ipu_count(self) -> int:
        """IPUs the session needs: ``2 ** ceil(log2(ipus per replica x
        replicas))``, as PopXL asks the device manager for."""
        n = self._get_ipus_per_replica() * self._ir.instance_replication_factor
        return 1 << max(0, (n - 1).bit_length())

    @property
    def shared_variables(self) -> FrozenSet[Variable]:
        """Variables whose device storage is their host array (ipuxl)."""
        return self._shared

    @property
    def engine(self):
        """The core Engine (``describe()``, ``program_counts()``, ``arena_bytes``)."""
        return self._engine

    def profile(self):
        """The IPU model's profile of this session's program
        (:class:`ipuxl.profile.Profile`): memory per tile by category, code
        of each Function, liveness over program steps, cycles. A "cpu"
        session is one tile without a memory limit, as PopXL's cpu device."""
        from .profile import IpuModel, profile_program

        if self._profile is None:
            self._profile = profile_program(self._prog.faithful, self._prog.model_desc,
                                            self._model or IpuModel.from_env(),
                                            cpu=self._device == "cpu")
        self._profile.runs = int(self._engine.runs) if self._engine is not None else 0
        return self._profile

    def export_poplar(self, out_dir: str, main: bool = True) -> dict:
        """Writes this session's program as a standalone Poplar C++ program
        into ``out_dir`` (:func:`ipuxl.export.export_poplar`): the faithful
        program with the IPU model's tile mappings of :meth:`profile`, and
        the variables' current values as ``weights.npz``. ``main=False``
        leaves ``main()`` out. Returns the export's summary."""
        from .export.poplar_emit import export_poplar

        variables = list(self._ir.main_graph.variables)
        weights = self.get_tensors_data(variables) if variables else {}
        return export_poplar(self._ir, out_dir, weights=weights, profile=self.profile(), main=main)

    # ---- context management
    @_exclusive
    def __enter__(self) -> "Session":
        was = self._attached
        self._attach_stack.append(was)
        if not was:
            self._attached = True
            if self._engine is not None:  # an abstract Session has no weights to copy
                self.weights_from_host()
        return self

    @_exclusive
    def __exit__(self, exc_type, exc, tb):
        was = self._attach_stack.pop()
        if not was and self._attached:
            if exc_type is None and self.weights_to_host_on_exit and self._engine is not None:
                if self._failed_run is None:
                    self.weights_to_host()
                else:
                    warnings.warn(f"Session: weights were not copied to the host on detach: "
                                  f"{self._failed_run}", RuntimeWarning, stacklevel=3)
            self._attached = False

    def _assert_attached(self, what: str):
        if not self._attached:
            raise ValueError(
                f"Must be attached to device before calling {what}. Use `with session:` to "
                "attach.")

    # ---- weights
    @_exclusive
    def weights_from_host(self) -> None:
        """Copy the host values of all variables to the device."""
        self._assert_attached("weights_from_host")
        for v, arr in self._host.items():
            if v._remote is not None:
                continue
            self._write_replicas(self._hosteng, self._prog.tensor_index[v], v, arr)
        self._remote.write(self._host)
        self._engine.run_weights_program(True)
        self._host_in_sync = True
        if not self._half_applied:  # else the host values are no restore
            self._failed_run = None

    @staticmethod
    def _groups_of(v: Variable, replicas: int) -> Optional[List[int]]:
        """The host group of each replica for variable ``v`` (None: one
        value for all replicas)."""
        rg = v.replica_grouping
        if rg is None or rg.num_groups <= 1:
            return None
        assignment = list(rg.assignment)
        if len(assignment) != replicas:
            raise ValueError(
                f"variable {v.id!r}: its replica grouping covers {len(assignment)} replicas, the "
                f"program runs {replicas}")
        return assignment

    def _write_replicas(self, engine, idx: int, v: Variable, arr: np.ndarray) -> None:
        """The host value of ``v`` to every replica: group ``g``'s value
        (``arr[g]``) to each replica of group ``g``."""
        groups = self._groups_of(v, int(engine.replicas))
        if groups is None:
            engine.write_tensor(idx, arr)
            return
        for r, g in enumerate(groups):
            engine.write_tensor(idx, np.ascontiguousarray(arr[g]), r)

    def _read_replicas(self, v: Variable, arr: np.ndarray) -> None:
        """The device value of ``v`` into its host array: the first replica
        of each group (PopXL's one_per_group); every replica's too for an
        ``all_replicas`` variable."""
        idx = self._prog.tensor_index[v]
        eng = self._hosteng
        R = int(eng.replicas)
        groups = self._groups_of(v, R)
        if groups is None:
            eng.read_tensor(idx, arr)
        else:
            done = set()
            for r, g in enumerate(groups):
                if g not in done:
                    done.add(g)
                    out = np.empty(v.shape, v.dtype.as_numpy())
                    eng.read_tensor(idx, out, r)
                    arr[g] = out
        if R > 1 and v.retrieval_mode == "all_replicas":
            every = np.empty((R,) + tuple(v.shape), v.dtype.as_numpy())
            for r in range(R):
                eng.read_tensor(idx, every[r], r)
            self._all_replicas[v] = every

    def _assert_state_defined(self, what: str) -> None:
        if self._failed_run is not None:
            restore = ("write_variables_data() with known values (with share_host_weights the "
                       "host arrays are the device storage, so their values are undefined too)"
                       if self._shared else
                       "weights_from_host() to restore the values last copied to the host, or "
                       "write_variables_data()")
            raise RuntimeError(
                f"Session.{what}: the device values of the variables are undefined because "
                f"{self._failed_run}. Call {restore} before continuing.")

    def _assert_host_values_defined(self, what: str, variables: Iterable[Variable]) -> None:
        """Refuses to treat as current the host values of shared variables
        that a run which failed part-way left half-updated."""
        bad = sorted(v.id for v in variables if v in self._half_applied)
        if bad:
            raise RuntimeError(
                f"Session.{what}: the values of {', '.join(repr(b) for b in bad)} are those of "
                f"a run that did not complete ({self._failed_run}); with share_host_weights "
                "their host arrays are the device storage, so the last good values are lost. "
                "Write known values (write_variables_data() or load_checkpoint()) first.")

    @_exclusive
    def weights_to_host(self) -> None:
        """Copy the device values of all variables to the host."""
        self._assert_attached("weights_to_host")
        self._assert_state_defined("weights_to_host")
        self._engine.run_weights_program(False)
        self._prefetch_other_instances()
        for v, arr in self._host.items():
            if isinstance(v._host_data, np.memmap) and not v._host_data.flags.writeable:
                raise ValueError(f"weights_to_host: variable {v.id!r} is a read-only memmap")
            if v._remote is None:
                self._read_replicas(v, arr)
        self._remote.read(self._host, self._all_replicas)
        for v, arr in self._host.items():
            if arr is v._memmap_arr:
                arr.flush()
        self._host_in_sync = True

    def get_tensor_data(self, tensor: Tensor) -> np.ndarray:
        return self.get_tensors_data([tensor])[tensor]

    @_exclusive
    def get_tensors_data(self, tensors: Iterable[Tensor]) -> Dict[Tensor, np.ndarray]:
        """Host values of variables and constants. Syncs from the device once,
        if attached and a variable was requested while the host copy is stale."""
        tensors = list(tensors)
        for t in tensors:
            if not isinstance(t, (Variable, Constant)):
                raise TypeError(f"Tensor {getattr(t, 'id', repr(t)[:60])} is not of type Constant "
                                "or Variable.")
            if t.ir is not self._ir:
                raise ValueError(f"Tensor {t.id} does not belong to this session's Ir")
        if any(isinstance(t, Variable) for t in tensors) and self._attached \
                and not self._host_in_sync:
            self._assert_state_defined("get_tensors_data")
            self.weights_to_host()
        out = {}
        R = self._ir.replication_factor
        for t in tensors:
            if isinstance(t, Variable):
                if t not in self._host:  # unused variable: never reached the device
                    self._host[t] = np.array(t._host_data, copy=True)
                host = self._host[t]
                if R > 1 and t.retrieval_mode == "all_replicas" and \
                        t.replica_grouping.group_size > 1:
                    # (replicas, *shape): every replica's value, in replica order.
                    every = self._all_replicas.get(t)
                    if every is None:  # never read back: the host values per replica
                        groups = self._groups_of(t, R)
                        every = np.stack([host if groups is None else host[groups[r]]
                                          for r in range(R)])
                    out[t] = every.copy()
                    continue
                # A memory-mapped variable's host value is its file: PopXL
                # returns the memmap itself.
                out[t] = host if host is t._memmap_arr else host.copy()
            else:
                out[t] = np.array(t._host_data, copy=True)
        return out

    def write_variable_data(self, tensor: Variable, data) -> None:
        self.write_variables_data({tensor: data})

    @_exclusive
    def write_variables_data(self, tensors: Mapping[Variable, np.ndarray]) -> None:
        """Set the host values of variables (exact dtype, shape ``shape_on_host``);
        one ``weights_from_host`` follows if attached."""
        staged = {}
        for v, data in tensors.items():
            if not isinstance(v, Variable):
                raise TypeError(f"Tensor {getattr(v, 'id', v)} is not of type Variable.")
            if np.isscalar(data) or isinstance(data, (int, float, bool)):
                data = np.array(data, dtype=v.dtype.as_numpy())
            data = np.asarray(data)
            if data.dtype != v.dtype.as_numpy():
                raise TypeError(
                    f"The dtype of the data ({data.dtype}) does not match the dtype of variable "
                    f"{v.id} ({v.dtype}).")
            if tuple(data.shape) != tuple(v.shape_on_host):
                raise ValueError(
                    f"The shape of the data {data.shape} does not match the shape of variable "
                    f"{v.id} on the host {v.shape_on_host}.")
            if v.retrieval_mode == "all_replicas" and v.replica_grouping is not None and \
                    v.replica_grouping.group_size > 1 and self._ir.replication_factor > 1:
                raise NotImplementedError(
                    f'Copying to tensor {v.id} with "all_replicas" retreval mode is not yet '
                    "supported.")
            staged[v] = data
        if self._attached and not self._host_in_sync and self._failed_run is None:
            # Keep the device values of the variables not being written.
            # (After a failed run they are undefined: the others keep the
            # values last copied to the host, as weights_from_host would.)
            self.weights_to_host()
        self._half_applied = self._half_applied - set(staged)
        for v, data in staged.items():
            self._all_replicas.pop(v, None)
            if v in self._host:
                self._host[v][...] = data
            else:
                self._host[v] = np.array(data, copy=True)
        if self._attached:
            self.weights_from_host()

    # ---- checkpoints
    @_exclusive
    def save_checkpoint(self, path, tensors=None) -> None:
        """Save the variables (weights and optimizer state; all of them, or
        ``tensors``) to ``path`` atomically: see :mod:`ipuxl.checkpoint`."""
        from .checkpoint import save_checkpoint

        save_checkpoint(self, path, tensors)

    @_exclusive
    def load_checkpoint(self, path, tensors=None, strict: bool = True) -> None:
        """Set the variables from a checkpoint, after checking every name,
        shape and dtype: see :mod:`ipuxl.checkpoint`."""
        from .checkpoint import load_checkpoint

        load_checkpoint(self, path, tensors, strict)

    # ---- running
    def expected_inputs(self) -> List[HostToDeviceStream]:
        """The host-to-device streams ``run`` needs data for, in creation order."""
        return sorted(self._h2d)

    def _full_shape(self, shape) -> tuple:
        n = self._ir.num_host_transfers
        r = self._ir.instance_replication_factor
        return ((n,) if n > 1 else ()) + ((r,) if r > 1 else ()) + tuple(shape)

    # PopXL's name, which Graphcore's tutorials call (evaluate_throughput).
    _full_input_shape = _full_shape

    def create_host_outputs(self) -> Dict[DeviceToHostStream, np.ndarray]:
        """``np.empty`` arrays for every device-to-host stream, shaped
        ``(num_host_transfers?, replicas?, *shape)``."""
        if not self._d2h_sorted:
            return {}
        io, aligned = self._io, self._aligned_outputs
        return {s: (aligned_empty(io[s][1], io[s][2]) if s in aligned else
                    np.empty(io[s][1], dtype=io[s][2])) for s in self._d2h_sorted}

    def run(self, inputs: Optional[Mapping[HostToDeviceStream, np.ndarray]] = None,
            downcast_inputs: bool = True) -> Dict[DeviceToHostStream, np.ndarray]:
        """Run the main program once; returns the ``host_store``d values."""
        outputs = self.create_host_outputs()
        self.run_with_outputs(inputs, outputs, downcast_inputs)
        return outputs

    @_exclusive
    def run_with_outputs(self, inputs: Optional[Mapping[HostToDeviceStream, np.ndarray]] = None,
                         outputs: Optional[Mapping[DeviceToHostStream, np.ndarray]] = None,
                         downcast_inputs: bool = True) -> None:
        """Run the main program once, writing into the given output arrays."""
        self._assert_attached("run")
        inputs = {} if inputs is None else inputs
        outputs = {} if outputs is None else outputs
        for what, m in (("inputs", inputs), ("outputs", outputs)):
            # collections.abc's Mapping: typing.Mapping's isinstance goes
            # through typing's checks, about 1 us a run.
            if type(m) is not dict and not isinstance(m, abc.Mapping):
                raise TypeError(f"Session.run: {what} must be a mapping {{stream: numpy array}}, "
                                f"got {type(m).__name__}")
        prog = self._prog
        bound: List[Optional[np.ndarray]] = [None] * len(prog.streams)
        if len(inputs) != len(self._h2d) or not self._h2d.issuperset(inputs):
            self._check_keys(inputs, self._h2d, "input")
        if len(outputs) != len(self._d2h) or not self._d2h.issuperset(outputs):
            self._check_keys(outputs, self._d2h, "output")
        n = self._n_transfers
        io = self._io
        for s, arr in inputs.items():
            idx, full, npd = io[s]
            if type(arr) is np.ndarray and arr.dtype == npd and arr.shape == full and \
                    arr.flags.c_contiguous:
                bound[idx] = arr  # the common case: nothing to convert
            else:
                bound[idx] = self._prepare_input(s, arr, downcast_inputs, n)
        for s, arr in outputs.items():
            idx, full, npd = io[s]
            if type(arr) is np.ndarray and arr.dtype == npd and arr.shape == full and \
                    arr.flags.c_contiguous and arr.flags.writeable:
                bound[idx] = arr
            else:
                bound[idx] = self._prepare_output(s, arr, n)
        if self._ir._op_counter != self._op_count:
            raise RuntimeError(
                f"Session.run: ops were added to the Ir {self._ir.id} after this Session compiled "
                f"it ({self._ir._op_counter - self._op_count} new); they would not run. Create a "
                "new Session (or a new Ir) after building the whole program.")
        self._assert_state_defined("run")
        self._host_in_sync = False
        try:
            if self._host_pass_checker is not None:
                used = self._host_pass_checker.run(bound, n)
            else:
                used = self._engine.run(bound, n, prog.stream_item_bytes)
        except BaseException as e:
            # The engine marks its state undefined only once the program has
            # started (errors in the arrays are found before that).
            if not self._engine.state_defined:
                self._failed_run = (f"an earlier run failed part-way ({type(e).__name__}: "
                                    f"{str(e).splitlines()[0] if str(e) else ''})")
                self._half_applied = self._shared_written
            raise
        for s in self._d2h:
            idx = io[s][0]
            if used[idx] < n and s not in self._short_warned:
                self._short_warned.add(s)
                warnings.warn(
                    f"Session.run: stream {s.tensor_id!r} was stored {used[idx]} of "
                    f"num_host_transfers={n} times in this run; its other transfers are zeros "
                    "(PopXL leaves them undefined)", RuntimeWarning, stacklevel=3)

    def _check_keys(self, given, expected, what):
        given_set = set(given.keys())
        by_name = [k for k in given_set if isinstance(k, str)]
        if by_name:
            raise TypeError(
                f"Session.run: {what} streams must be keyed by the stream objects "
                f"(popxl.{'h2d' if what == 'input' else 'd2h'}_stream(...)), not by name: got "
                f"{', '.join(repr(k) for k in sorted(by_name))}")
        unexpected = [s for s in given_set if s not in expected]
        missing = [s for s in expected if s not in given_set]
        if unexpected:
            names = ", ".join(sorted(str(getattr(s, "tensor_id", s)) for s in unexpected))
            raise ValueError(
                f"Unexpected {what} stream(s) provided to the session: {names}. Expected "
                f"exactly: {', '.join(sorted(s.tensor_id for s in expected)) or '(none)'}")
        if missing:
            names = ", ".join(sorted(s.tensor_id for s in missing))
            raise ValueError(
                f"Missing {what} stream(s): {names}. Every stream the program "
                f"{'loads from' if what == 'input' else 'stores to'} needs an array.")

    def _prepare_input(self, s, arr, downcast: bool, n: int) -> np.ndarray:
        want_dt = s.dtype.as_numpy()
        a = np.asarray(arr)
        if want_dt.fields is not None and a.dtype == np.uint8:
            a = np.ascontiguousarray(a).view(want_dt)  # fp8 bytes given as uint8 (as PopXL)
        if a.dtype != want_dt and a.dtype.fields is None and \
                a.dtype.newbyteorder("=") == want_dt:
            a = a.astype(want_dt)  # another byte order (big-endian data): same values
        if a.dtype != want_dt:
            src = dtypes.dtype.as_dtype(a.dtype) if a.dtype.fields is None and \
                a.dtype.kind in "biuf" else None
            if downcast and src is not None and dtypes._downcast(src) is s.dtype:
                # PopXL's own downcast (64 to 32 bits) casts whatever the
                # values: warn once per stream where they do not fit.
                a = self._downcast_checked(s, a, want_dt, warn=s not in self._overflow_warned)
            elif src is not None and src.is_int == s.dtype.is_int and \
                    src.is_floating_point == s.dtype.is_floating_point and downcast and \
                    src.itemsize > s.dtype.itemsize and src.is_signed == s.dtype.is_signed:
                a = self._downcast_checked(s, a, want_dt)
            else:
                raise ValueError(
                    f"Input for stream {s.tensor_id} has dtype {a.dtype}, expected "
                    f"{want_dt} ({s.dtype}).")
        full = self._full_shape(s.shape)
        if a.shape != full:
            ok = False
            if n > 1 and a.ndim == len(full) and a.shape[1:] == full[1:] and a.shape[0] > n:
                a = a[:n]  # PopXL accepts a longer leading dimension
                ok = True
            elif a.size == 1 and all(d == 1 for d in full):
                a = a.reshape(full)  # a single value for an all-ones shape
                ok = True
            elif a.size == int(np.prod(full)) and a.ndim > 0 and \
                    a.squeeze().shape[len(full) - len(s.shape):] == () and \
                    (n == 1 or a.shape[0] == n):
                # PopXL does not compare a stream's dimensions when they are
                # all ones (e.g. (n, 1) for n scalars): same data, same order.
                a = a.reshape(full)
                ok = True
            if not ok:
                r = self._ir.instance_replication_factor
                raise ValueError(
                    f"Input for stream {s.tensor_id} has shape {a.shape}, expected {full} "
                    f"(num_host_transfers={n}, replication_factor={r}, stream shape {s.shape}"
                    + ("; the replica dimension comes after num_host_transfers" if r > 1 and n > 1
                       else "; dimension 0 is the replica dimension" if r > 1 else "") + ").")
        return np.ascontiguousarray(a)

    def _downcast_checked(self, s, a: np.ndarray, want: np.dtype,
                          warn: Optional[bool] = None) -> np.ndarray:
        """``a`` cast to the stream's narrower dtype, refusing values it
        cannot hold (they would become inf, or wrap around); with ``warn``
        set (PopXL's 64-to-32-bit downcast, which never refuses) a warning
        instead, once per stream (``warn=False``: converted silently)."""
        if a.size and warn is not False:
            if want.kind == "f":
                finite = a[np.isfinite(a)]
                bad = finite[np.abs(finite) > np.finfo(want).max]
            else:
                info = np.iinfo(want)
                bad = a[(a < info.min) | (a > info.max)]
            if bad.size and warn is None:
                raise ValueError(
                    f"Input for stream {s.tensor_id}: {bad.size} value(s) of the {a.dtype} data, "
                    f"such as {bad.flat[0].item()!r}, are outside the range of the stream's dtype "
                    f"{want} ({'they would become inf' if want.kind == 'f' else 'they would wrap'}"
                    "). Scale the data, or give the stream a wider dtype.")
            if bad.size and warn:
                self._overflow_warned.add(s)
                warnings.warn(
                    f"Input for stream {s.tensor_id}: {bad.size} value(s) of the {a.dtype} data, "
                    f"such as {bad.flat[0].item()!r}, are outside the range of the stream's dtype "
                    f"{want} ({'they become inf' if want.kind == 'f' else 'they wrap'}, as in "
                    "PopXL's downcast_inputs); warned once per stream.", RuntimeWarning,
                    stacklevel=6)
        with np.errstate(over="ignore", invalid="ignore"):  # refused or warned above
            return a.astype(want)

    def _prepare_output(self, s, arr, n: int) -> np.ndarray:
        full = self._full_shape(s.shape)
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"Output for stream {s.tensor_id} must be a numpy array")
        if arr.dtype != s.dtype.as_numpy():
            raise ValueError(f"Output array for stream {s.tensor_id} has dtype {arr.dtype}, "
                             f"expected {s.dtype.as_numpy()}")
        if arr.shape != full or not arr.flags.c_contiguous or not arr.flags.writeable:
            raise ValueError(
                f"Output array for stream {s.tensor_id} must be a writable C-contiguous array "
                f"of shape {full} (num_host_transfers={n}, replication_factor="
                f"{self._ir.instance_replication_factor}), got shape {arr.shape}")
        return arr

    def __repr__(self):
        return f"Session[ir={self._ir!r} device={self._device} attached={self._attached}]"


def ipus_per_replica(ir) -> int:
    """One more than the highest IPU an op of ``ir`` (any graph) is placed on
    or copies to."""
    from .opdef import get_opdef

    top = 0
    for g in ir._graphs.values():
        for op in g._ops:
            if op.ipu is not None:
                top = max(top, op.ipu)
            if get_opdef(op.type).kind == "ipu_copy":
                top = max(top, op.attrs["_destination"])
    return top + 1
