"""Every setting ipuxl takes from the environment, read and validated here
and nowhere else.

:func:`current` gives the settings in effect as one frozen
:class:`Settings`. The ``IPUXL_*`` variables, ``POPLAR_ENGINE_OPTIONS`` and
``POPXL_OFFLINE_DEVICE`` are parsed and checked when the process first asks
(the import of ``ipuxl``) and again only when one of them changes; a bad
value is a ``ValueError`` naming the variable (and the key, for the
``key=value`` settings), the value given and what is accepted. A variable
that starts with ``IPUXL_`` but is no setting (``IPUXL_NUM_THREAD``) gives
one ``RuntimeWarning`` naming the closest setting.

Two kinds of settings (the ``when`` column of the README's table):

* ``import``: fixed when ``ipuxl`` is imported. The compiled core receives
  them once, as a typed ``_core.CoreOptions``
  (:meth:`Settings.core_options`, applied by ``ipuxl._core_loader``); the
  core itself reads no environment variable. Changing them later has no
  effect.
* ``session``: read when a Session (or a profile, or the communicator
  between instances) is created, so a change of the environment between
  two Sessions applies to the second.

:func:`override` replaces session settings for a ``with`` block, without
touching the environment (``ipuxl profile`` uses it; so can tests).

The module is a leaf: it imports nothing of ipuxl, so everything can ask it.
"""
import contextlib
import dataclasses
import difflib
import json
import math
import os
import threading
import warnings
from typing import Dict, FrozenSet, Iterator, Mapping, Optional, Tuple

__all__ = ["Settings", "SPECS", "current", "override", "read", "ENGINE_OPTIONS",
           "IPU_MODEL_KEYS", "DEBUG_SWITCHES", "MAX_THREADS"]

#: The most kernel threads ``IPUXL_NUM_THREADS`` accepts (the core's
#: ``kMaxThreads``): far above any host's cores, low enough that a typo
#: cannot exhaust the process's threads.
MAX_THREADS = 1024

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_BOOL_SPELLINGS = "1, true, yes, on or 0, false, no, off (any case)"


@dataclasses.dataclass(frozen=True)
class Spec:
    """One documented setting: what the README's "Settings" table lists."""
    name: str
    type: str
    default: str
    accepted: str
    when: str  # "import" or "session"
    doc: str


