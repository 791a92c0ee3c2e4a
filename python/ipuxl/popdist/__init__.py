"""``popdist``, mirroring Graphcore's PopDist: the instance layout of a
multi-process (multi-instance) run, and the MPI communicator ipuxl's
collectives use between instances.

``ipuxl poprun --num-instances N --num-replicas R script.py`` (see
:mod:`ipuxl.popdist.launcher`) starts N processes with Open MPI's ``mpirun``
and gives each the layout in environment variables, as ``poprun`` does:

* ``POPDIST_NUM_TOTAL_REPLICAS``: R, the replicas of all instances;
* ``POPDIST_NUM_INSTANCES``: N;
* ``POPDIST_INSTANCE_INDEX``: this instance (else ``OMPI_COMM_WORLD_RANK``,
  ``PMIX_RANK``, the rank ``mpirun`` gives);
* ``POPDIST_NUM_IPUS_PER_REPLICA`` (default 1).

Instance ``i`` holds the R/N replicas ``[i * R/N, (i + 1) * R/N)``.
``popxl.Ir(replication="popdist")`` reads this layout: its
``replication_factor`` is R, its ``instance_replication_factor`` R/N.
Collectives whose replica groups cross instances exchange data through
:class:`Communicator`: MPI point-to-point messages, sent by the C module
``ipuxl._mpi_exchange`` without the GIL where it was built, else by mpi4py
from Python (``IPUXL_POPDIST_EXCHANGE``). Every wait is
bounded: a peer that hangs or never reaches the collective makes the
waiting instance report :class:`InstanceError` ("... timed out after T s
...") after ``IPUXL_POPDIST_TIMEOUT`` seconds (default 300) and abort the
MPI job; a peer that dies makes mpirun stop the job. Never a hang.

Under ``ipuxl run`` / ``ipuxl poprun``, ``import popdist`` and
``import popdist.popart`` resolve here (unless a real popdist is installed).
"""
import sys
import threading
import time
from typing import NamedTuple, Optional

from .. import settings

__all__ = [
    "isPopdistEnvSet", "getNumInstances", "getInstanceIndex", "getNumTotalReplicas",
    "getNumLocalReplicas", "getReplicaIndexOffset", "getNumIpusPerReplica", "getDeviceId",
    "init", "finalize", "isBackendInitialized", "isUsingPopdist", "InstanceError", "Layout",
    "layout", "communicator", "ENV", "EXCHANGE_ENV",
]

#: The environment variables the launcher sets (and that this module reads).
ENV = {
    "total": "POPDIST_NUM_TOTAL_REPLICAS",
    "instances": "POPDIST_NUM_INSTANCES",
    "index": "POPDIST_INSTANCE_INDEX",
    "ipus": "POPDIST_NUM_IPUS_PER_REPLICA",
}
#: Rank variables of MPI launchers, used when POPDIST_INSTANCE_INDEX is unset.
RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
TIMEOUT_ENV = "IPUXL_POPDIST_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
#: Which exchange collectives between instances use: ``auto`` (the C module
#: ``ipuxl._mpi_exchange`` when it was built and fits mpi4py's MPI, else
#: mpi4py), ``native`` (the C module, or an error saying why not) or
#: ``mpi4py`` (the pure-Python path).
EXCHANGE_ENV = "IPUXL_POPDIST_EXCHANGE"


class InstanceError(RuntimeError):
    """A collective between instances failed: a peer died, hung, or is
    running a different program. (A timeout inside a blocking wait is
    reported under this name by the watchdog, which then aborts the job.)"""


class Layout(NamedTuple):
    """Where this instance sits: ``local`` replicas from ``offset`` of
    ``total``, instance ``index`` of ``instances``."""
    total: int
    instances: int
    index: int
    ipus_per_replica: int

    @property
    def local(self) -> int:
        return self.total // self.instances

    @property
    def offset(self) -> int:
        return self.index * self.local


def _int_env(name: str, default: Optional[int] = None) -> Optional[int]:
    raw = settings.popdist_layout().get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"popdist: environment variable {name}={raw!r} is not an integer") \
            from None
    return value


def isPopdistEnvSet() -> bool:
    """True when the launcher's layout variables are set."""
    env = settings.popdist_layout()
    return bool(env.get(ENV["total"])) and bool(env.get(ENV["instances"]))


