"""Loads the compiled core (``ipuxl._core``), configures it and installs
the BLAS it uses.

``IPUXL_CORE_DIR`` may name a directory holding a freshly built ``_core``
extension (developer builds outside the package).

The core reads no environment variable: here, at import, it receives the
import-time settings (:mod:`ipuxl.settings`) once, as a typed
``_core.CoreOptions`` through ``_core.configure``: the kernel threads
(``IPUXL_NUM_THREADS``), the instruction-set level (the best the CPU has,
or ``IPUXL_ISA``: ``sse``, ``avx2``, ``avx512`` on x86-64; an unknown level
or one the CPU lacks raises ValueError naming the setting), the GEMM choice
(``IPUXL_GEMM``), whether the BLAS may be used (``IPUXL_NO_BLAS``) and the
profiler's clock (``IPUXL_PROFILE_CLOCK``).

float32 GEMMs run on the core's packed kernels or on the ``scipy-openblas32``
wheel's ``cblas_sgemm``, by a fixed rule of the instruction-set level and
the shape (``_core.sgemm_plan``; cpp/core/blas.cpp), never a timing, so
results do not change from run to run. The library is found with ctypes and
its address handed to the core, so the extension has no link-time
dependency; ``IPUXL_NO_BLAS=1`` leaves it unloaded (the core's kernels
only).
"""
import ctypes
import importlib.machinery
import importlib.util
import os
import sys

from . import settings as _settings

__all__ = ["core"]


def _load_core():
    override = _settings.current().core_dir
    if override:
        import glob  # noqa: PLC0415  (only here: a plain import of ipuxl needs no glob)

        cands = sorted(glob.glob(os.path.join(override, "_core*.so")) +
                       glob.glob(os.path.join(override, "_core*.pyd")))
        if not cands:
            raise ImportError(f"IPUXL_CORE_DIR={override!r} holds no _core extension")
        loader = importlib.machinery.ExtensionFileLoader("ipuxl._core", cands[0])
        spec = importlib.util.spec_from_file_location("ipuxl._core", cands[0], loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        sys.modules["ipuxl._core"] = mod
        return mod
    from . import _core as mod  # noqa: PLC0415

    return mod


def load_extension(name: str):
    """An optional compiled module of ipuxl besides the core (``_mpi_exchange``):
    from ``IPUXL_CORE_DIR`` when set (a developer build holds every module),
    else from the package. ImportError when it was not built."""
    override = _settings.current().core_dir
    full = f"ipuxl.{name}"
    if full in sys.modules:
        return sys.modules[full]
    if override:
        import glob  # noqa: PLC0415

        cands = sorted(glob.glob(os.path.join(override, f"{name}*.so")) +
                       glob.glob(os.path.join(override, f"{name}*.pyd")))
        if not cands:
            raise ImportError(f"IPUXL_CORE_DIR={override!r} holds no {name} extension")
        loader = importlib.machinery.ExtensionFileLoader(full, cands[0])
        spec = importlib.util.spec_from_file_location(full, cands[0], loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        sys.modules[full] = mod
        return mod
    return importlib.import_module(full)


def _install_blas(mod) -> str:
    # Loaded only where the core's GEMM rules can pick it (AVX2, or
    # IPUXL_GEMM=blas; never with IPUXL_NO_BLAS): elsewhere it would cost
    # resident memory for nothing.
    if not mod.blas_can_be_chosen():
        return f"ipuxl packed GEMM ({mod.isa()})"
    # A level forced below the CPU's best (IPUXL_ISA) holds for the library
    # too: OpenBLAS then runs its kernels for that level (Haswell: AVX2+FMA;
    # Nehalem: SSE), so the per-shape choice compares like with like. The
    # library reads OPENBLAS_CORETYPE when it loads (importing
    # scipy_openblas32 loads it); the user's own value wins.
    coretype = {"avx2": "Haswell", "sse": "Nehalem"}.get(mod.isa())
    if mod.isa() == mod.isa_levels()[-1]:
        coretype = None
    # OpenBLAS starts a pool of one thread per core when it loads, and those
    # threads spin for a while before they sleep (~0.1 s of CPU at import);
    # the core runs it single-threaded (below), so it loads with one.
    with _settings.library_environment("OPENBLAS_CORETYPE", coretype), \
            _settings.library_environment("OPENBLAS_NUM_THREADS", "1"):
        try:
            import scipy_openblas32 as sob
        except ImportError:
            return f"ipuxl packed GEMM ({mod.isa()})"
        import glob  # noqa: PLC0415

        lib_dir = sob.get_lib_dir()
        cands = sorted(glob.glob(os.path.join(lib_dir, f"lib{sob.get_library()}*.so*")) +
                       glob.glob(os.path.join(lib_dir, f"lib{sob.get_library()}*.dylib")))
        if not cands:
            return f"ipuxl packed GEMM ({mod.isa()})"
        lib = ctypes.CDLL(cands[0], mode=ctypes.RTLD_GLOBAL)
    prefix = sob.get_prefix() if hasattr(sob, "get_prefix") else "scipy_"
    fn = getattr(lib, f"{prefix}cblas_sgemm", None)
    if fn is None:
        return f"ipuxl packed GEMM ({mod.isa()})"
    mod.set_sgemm(ctypes.cast(fn, ctypes.c_void_p).value)
    # The core splits large GEMMs over its own thread pool: a second pool of
    # OpenBLAS threads would only compete with it for the same cores.
    set_threads = getattr(lib, f"{prefix}openblas_set_num_threads", None)
    if set_threads is not None:
        set_threads(1)
    _install_blas.lib = lib  # keep the library loaded
    return f"ipuxl packed GEMM ({mod.isa()}) or scipy-openblas32 per shape ({cands[0]})"


def _configure(mod) -> None:
    """Hands the import-time settings to the core, once. An instruction-set
    level this build or CPU lacks raises ValueError naming IPUXL_ISA."""
    s = _settings.current()
    try:
        mod.configure(s.core_options(mod))
    except ValueError as e:
        raise ValueError(f"IPUXL_ISA={e}") from None


def apply_conv_options() -> None:
    """Hands the convolution plan's switches (``core.set_conv_options``; see
    cpp/kernels/conv/options.hpp) to the core: ``IPUXL_DEBUG=conv_no_winograd,
    conv_no_direct,conv_no_tap,conv_no_cols,conv_no_oc`` (or the older
    ``IPUXL_CONV_NO_*`` names) turn those forms off, for comparisons. Called
    before each Engine is built, so a switch set after import holds for the
    programs built after it."""
    off = _settings.current().conv_debug
    core.set_conv_options(**{opt: opt in off for opt in
                             ("no_winograd", "no_direct", "no_tap", "no_cols", "no_oc")})


core = _load_core()
_configure(core)
isa = core.isa()  # the instruction-set level in use
blas_backend = _install_blas(core)