#: Every setting, in the README's order.
SPECS: Tuple[Spec, ...] = (
    Spec("IPUXL_NUM_THREADS", "int", "hardware threads, at most 64", f"1 to {MAX_THREADS}",
         "import", "threads of the core's kernels (the caller included)"),
    Spec("IPUXL_ISA", "choice", "best", "best (or auto), sse, avx2, avx512 (x86-64); neon",
         "import", "instruction-set level of the kernels; a level the CPU lacks is an error"),
    Spec("IPUXL_GEMM", "choice", "auto", "auto, core, blas", "import",
         "float32 GEMM: the fixed per-shape rule, or one implementation forced (benchmarks)"),
    Spec("IPUXL_NO_BLAS", "flag", "0", _BOOL_SPELLINGS, "import",
         "never load scipy-openblas32 (the core's GEMM only)"),
    Spec("IPUXL_CORE_DIR", "path", "(the package)", "a directory holding a built _core",
         "import", "load the compiled core (and _mpi_exchange) from a developer build"),
    Spec("IPUXL_PROFILE_CLOCK", "choice", "wall", "wall, thread", "import",
         "clock of engine.profile(): wall time, or the calling thread's CPU time"),
    Spec("IPUXL_FUSED_UPDATE", "choice", "auto", "auto, always, never", "session",
         "host pass input_grad_update: the core's per-level rule, or forced (tests, benchmarks)"),
    Spec("IPUXL_HOST_PASSES", "list", "all", "all, none, names, or -names to leave out",
         "session", "which host-speed rewrites run (ipuxl.lowering.host_passes)"),
    Spec("IPUXL_NO_FUSION", "flag", "0", _BOOL_SPELLINGS, "session",
         "older spelling of IPUXL_HOST_PASSES=none (ignored when IPUXL_HOST_PASSES is set)"),
    Spec("IPUXL_CHECK_HOST_PASSES", "flag", "0", _BOOL_SPELLINGS, "session",
         "run every program with and without host passes and compare "
         "(ipuxl.testing.HostPassChecker)"),
    Spec("IPUXL_IPU_MODEL", "key=value list", "(none)",
         "version, tiles_per_ipu, num_ipus, num_io_tiles, memory_per_tile, allow_out_of_memory, "
         "clock_hz, host_bandwidth, streaming_bandwidth, available_memory_proportion", "session",
         "default IpuModel of 'ipu_model' sessions and profiles; bounds in IPU_MODEL_KEYS"),
    Spec("POPLAR_ENGINE_OPTIONS", "JSON object", "{}", "Poplar's engine options (ENGINE_OPTIONS)",
         "session", "autoReport.all / autoReport.outputGraphProfile with autoReport.directory "
         "write each Session's profile.json there; an unknown option is an error (as Poplar)"),
    Spec("IPUXL_REQUIRE_IPU_HW", "flag", "0", _BOOL_SPELLINGS, "session",
         "'ipu_hw' without a Poplar SDK bridge is an error instead of the simulator"),
    Spec("POPXL_OFFLINE_DEVICE", "choice", "(none)", "cpu, ipu_model, ipu_hw", "session",
         "the device an 'ipu_hw' Session uses instead (as PopXL)"),
    Spec("IPUXL_POPDIST_TIMEOUT", "float", "300", "more than 0, at most 86400 (seconds)",
         "session", "longest wait of a collective between instances before the job aborts"),
    Spec("IPUXL_POPDIST_EXCHANGE", "choice", "auto", "auto, native, mpi4py", "session",
         "exchange between instances: the C module when it fits, or one forced"),
    Spec("IPUXL_POPDIST_SPINS", "int", "50", "0 to 1000000", "import",
         "polls of a pending exchange before the blocking wait (mpi4py path)"),
    Spec("IPUXL_ABSTRACT", "flag", "0", _BOOL_SPELLINGS, "session",
         "Irs created while it is on are abstract: variables keep shape and dtype, no host data; "
         "they can be profiled, not run (ipuxl profile --abstract, ipuxl._abstract)"),
    Spec("IPUXL_DEBUG", "list", "(none)", "names in DEBUG_SWITCHES", "session",
         "experiment switches of the kernels (benchmarks, tests); never needed for results"),
)
_SPEC = {s.name: s for s in SPECS}

#: Debug switches of ``IPUXL_DEBUG`` (comma-separated). The ``conv_*`` ones
#: turn one convolution algorithm off (the plan then takes the next one),
#: for benchmarks and for tests that check the algorithms agree. Each
#: ``conv_no_X`` is also accepted under its older name ``IPUXL_CONV_NO_X``
#: (any value, as before).
DEBUG_SWITCHES: Dict[str, str] = {
    "conv_no_winograd": "no Winograd F(2x2, 3x3) convolutions",
    "conv_no_direct": "no direct (unlowered) convolutions for large channel counts",
    "conv_no_oc": "no channels-in-vectors (output-channel) forward convolutions",
    "conv_no_cols": "no column-blocked forward convolutions",
    "conv_no_tap": "no per-tap weight-gradient convolutions",
}
_LEGACY_DEBUG = {f"IPUXL_{k.upper()}": k for k in DEBUG_SWITCHES}