def layout() -> Layout:
    """The instance layout from the environment, checked. ``RuntimeError``
    when it is not set (the script was not started by ``ipuxl poprun``),
    ``ValueError`` when it is inconsistent."""
    if not isPopdistEnvSet():
        raise RuntimeError(
            "popdist: the instance layout is not set: Ir(replication='popdist') and the popdist "
            f"queries need {ENV['total']} and {ENV['instances']}, which the launcher sets. Run "
            "the program with `ipuxl poprun --num-instances N --num-replicas R script.py` (or "
            "use Ir(replication=R) in one process).")
    total = _int_env(ENV["total"])
    instances = _int_env(ENV["instances"])
    index = _int_env(ENV["index"])
    if index is None:
        for name in RANK_ENV:
            index = _int_env(name)
            if index is not None:
                break
    if index is None:
        index = 0 if instances == 1 else None
    ipus = _int_env(ENV["ipus"], 1)
    if total < 1 or instances < 1:
        raise ValueError(f"popdist: {ENV['total']}={total} and {ENV['instances']}={instances} "
                         "must be positive")
    if total % instances:
        raise ValueError(
            f"popdist: {ENV['total']}={total} replicas are not divisible by {ENV['instances']}="
            f"{instances} instances: every instance holds the same number of replicas")
    if index is None:
        raise RuntimeError(
            f"popdist: {instances} instances but no instance index: set {ENV['index']} (or run "
            f"under mpirun, which sets {RANK_ENV[0]})")
    if not 0 <= index < instances:
        raise ValueError(f"popdist: instance index {index} is outside [0, {instances})")
    if ipus < 1:
        raise ValueError(f"popdist: {ENV['ipus']}={ipus} must be positive")
    return Layout(total, instances, index, ipus)


# ---- the PopDist API PopXL programs use
def getNumTotalReplicas() -> int:
    return layout().total


def getNumInstances() -> int:
    return layout().instances


def getInstanceIndex() -> int:
    return layout().index


def getNumLocalReplicas() -> int:
    return layout().local


def getReplicaIndexOffset() -> int:
    return layout().offset


def getNumIpusPerReplica() -> int:
    return layout().ipus_per_replica


def getDeviceId(numIpusPerReplica: Optional[int] = None) -> int:
    """The device this instance uses. ipuxl's devices are simulated, one per
    instance: its index."""
    return layout().index


def isUsingPopdist() -> bool:
    return isPopdistEnvSet()


def init() -> None:
    """Starts the communicator between instances (MPI) when there are
    several; idempotent, as PopXL calls it when an Ir uses popdist."""
    if layout().instances > 1:
        communicator()


def isBackendInitialized() -> bool:
    return _COMM is not None


def finalize() -> None:
    """Nothing to do: mpi4py finalizes MPI at exit."""


# ---- the communicator between instances
_COMM = None


def communicator() -> "Communicator":
    """The process's communicator between instances (created once)."""
    global _COMM
    if _COMM is None:
        _COMM = Communicator(layout())
    return _COMM


def _timeout() -> float:
    """Seconds a collective between instances may wait
    (``IPUXL_POPDIST_TIMEOUT``, checked by :mod:`ipuxl.settings`)."""
    return settings.current().popdist_timeout


