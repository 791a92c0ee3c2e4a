"""Loads the compiled core (``ipuxl._core``) and installs the BLAS it uses.

``IPUXL_CORE_DIR`` may name a directory holding a freshly built ``_core``
extension (developer builds outside the package). float32 GEMMs use the
core's own packed SIMD kernels (AVX-512 or AVX2); only a build without them
(or ``IPUXL_USE_OPENBLAS=1``) loads the ``scipy-openblas32`` wheel, whose
``cblas_sgemm`` is found with ctypes and its address handed to the core, so
the extension has no link-time dependency.
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


def _install_blas(mod) -> str:
    if os.environ.get("IPUXL_NO_BLAS"):
        return "builtin"
    kernel = mod.gemm_kernel() if hasattr(mod, "gemm_kernel") else "portable"
    if kernel != "portable" and not os.environ.get("IPUXL_USE_OPENBLAS"):
        # The core's packed SIMD GEMM beats OpenBLAS on every shape measured;
        # not loading OpenBLAS also keeps its ~30 MB out of the process.
        return f"ipuxl packed GEMM ({kernel})"
    try:
        import scipy_openblas32 as sob
    except ImportError:
        return "builtin"
    import glob  # noqa: PLC0415

    lib_dir = sob.get_lib_dir()
    cands = sorted(glob.glob(os.path.join(lib_dir, f"lib{sob.get_library()}*.so*")) +
                   glob.glob(os.path.join(lib_dir, f"lib{sob.get_library()}*.dylib")))
    if not cands:
        return "builtin"
    lib = ctypes.CDLL(cands[0], mode=ctypes.RTLD_GLOBAL)
    prefix = sob.get_prefix() if hasattr(sob, "get_prefix") else "scipy_"
    fn = getattr(lib, f"{prefix}cblas_sgemm", None)
    if fn is None:
        return "builtin"
    mod.set_sgemm(ctypes.cast(fn, ctypes.c_void_p).value)
    # The core splits large GEMMs over its own thread pool: a second pool of
    # OpenBLAS threads would only compete with it for the same cores.
    set_threads = getattr(lib, f"{prefix}openblas_set_num_threads", None)
    if set_threads is not None:
        set_threads(1)
    _install_blas.lib = lib  # keep the library loaded
    return f"scipy-openblas32 ({cands[0]})"


core = _load_core()
blas_backend = _install_blas(core)