#: ``IPUXL_*`` variables read by the project's own build, test and
#: benchmark tools (never by the package): not misspellings.
TOOL_VARIABLES = ("IPUXL_FUZZ_CI_GRAPHS", "IPUXL_FUZZ_ABORT_AT", "IPUXL_MNIST_FULL_EPOCH",
                  "IPUXL_POPART_MIRROR",
                  # The checkouts and package cache of Graphcore's PopXL
                  # applications for the suite's apps test (apps_checkout()).
                  "IPUXL_EXAMPLES_DIR", "IPUXL_EXAMPLES_UTILS_DIR", "IPUXL_APPS_CACHE",
                  # Read by ipuxl's libpoplar in the C++ programs built against
                  # it, as the SDK's library reads POPLAR_ENGINE_OPTIONS
                  # (docs/poplar.md); no Python code reads it.
                  "IPUXL_POPLAR_DEVICES")

#: Keys of ``IPUXL_IPU_MODEL``: (kind, lowest, highest, whether the lowest
#: is excluded). The bounds are what the model can represent, not what a
#: chip has (tiles_per_ipu may exceed the chip's, to model a larger one).
IPU_MODEL_KEYS: Dict[str, Tuple[str, float, float, bool]] = {
    "version": ("choice", 0, 0, False),
    "tiles_per_ipu": ("int", 1, 65536, False),
    "num_ipus": ("int", 1, 1024, False),
    "num_io_tiles": ("int", 0, 65535, False),
    "memory_per_tile": ("int", 0, 1 << 40, False),
    "allow_out_of_memory": ("bool", 0, 0, False),
    "clock_hz": ("float", 0, 1e12, True),
    "host_bandwidth": ("float", 0, 1e15, True),
    "streaming_bandwidth": ("float", 0, 1e15, True),
    "available_memory_proportion": ("float", 0, 1, True),
}
_IPU_MODEL_ALIASES = {"allow_oom": "allow_out_of_memory"}
IPU_VERSIONS = ("ipu1", "ipu2", "ipu21")

#: Poplar's engine options that ``POPLAR_ENGINE_OPTIONS`` accepts (from
#: the Poplar API reference's Engine options). ipuxl acts on the
#: ``autoReport`` ones (the profile's file); the others concern code
#: generation, instrumentation and the hardware and are accepted and
#: ignored. Poplar refuses an option it does not know ("Unrecognised
#: option"), and so does ipuxl, naming the closest known one.
ENGINE_OPTIONS: FrozenSet[str] = frozenset({
    "autoReport.all", "autoReport.directory", "autoReport.outputGraphProfile",
    "autoReport.outputExecutionProfile", "autoReport.outputLoweredVars",
    "autoReport.outputArchive", "autoReport.outputSerializedGraph", "autoReport.outputDebugInfo",
    "autoReport.streamAtEachRun", "autoReport.executionProfileProgramRunCount",
    "debug.allowOutOfMemory", "debug.instrument", "debug.instrumentCompute",
    "debug.instrumentControlFlow", "debug.instrumentExternalExchange",
    "debug.computeInstrumentationLevel", "debug.retainDebugInformation",
    "debug.outputAllSymbols", "debug.profilingTile", "debug.runtimeVerify", "debug.verify",
    "debug.floatPointOpException", "debug.nanOverflowException", "debug.cbor", "debug.json",
    "opt.maxCompilationThreads", "opt.maxLinkerThreads", "opt.internalExchangeOptimisationTarget",
    "opt.enableMultiAccessCopies", "opt.useAutoloader", "opt.maxComputeSetsPerLoweredCopy",
    "opt.enableInlining", "opt.enableSwSyncs", "opt.limitVertexStateToLower256K",
    "profiler.format", "profiler.programs.filter", "profiler.blocks.filter",
    "profiler.blocks.implicitFlush", "profiler.includeFlopEstimates",
    "profiler.includeCycleEstimates", "profiler.perExecutionStreamCopyCycles",
    "profiler.replicaToProfile",
    "target.syncReplicasIndependently", "target.hostSyncTimeout", "target.extendedMemory",
    "target.deterministicWorkers", "target.firstRuntimeReplica", "target.numberRuntimeReplica",
    "target.saveArchive", "target.syncMethod",
    "exchange.enablePrefetch", "exchange.streamBufferOverlap",
    "exchange.streamBufferMaxPreemptiveMemory",
    "streamCallbacks.multiThreadMode", "streamCallbacks.numWorkerThreads",
    "streamCallbacks.maxLookahead", "streamCallbacks.numaAware",
})


