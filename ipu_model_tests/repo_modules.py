"""Loads a program of the repository's ``bench/`` or ``examples/`` folder as
a module, by its path, for the tests of that program: the folders are not
put on ``sys.path`` (where their module names could shadow others).

``load("bench/transformer_step.py", "bench/_peer.py", "bench/_stats.py")``
loads the sibling modules it imports first, each under its own name."""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(path: str, *siblings: str):
    """The module of ``path`` (relative to the repository root), loaded
    once; ``siblings`` are loaded before it (the modules it imports by
    plain name from its own folder)."""
    for s in siblings:
        load(s)
    name = os.path.splitext(os.path.basename(path))[0]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[name]
        raise
    return mod
