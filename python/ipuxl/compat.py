"""Run unmodified PopXL programs: make ``import popxl`` (and ``popxl.ops``,
``popxl.ops.call``, ``popxl_addons``, ``popdist`` ...) resolve to ipuxl.

``import popart`` resolves to :mod:`ipuxl.popart_api`, the few parts of
PopART's Python module that PopXL programs use and that have a meaning here;
it is a module, not a package, so PopART's submodules (``popart._internal.ir``,
PopXL's C++ IR) are not importable (``ModuleNotFoundError``).

The alias finder goes first in ``sys.meta_path`` (so submodules such as
``popxl.ops.call`` resolve to the already-imported ipuxl modules), but it
asks the other finders about the top-level name first: a real ``popxl`` or
``popxl_addons`` that is importable is never shadowed.
"""
import importlib
import importlib.abc
import importlib.util
import sys

__all__ = ["install", "uninstall", "ALIASES", "real_package_importable"]

ALIASES = {"popxl": "ipuxl", "popxl_addons": "ipuxl.addons", "popdist": "ipuxl.popdist",
           "popart": "ipuxl.popart_api"}


def _mirror_submodules(alias: str, real: str) -> None:
    """Register every already-imported ``real.x.y`` as ``alias.x.y`` too.

    Without this, the first ``from popxl.ops.call import X`` would be a new
    import of ``popxl.ops.call`` and the import system would then set the
    attribute ``call`` of ``popxl.ops`` (which is ``ipuxl.ops``) to the
    module, hiding the function ``ops.call``.
    """
    prefix = real + "."
    for name, mod in list(sys.modules.items()):
        if name.startswith(prefix):
            sys.modules.setdefault(alias + name[len(real):], mod)


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str, alias: str):
        self._target = target
        self._alias = alias

    def create_module(self, spec):
        module = importlib.import_module(self._target)
        self._real_spec = module.__spec__
        return module

    def exec_module(self, module):
        # The target is already executed; the alias shares its module object.
        # The import system overwrote __spec__ with the alias's spec: restore
        # it so the real package keeps importing its submodules normally.
        module.__spec__ = self._real_spec
        _mirror_submodules(self._alias, self._target)
        return None


def real_package_importable(name: str) -> bool:
    """Whether a package called ``name`` other than ipuxl's alias of it can be
    imported (for example the SDK's ``popart``): every finder but the alias
    is asked, and nothing is imported."""
    for finder in sys.meta_path:
        if isinstance(finder, _AliasFinder) or not hasattr(finder, "find_spec"):
            continue
        if finder.find_spec(name, None) is not None:
            return True
    return False


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        top, _, rest = fullname.partition(".")
        if top not in ALIASES:
            return None
        if not rest:
            # A real package of that name wins: ask every other finder first.
            if real_package_importable(fullname):
                return None
        else:
            # Submodules are aliased only when the top-level name is ours;
            # otherwise the normal finders would load ipuxl's files a second
            # time under the alias name (two copies of every class).
            parent = sys.modules.get(top)
            if parent is None or not getattr(parent, "__name__", "").startswith("ipuxl"):
                return None
        real = ALIASES[top] + ("." + rest if rest else "")
        try:
            if importlib.util.find_spec(real) is None:
                return None
        except ModuleNotFoundError:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(real, fullname))


_FINDER = _AliasFinder()


def install() -> None:
    """Let ``import popxl`` / ``import popxl_addons`` load ipuxl when the real
    packages are not installed. Idempotent."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    """Remove the alias (modules already imported through it stay imported)."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