def _accepted_error(name: str, raw: str, accepted: str, key: Optional[str] = None) -> ValueError:
    where = f"{name}: {key}={raw}" if key is not None else f"{name}={raw}"
    return ValueError(f"{where} is not accepted; expected {accepted}")


def _closest(word: str, choices) -> str:
    near = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)  # sorted: ties too
    return f" (did you mean {near[0]}?)" if near else ""


def _flag(name: str, raw: str, key: Optional[str] = None) -> bool:
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE or (v == "" and key is None):
        return False
    raise _accepted_error(name, raw, _BOOL_SPELLINGS, key)


def _choice(name: str, raw: str, choices: Tuple[str, ...], key: Optional[str] = None) -> str:
    v = raw.strip()
    if v not in choices:
        raise ValueError(f"{name}={raw} is not one of {', '.join(choices)}" if key is None else
                         f"{name}: {key}={raw} is not one of {', '.join(choices)}")
    return v


def _int(name: str, raw: str, lo: int, hi: int, key: Optional[str] = None) -> int:
    """A whole number in [lo, hi]: digits only (an optional sign), so that a
    value too large for the core's integers is refused here, not wrapped."""
    v = raw.strip()
    body = v[1:] if v[:1] in "+-" else v
    if not body.isdigit() or not body.isascii():
        raise _accepted_error(name, raw, f"a whole number from {lo} to {hi}", key)
    n = int(v)
    if not lo <= n <= hi:
        raise _accepted_error(name, raw, f"a whole number from {lo} to {hi}", key)
    return n


def _float(name: str, raw: str, lo: float, hi: float, lo_open: bool,
           key: Optional[str] = None) -> float:
    accepted = f"a number {'above' if lo_open else 'from'} {lo:g} {'and at most' if lo_open else 'to'} {hi:g}"
    try:
        x = float(raw.strip())
    except ValueError:
        raise _accepted_error(name, raw, accepted, key) from None
    if not math.isfinite(x) or x > hi or x < lo or (lo_open and x == lo):
        raise _accepted_error(name, raw, accepted, key)
    return x


def parse_ipu_model(text: str, name: str = "IPUXL_IPU_MODEL") -> Tuple[Tuple[str, object], ...]:
    """``key=value,key=value`` as ``((key, typed value), ...)``, each key
    and value checked (:data:`IPU_MODEL_KEYS`)."""
    out: Dict[str, object] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise ValueError(f"{name}: expected key=value, got {item.strip()!r}")
        key = _IPU_MODEL_ALIASES.get(key, key)
        if key not in IPU_MODEL_KEYS:
            raise ValueError(f"{name}: unknown option {key!r}{_closest(key, IPU_MODEL_KEYS)}; "
                             f"known: {', '.join(IPU_MODEL_KEYS)}")
        kind, lo, hi, lo_open = IPU_MODEL_KEYS[key]
        if kind == "choice":
            out[key] = _choice(name, value, IPU_VERSIONS, key)
        elif kind == "int":
            out[key] = _int(name, value, int(lo), int(hi), key)
        elif kind == "float":
            out[key] = _float(name, value, lo, hi, lo_open, key)
        else:
            out[key] = _flag(name, value, key)
    return tuple(out.items())


