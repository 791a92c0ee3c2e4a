"""Where ipuxl's Poplar (headers, libpoplar.so and PopLibs, popc) is, and the
shell lines that put it on the compiler's and loader's paths.

``ipuxl poplar-env`` prints them, as the SDK's ``enable.sh`` does, so that an
unchanged Makefile that runs ``g++ prog.cpp -lpoplar -lpopops`` builds::

    eval "$(ipuxl poplar-env)"

An installed wheel holds ``ipuxl/poplar/{include,lib,bin}``. A developer
build (``scripts/dev_build.sh build/dev``) holds the libraries under
``build/dev/poplar/{lib,bin}`` and the headers stay in the source tree's
``poplar/include``; name the build with ``--build-dir`` or ``IPUXL_CORE_DIR``.
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Dict, Optional

_PACKAGE = Path(__file__).resolve().parent
_SOURCE_INCLUDE = _PACKAGE.parents[1] / "poplar" / "include"


def _core_dir_setting() -> Optional[str]:
    """IPUXL_CORE_DIR, the developer build (:mod:`ipuxl.settings`)."""
    from . import settings

    return settings.current().core_dir


def poplar_dirs(build_dir: Optional[str] = None) -> Dict[str, Path]:
    """The include, lib and bin folders of ipuxl's Poplar.

    Raises FileNotFoundError naming the places looked at when none holds
    libpoplar.so.
    """
    tried = []
    build = build_dir or _core_dir_setting()
    if build:
        lib = Path(build).resolve() / "poplar" / "lib"
        tried.append(str(lib))
        if (lib / "libpoplar.so").exists():
            include = lib.parent / "include"
            if not (include / "poplar" / "Graph.hpp").exists():
                include = _SOURCE_INCLUDE
            return {"include": include, "lib": lib, "bin": lib.parent / "bin"}
    lib = _PACKAGE / "poplar" / "lib"
    tried.append(str(lib))
    if (lib / "libpoplar.so").exists():
        return {"include": _PACKAGE / "poplar" / "include", "lib": lib, "bin": _PACKAGE / "poplar" / "bin"}
    raise FileNotFoundError(
        "ipuxl's Poplar libraries were not found (looked in: " + ", ".join(tried) + "); build them "
        "with scripts/dev_build.sh and pass --build-dir, or install the ipuxl wheel")


def shell_lines(build_dir: Optional[str] = None) -> str:
    """The `export` lines for CPATH, LIBRARY_PATH, LD_LIBRARY_PATH and PATH."""
    d = poplar_dirs(build_dir)

    def prepend(var: str, value: Path) -> str:
        v = shlex.quote(str(value))
        return f'export {var}={v}"${{{var}:+:${var}}}"'

    return "\n".join([
        prepend("CPATH", d["include"]),
        prepend("LIBRARY_PATH", d["lib"]),
        prepend("LD_LIBRARY_PATH", d["lib"]),
        prepend("PATH", d["bin"]),
    ])


def environment(build_dir: Optional[str] = None, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """A copy of `base` (default: this process's environment) with the paths set."""
    d = poplar_dirs(build_dir)
    if base is None:
        from . import settings

        base = settings.child_environment()
    env = dict(base)
    for var, key in (("CPATH", "include"), ("LIBRARY_PATH", "lib"), ("LD_LIBRARY_PATH", "lib"), ("PATH", "bin")):
        old = env.get(var)
        env[var] = str(d[key]) + (os.pathsep + old if old else "")
    return env