def import_mpi():
    """``mpi4py.MPI`` (initialising MPI), or ImportError saying what to install."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(
            "ipuxl: several instances need mpi4py and an MPI library: `pip install mpi4py` "
            "(or `pip install ipuxl[distributed]`) and Open MPI (Debian/Ubuntu: `apt-get install "
            f"openmpi-bin libopenmpi-dev`). ({e})") from e
    return MPI


def _native_exchange(comm, timeout: float):
    """``(ipuxl._mpi_exchange.Exchange over comm, None)``, or ``(None, why
    not)``. The C module is used only where it is linked to the MPI library
    mpi4py loaded (two MPI libraries in one process would not share state)
    and MPI allows calls from the thread that runs the engine."""
    from .._core_loader import load_extension

    try:
        mod = load_extension("_mpi_exchange")
    except ImportError as e:
        return None, (f"ipuxl._mpi_exchange was not built (it needs an MPI library's headers "
                      f"and mpi4py when ipuxl is built): {e}")
    MPI = comm.MPI
    if mod.library_version() != MPI.Get_library_version():
        return None, ("ipuxl._mpi_exchange is linked to another MPI library than mpi4py's "
                      f"({mod.library_version().splitlines()[0]!r} vs "
                      f"{MPI.Get_library_version().splitlines()[0]!r})")
    if mod.thread_level() < mod.THREAD_SERIALIZED:
        return None, ("MPI was initialised below MPI_THREAD_SERIALIZED; the engine calls MPI "
                      "from the thread running Session.run")
    return mod.Exchange(comm.comm, timeout, TIMEOUT_ENV), None


class Communicator:
    """Byte exchanges between the instances, over a private duplicate of
    ``MPI.COMM_WORLD``. Every call is collective (all instances make the
    same calls in the same order, as they run the same program) and bounded
    by the timeout.

    ``native``: the C exchange (``ipuxl._mpi_exchange.Exchange``) when it is
    used (see ``IPUXL_POPDIST_EXCHANGE``), else None and ``native_reason``
    says why. With it, the engine exchanges without calling back into
    Python, and :meth:`exchange` uses it too; without it, both go through
    mpi4py. The two send the same messages on the same communicator."""

    _TAG = 7001
    SPINS = settings.current().popdist_spins

    def __init__(self, lay: Layout):
        MPI = import_mpi()
        self.MPI = MPI
        world = MPI.COMM_WORLD
        if world.Get_size() != lay.instances or world.Get_rank() != lay.index:
            raise InstanceError(
                f"popdist: the MPI job has {world.Get_size()} processes (this one rank "
                f"{world.Get_rank()}), but the layout says {lay.instances} instances (this one "
                f"{lay.index}): start the program with `ipuxl poprun`")
        self.layout = lay
        self.comm = world.Dup()
        self.rank = lay.index
        self.size = lay.instances
        self.timeout = _timeout()
        self.calls = 0
        mode = settings.current().popdist_exchange
        self.native, self.native_reason = None, f"{EXCHANGE_ENV}=mpi4py"
        if mode != "mpi4py":
            self.native, self.native_reason = _native_exchange(self, self.timeout)
            if self.native is None and mode == "native":
                raise InstanceError(f"popdist: {EXCHANGE_ENV}=native, but {self.native_reason}")
        if self.rank == 0:  # once per job: which path the collectives take
            how = ("ipuxl._mpi_exchange (C, called by the engine without the GIL)"
                   if self.native is not None else f"mpi4py ({self.native_reason})")
            print(f"ipuxl poprun: collectives between instances go through {how}",
                  file=sys.stderr, flush=True)
        self._watchdog = None  # started by the first wait of the mpi4py path

    def _wait(self, reqs, what: str) -> None:
        """Completes ``reqs``. A blocking ``Waitall`` (MPI progresses large
        messages far better inside its own wait than when polled from
        Python with ``Testall``: 256 KB took milliseconds instead of tens of
        microseconds on a loaded host), watched by :class:`_Watchdog`, which
        reports the timeout and aborts the MPI job if the wait outlives it."""
        Testall = self.MPI.Request.Testall
        for _ in range(self.SPINS):  # a peer already there: done in microseconds
            if Testall(reqs):
                return
        if self._watchdog is None:
            self._watchdog = _Watchdog(self)
        self._watchdog.begin(what)
        try:
            self.MPI.Request.Waitall(reqs)
        finally:
            self._watchdog.end()

    def exchange(self, send, recv, what: str = "exchange") -> None:
        """All-gather of bytes: ``recv`` (``size * len(send)`` bytes) gets
        every other instance's ``send`` in its block, in instance order
        (this instance's own block is not written: the caller has it)."""
        send = memoryview(send).cast("B")
        recv = memoryview(recv).cast("B")
        n = send.nbytes
        if recv.nbytes != n * self.size:
            raise ValueError(f"popdist: {what}: {recv.nbytes} receive bytes for {self.size} "
                             f"instances of {n} bytes")
        self.calls += 1
        if self.native is not None:
            return self.native.exchange(send, recv, what)
        self._exchange_mpi4py(send, recv, n, what)

    def _exchange_mpi4py(self, send, recv, n: int, what: str) -> None:
        if self.size == 1 or n == 0:
            return self._barrier(what) if n == 0 and self.size > 1 else None
        B = self.MPI.BYTE
        reqs = []
        for p in range(self.size):
            if p != self.rank:
                reqs.append(self.comm.Irecv([recv[p * n:(p + 1) * n], B], source=p,
                                            tag=self._TAG))
        for p in range(self.size):
            if p != self.rank:
                reqs.append(self.comm.Isend([send, B], dest=p, tag=self._TAG))
        self._wait(reqs, what)

    def exchange_blocks(self, sends, recvs, what: str = "exchange") -> None:
        """The engine's exchange on the mpi4py path: ``sends`` and ``recvs``
        are lists of ``(peer instance, buffer)``; every send goes to its
        peer, every receive is filled from its peer, and the call returns
        when all are done. Messages between two instances match in list
        order (the peer lists its side of them in the same order); a 0-byte
        message still pairs the two. The C exchange
        (``ipuxl._mpi_exchange``) posts the same messages."""
        self.calls += 1
        if self.size == 1:
            return
        B = self.MPI.BYTE
        for peer, _ in list(sends) + list(recvs):
            if not 0 <= peer < self.size or peer == self.rank:
                raise ValueError(f"popdist: {what}: a message to or from instance {peer} (this "
                                 f"is instance {self.rank} of {self.size})")
        reqs = [self.comm.Irecv([memoryview(buf).cast("B"), B], source=peer, tag=self._TAG)
                for peer, buf in recvs]
        reqs += [self.comm.Isend([memoryview(buf).cast("B"), B], dest=peer, tag=self._TAG)
                 for peer, buf in sends]
        self._wait(reqs, what)

    def _barrier(self, what: str) -> None:
        self._wait([self.comm.Ibarrier()], what)

    def allgather_bytes(self, data: bytes, what: str) -> list:
        """Every instance's ``data`` (any lengths), in instance order."""
        import numpy as np

        size = np.array([len(data)], np.int64)
        sizes = np.empty(self.size, np.int64)
        sizes[self.rank] = len(data)
        self.exchange(size.view(np.uint8), sizes.view(np.uint8), what + " (sizes)")
        top = int(sizes.max()) if self.size else 0
        buf = np.zeros(top, np.uint8)
        buf[:len(data)] = np.frombuffer(data, np.uint8)
        out = np.empty(top * self.size, np.uint8)
        out[self.rank * top:(self.rank + 1) * top] = buf
        self.exchange(buf, out, what)
        return [out[i * top:i * top + int(sizes[i])].tobytes() for i in range(self.size)]


class _Watchdog:
    """A daemon thread that ends a collective between instances stuck past
    the timeout: it prints :class:`InstanceError`'s message (what waited,
    for how long, which instance) and calls ``MPI_Abort``, which stops every
    instance (mpirun then exits non-zero). A blocking MPI wait cannot be
    interrupted otherwise. It checks twice a second at most, and costs the
    waits nothing but two attribute writes."""

    def __init__(self, comm: "Communicator"):
        self._comm = comm
        self._current = None  # (what, start) of the wait in progress
        self._thread = threading.Thread(target=self._run, name="ipuxl-popdist-watchdog",
                                        daemon=True)
        self._thread.start()

    def begin(self, what: str) -> None:
        self._current = (what, time.monotonic())

    def end(self) -> None:
        self._current = None

    def _run(self) -> None:
        c = self._comm
        tick = min(0.5, c.timeout / 4)
        while True:
            cur = self._current
            if cur is None:
                time.sleep(tick)
                continue
            left = cur[1] + c.timeout - time.monotonic()
            if left > 0:
                time.sleep(min(left, tick))
                continue
            if self._current is not cur:
                continue  # that wait ended just now
            msg = (f"{InstanceError.__module__}.InstanceError: popdist: {cur[0]} between "
                   f"instances timed out after {c.timeout:g} s (instance {c.rank} of {c.size} "
                   "waiting): another instance died, hangs, or did not reach the same "
                   f"collective. Set {TIMEOUT_ENV} to wait longer. Aborting the MPI job.")
            try:
                sys.stderr.write(msg + "\n")
                sys.stderr.flush()
            finally:
                c.MPI.COMM_WORLD.Abort(1)