def parse_engine_options(text: str, name: str = "POPLAR_ENGINE_OPTIONS") \
        -> Tuple[Tuple[str, str], ...]:
    """A JSON object of Poplar engine options as ``((key, value), ...)``
    (values as strings, as Poplar's OptionFlags hold them). An unknown key
    is a ValueError naming the closest known option, as Poplar refuses it."""
    text = text.strip()
    if not text:
        return ()
    try:
        opts = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{name} is not valid JSON: {e}") from None
    if not isinstance(opts, dict):
        raise ValueError(f"{name} must be a JSON object of option names to values, got "
                         f"{type(opts).__name__}")
    out = []
    for key, value in opts.items():
        if key not in ENGINE_OPTIONS:
            raise ValueError(f"{name}: unrecognised engine option {key!r}"
                             f"{_closest(key, ENGINE_OPTIONS)} (Poplar refuses options it "
                             "does not know)")
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append((key, str(value)))
    for key in ("autoReport.all", "autoReport.outputGraphProfile"):
        if key in dict(out):
            _flag(name, dict(out)[key], key)
    return tuple(out)


def parse_debug(text: str, name: str = "IPUXL_DEBUG") -> FrozenSet[str]:
    switches = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if item not in DEBUG_SWITCHES:
            raise ValueError(f"{name}: unknown debug switch {item!r}"
                             f"{_closest(item, DEBUG_SWITCHES)}; known: {', '.join(DEBUG_SWITCHES)}")
        switches.add(item)
    return frozenset(switches)


@dataclasses.dataclass(frozen=True)
class Settings:
    """The settings in effect (see :data:`SPECS` and the README's table).
    Built by :func:`read`; never mutated (use :func:`override`)."""

    # -- fixed at import
    num_threads: Optional[int] = None  # None: the hardware's threads, at most 64
    isa: str = "best"
    gemm: str = "auto"
    no_blas: bool = False
    core_dir: Optional[str] = None
    profile_clock: str = "wall"
    popdist_spins: int = 50
    # -- read again for each Session
    fused_update: str = "auto"
    host_passes: str = "all"
    check_host_passes: bool = False
    #: IpuModel keyword arguments from IPUXL_IPU_MODEL, as (key, value) pairs.
    ipu_model: Tuple[Tuple[str, object], ...] = ()
    #: POPLAR_ENGINE_OPTIONS as (key, value) pairs, keys checked.
    engine_options: Tuple[Tuple[str, str], ...] = ()
    require_ipu_hw: bool = False
    offline_device: Optional[str] = None
    popdist_timeout: float = 300.0
    popdist_exchange: str = "auto"
    #: IPUXL_ABSTRACT: new Irs are abstract builds (ipuxl._abstract).
    abstract: bool = False
    #: IPUXL_DEBUG switches (and the older IPUXL_CONV_NO_* names). The
    #: ``conv_*`` ones are for the convolution plan's options.
    debug: FrozenSet[str] = frozenset()

    IMPORT_FIELDS = ("num_threads", "isa", "gemm", "no_blas", "core_dir", "profile_clock",
                     "popdist_spins")

    @property
    def conv_debug(self) -> FrozenSet[str]:
        """The convolution switches of :attr:`debug`, without ``conv_``
        (``{"no_winograd", ...}``)."""
        return frozenset(s[len("conv_"):] for s in self.debug if s.startswith("conv_"))

    @property
    def ipu_model_options(self) -> Dict[str, object]:
        return dict(self.ipu_model)

    @property
    def autoreport_directory(self) -> Optional[str]:
        """Where each Session writes its profile (``autoReport.all`` or
        ``autoReport.outputGraphProfile`` true): ``autoReport.directory``,
        else the current directory, as Poplar; None when no report is asked."""
        opts = dict(self.engine_options)

        def on(key):
            return key in opts and _flag("POPLAR_ENGINE_OPTIONS", opts[key], key)

        if not (on("autoReport.all") or on("autoReport.outputGraphProfile")):
            return None
        return opts.get("autoReport.directory", ".")

    def core_options(self, core):
        """The ``core.CoreOptions`` of these settings (``core``: the
        ``ipuxl._core`` module)."""
        return core.CoreOptions(num_threads=self.num_threads or 0, isa=self.isa,
                                gemm=getattr(core.GemmChoice, self.gemm),
                                blas_allowed=not self.no_blas,
                                profile_clock=getattr(core.ProfileClock, self.profile_clock))


