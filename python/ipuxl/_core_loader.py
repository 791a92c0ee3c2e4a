"""Loads the compiled core (``ipuxl._core``) and installs the BLAS it uses.

``IPUXL_CORE_DIR`` may name a directory holding a freshly built ``_core``
extension (developer builds outside the package).

The core picks its instruction-set level here, at import: the best the CPU
has, or ``IPUXL_ISA`` (``sse``, ``avx2``, ``avx512`` on x86-64); an unknown
level or one the CPU lacks raises ValueError naming the setting.

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

__all__ = ["core"]


def _load_core():
    override = os.environ.get("IPUXL_CORE_DIR")
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
    override = os.environ.get("IPUXL_CORE_DIR")
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
    # IPUXL_GEMM=blas): elsewhere it would cost resident memory for nothing.
    if os.environ.get("IPUXL_NO_BLAS") or not mod.blas_can_be_chosen():
        return f"ipuxl packed GEMM ({mod.isa()})"
    # A level forced below the CPU's best (IPUXL_ISA) holds for the library
    # too: OpenBLAS then runs its kernels for that level (Haswell: AVX2+FMA;
    # Nehalem: SSE), so the per-shape choice compares like with like. The
    # setting is read when the library loads (importing scipy_openblas32
    # loads it); the user's own OPENBLAS_CORETYPE wins.
    coretype = {"avx2": "Haswell", "sse": "Nehalem"}.get(mod.isa())
    set_coretype = (coretype is not None and mod.isa() != mod.isa_levels()[-1]
                    and "OPENBLAS_CORETYPE" not in os.environ)
    if set_coretype:
        os.environ["OPENBLAS_CORETYPE"] = coretype
    try:
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
    finally:
        if set_coretype:
            del os.environ["OPENBLAS_CORETYPE"]
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


def _check_settings() -> None:
    """The core reads these settings lazily (some only for a shape that asks);
    a typo would be ignored silently, so they are checked at import, as
    ``IPUXL_ISA`` is."""
    choices = {"IPUXL_GEMM": ("auto", "core", "blas"),
               "IPUXL_FUSED_UPDATE": ("auto", "always", "never")}
    for name, allowed in choices.items():
        v = os.environ.get(name)
        if v and v not in allowed:
            raise ValueError(f"{name}={v} is not one of {', '.join(allowed)}")
    v = os.environ.get("IPUXL_NUM_THREADS")
    if v and not (v.strip().isdigit() and int(v) > 0):
        raise ValueError(f"IPUXL_NUM_THREADS={v} is not a positive integer")


def _conv_options_from_env() -> dict:
    """The convolution plan's switches (``core.set_conv_options``; see
    cpp/kernels/conv/options.hpp) from ``IPUXL_CONV_NO_WINOGRAD``,
    ``IPUXL_CONV_NO_DIRECT``, ``IPUXL_CONV_NO_TAP``, ``IPUXL_CONV_NO_COLS``
    and ``IPUXL_CONV_NO_OC``: a variable that is set (to any value) turns
    that form off, for comparisons. Read each time a program is built
    (:func:`apply_conv_options`), so a switch set after import holds for the
    programs built after it."""
    names = {"no_winograd": "IPUXL_CONV_NO_WINOGRAD", "no_direct": "IPUXL_CONV_NO_DIRECT",
             "no_tap": "IPUXL_CONV_NO_TAP", "no_cols": "IPUXL_CONV_NO_COLS",
             "no_oc": "IPUXL_CONV_NO_OC"}
    return {opt: os.environ.get(var) is not None for opt, var in names.items()}


def apply_conv_options() -> None:
    """Hands the convolution switches to the core; called before each
    Engine is built (its convolution kernels read them then)."""
    core.set_conv_options(**_conv_options_from_env())


_check_settings()
core = _load_core()
isa = core.isa()  # the instruction-set level: raises ValueError for a bad IPUXL_ISA
blas_backend = _install_blas(core)