def _relevant(environ: Mapping[str, str]) -> Tuple[Tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in environ.items()
                        if k.startswith("IPUXL_") or k in ("POPLAR_ENGINE_OPTIONS",
                                                           "POPXL_OFFLINE_DEVICE")))


def read(environ: Mapping[str, str], base: Optional[Settings] = None) -> Settings:
    """The settings an environment gives, every value checked (ValueError
    naming the variable). With ``base``, the import-time fields are taken
    from it instead (they were fixed then)."""
    env = {k: v for k, v in environ.items()}

    def get(name: str) -> str:
        return env.get(name, "")

    fields: Dict[str, object] = {}
    if base is None:
        if get("IPUXL_NUM_THREADS").strip():
            v = get("IPUXL_NUM_THREADS")
            if not (v.strip().isascii() and v.strip().isdigit()) or int(v) < 1:
                raise ValueError(f"IPUXL_NUM_THREADS={v} is not a positive integer; expected a "
                                 f"whole number of threads from 1 to {MAX_THREADS}")
            fields["num_threads"] = _int("IPUXL_NUM_THREADS", v, 1, MAX_THREADS)
        # As given (the core checks the level, ignoring case, and its error
        # then shows the value the user wrote).
        isa = get("IPUXL_ISA").strip()
        fields["isa"] = "best" if isa.lower() in ("", "auto") else isa
        if get("IPUXL_GEMM"):
            fields["gemm"] = _choice("IPUXL_GEMM", get("IPUXL_GEMM"), ("auto", "core", "blas"))
        fields["no_blas"] = _flag("IPUXL_NO_BLAS", get("IPUXL_NO_BLAS"))
        fields["core_dir"] = get("IPUXL_CORE_DIR") or None
        if get("IPUXL_PROFILE_CLOCK"):
            fields["profile_clock"] = _choice("IPUXL_PROFILE_CLOCK", get("IPUXL_PROFILE_CLOCK"),
                                              ("wall", "thread"))
        if get("IPUXL_POPDIST_SPINS").strip():
            fields["popdist_spins"] = _int("IPUXL_POPDIST_SPINS", get("IPUXL_POPDIST_SPINS"),
                                           0, 1_000_000)
    else:
        fields.update({f: getattr(base, f) for f in Settings.IMPORT_FIELDS})
    if get("IPUXL_FUSED_UPDATE"):
        fields["fused_update"] = _choice("IPUXL_FUSED_UPDATE", get("IPUXL_FUSED_UPDATE"),
                                         ("auto", "always", "never"))
    passes = get("IPUXL_HOST_PASSES").strip()
    no_fusion = _flag("IPUXL_NO_FUSION", get("IPUXL_NO_FUSION"))
    fields["host_passes"] = passes or ("none" if no_fusion else "all")
    fields["check_host_passes"] = _flag("IPUXL_CHECK_HOST_PASSES", get("IPUXL_CHECK_HOST_PASSES"))
    fields["ipu_model"] = parse_ipu_model(get("IPUXL_IPU_MODEL"))
    fields["engine_options"] = parse_engine_options(get("POPLAR_ENGINE_OPTIONS"))
    fields["require_ipu_hw"] = _flag("IPUXL_REQUIRE_IPU_HW", get("IPUXL_REQUIRE_IPU_HW"))
    if get("POPXL_OFFLINE_DEVICE"):
        fields["offline_device"] = _choice("POPXL_OFFLINE_DEVICE", get("POPXL_OFFLINE_DEVICE"),
                                           ("cpu", "ipu_model", "ipu_hw"))
    if get("IPUXL_POPDIST_TIMEOUT").strip():
        fields["popdist_timeout"] = _float("IPUXL_POPDIST_TIMEOUT", get("IPUXL_POPDIST_TIMEOUT"),
                                           0.0, 86400.0, True)
    if get("IPUXL_POPDIST_EXCHANGE"):
        fields["popdist_exchange"] = _choice("IPUXL_POPDIST_EXCHANGE",
                                             get("IPUXL_POPDIST_EXCHANGE"),
                                             ("auto", "native", "mpi4py"))
    fields["abstract"] = _flag("IPUXL_ABSTRACT", get("IPUXL_ABSTRACT"))
    debug = set(parse_debug(get("IPUXL_DEBUG")))
    debug |= {switch for name, switch in _LEGACY_DEBUG.items() if name in env}
    fields["debug"] = frozenset(debug)
    return Settings(**fields)


def unknown_variables(environ: Mapping[str, str]) -> Dict[str, str]:
    """``{name: closest setting or ""}`` for each ``IPUXL_*`` variable that
    is no setting of the package or of its tools."""
    known = set(_SPEC) | set(_LEGACY_DEBUG) | set(TOOL_VARIABLES)
    # Compared without the common prefix, which would make every name look close.
    tails = {k.split("_", 1)[1]: k for k in sorted(known) if k.startswith("IPUXL_")}
    out = {}
    for name in sorted(environ):
        if name.startswith("IPUXL_") and name not in known:
            near = difflib.get_close_matches(name[len("IPUXL_"):], list(tails), n=1, cutoff=0.7)
            out[name] = tails[near[0]] if near else ""
    return out


# ---- the settings in effect ---------------------------------------------

_lock = threading.Lock()
_cache: Dict[str, object] = {"key": None, "settings": None, "import": None}
_warned = set()
# Active override() blocks, oldest first: process-wide, as the environment
# they stand in for (a Session created by another thread sees them too).
_overrides: list = []


def _warn_unknown(environ: Mapping[str, str]) -> None:
    for name, near in unknown_variables(environ).items():
        if name in _warned:
            continue
        _warned.add(name)
        hint = f"; did you mean {near}?" if near else "; the README's Settings table lists them"
        warnings.warn(f"{name} is not an ipuxl setting and is ignored{hint}", RuntimeWarning,
                      stacklevel=4)


def current() -> Settings:
    """The settings in effect: the environment's (read and checked again
    only when an ``IPUXL_*``, ``POPLAR_ENGINE_OPTIONS`` or
    ``POPXL_OFFLINE_DEVICE`` variable changed), the import-time fields as
    they were at the first call, and any :func:`override` on top."""
    key = _relevant(os.environ)
    with _lock:
        if _cache["key"] != key:
            s = read(dict(key), base=_cache["import"])
            _warn_unknown(dict(key))
            if _cache["import"] is None:
                _cache["import"] = s
            _cache["key"], _cache["settings"] = key, s
        s = _cache["settings"]
        layers = [changes for _, changes in _overrides]
    for changes in layers:
        s = dataclasses.replace(s, **changes)
    return s


def abstract_builds() -> bool:
    """The ``abstract`` setting alone (``IPUXL_ABSTRACT`` under any
    :func:`override`): what an ``Ir`` reads when it is created, without
    checking the other settings, whose errors belong to the Session that
    uses them."""
    with _lock:
        layers = [changes for _, changes in _overrides]
    for changes in reversed(layers):
        if "abstract" in changes:
            return bool(changes["abstract"])
    return _flag("IPUXL_ABSTRACT", os.environ.get("IPUXL_ABSTRACT", ""))


@contextlib.contextmanager
def override(**changes) -> Iterator[Settings]:
    """Session settings replaced inside a ``with`` block, for the whole
    process as the environment would be, but without touching it::

        with ipuxl.settings.override(check_host_passes=True, host_passes="none"):
            ...

    Values are given as :class:`Settings` holds them (``ipu_model`` as
    IpuModel keyword arguments, a dict or pairs, checked as
    ``IPUXL_IPU_MODEL``'s). The import-time fields cannot be overridden
    (the core has them already): ValueError."""
    names = {f.name for f in dataclasses.fields(Settings)}
    for k in changes:
        if k not in names:
            raise ValueError(f"settings.override: {k!r} is not a setting{_closest(k, names)}")
        if k in Settings.IMPORT_FIELDS:
            raise ValueError(f"settings.override: {k!r} is fixed when ipuxl is imported "
                             f"(set {_env_name(k)} before the import)")
    if "ipu_model" in changes:
        items = changes["ipu_model"]
        items = items.items() if isinstance(items, Mapping) else items
        text = ",".join(f"{k}={_format(v)}" for k, v in items if v is not None)
        changes["ipu_model"] = parse_ipu_model(text, "settings.override(ipu_model=...)")
    if "debug" in changes:
        changes["debug"] = parse_debug(",".join(changes["debug"]), "settings.override(debug=...)")
    entry = (object(), changes)
    with _lock:
        _overrides.append(entry)
    try:
        yield current()
    finally:
        with _lock:
            _overrides.remove(entry)


def _format(v) -> str:
    return ("1" if v else "0") if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v)


def _env_name(field: str) -> str:
    for s in SPECS:
        if s.name.replace("IPUXL_", "").lower() == field:
            return s.name
    return f"IPUXL_{field.upper()}"


# ---- the process environment, for code that must pass it on ----------------

def popdist_layout() -> Dict[str, str]:
    """The instance-layout variables a launcher (``ipuxl poprun``, mpirun)
    set: ``POPDIST_*`` and the MPI rank variables, as given (parsed by
    :func:`ipuxl.popdist.layout`). Read at each call: they describe the
    process, not a setting."""
    return {k: v for k, v in os.environ.items()
            if k.startswith("POPDIST_") or k in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                                 "PMI_RANK")}



def poplar_target_options() -> Dict[str, object]:
    """``POPLAR_TARGET_OPTIONS``, the JSON object of Poplar's target options
    that ``poprun`` sets (``ipuLinkDomainSize``; ``{}`` when unset). Read at
    each call, as it describes the process (popxl-addons reads it so)."""
    text = os.environ.get("POPLAR_TARGET_OPTIONS", "").strip()
    if not text:
        return {}
    try:
        opts = json.loads(text)
    except ValueError as e:
        raise ValueError(f"POPLAR_TARGET_OPTIONS is not valid JSON: {e}") from None
    if not isinstance(opts, dict):
        raise ValueError(f"POPLAR_TARGET_OPTIONS must be a JSON object, got {text!r}")
    return opts

def apps_checkout() -> Dict[str, Optional[str]]:
    """Where the suite finds Graphcore's PopXL applications (a tool
    setting, never read by the package): ``examples`` (``IPUXL_EXAMPLES_DIR``,
    a checkout of graphcore/examples, work tree or git directory),
    ``examples_utils`` (``IPUXL_EXAMPLES_UTILS_DIR``) and ``cache``
    (``IPUXL_APPS_CACHE``, the package cache of ``scripts/popxl_apps.py``,
    default ``~/.cache/ipuxl/popxl_apps``); None where unset."""
    cache = os.environ.get("IPUXL_APPS_CACHE", "").strip() or \
        os.path.join(os.path.expanduser("~"), ".cache", "ipuxl", "popxl_apps")
    return {"examples": os.environ.get("IPUXL_EXAMPLES_DIR", "").strip() or None,
            "examples_utils": os.environ.get("IPUXL_EXAMPLES_UTILS_DIR", "").strip() or None,
            "cache": cache}


def child_environment(**changes: Optional[str]) -> Dict[str, str]:
    """A copy of this process's environment for a child process, with
    ``changes`` applied (None removes a variable)."""
    env = dict(os.environ)
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


@contextlib.contextmanager
def library_environment(name: str, value: Optional[str]) -> Iterator[bool]:
    """Sets ``name`` for a library that reads it while it loads (OpenBLAS's
    ``OPENBLAS_CORETYPE``), unless the user set it; restored afterwards.
    Yields whether it was set here."""
    mine = value is not None and name not in os.environ
    if mine:
        os.environ[name] = value
    try:
        yield mine
    finally:
        if mine:
            os.environ.pop(name, None)
