"""Whether the ipuxl that Python imports is an up-to-date install of this
checkout, so that scripts/run_tests.sh can test it without building the core
again (the README's install step, with or without pip's build isolation,
already built it).

    python3 scripts/installed_ipuxl.py --check              # exit 0: up to date
    python3 scripts/installed_ipuxl.py --test-requirements  # the test extra, one per line

Up to date: installed by pip from this directory, its compiled core no older
than any source it was built from (cpp/, ext/, python/, CMakeLists.txt,
pyproject.toml), and, where mpi4py is importable, holding the C exchange
between instances (ipuxl._mpi_exchange), which the build makes only when it
sees mpi4py (an install with build isolation does not). --check prints why
not on stderr.
"""
import glob
import importlib.metadata as md
import importlib.util
import json
import os
import sys

HERE = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SOURCES = ("cpp", "ext", "python", "CMakeLists.txt", "pyproject.toml")


def _newest_source() -> float:
    newest = 0.0
    for name in SOURCES:
        path = os.path.join(HERE, name)
        if os.path.isfile(path):
            newest = max(newest, os.path.getmtime(path))
        for root, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for f in files:
                newest = max(newest, os.path.getmtime(os.path.join(root, f)))
    return newest


def why_not_up_to_date():
    """None when the imported ipuxl is an up-to-date install of this
    checkout, else the reason."""
    try:
        dist = md.distribution("ipuxl")
    except md.PackageNotFoundError:
        return "ipuxl is not installed"
    url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    if os.path.realpath(url[len("file://"):]) != HERE or not url.startswith("file://"):
        return f"the installed ipuxl comes from {url or 'an index'}, not {HERE}"
    spec = importlib.util.find_spec("ipuxl")
    if spec is None or not spec.origin:
        return "ipuxl is not importable"
    pkg = os.path.dirname(spec.origin)
    if os.path.realpath(pkg).startswith(os.path.join(HERE, "python")):
        return "Python imports ipuxl from the checkout's python/ folder, not an install"
    cores = glob.glob(os.path.join(pkg, "_core*.so")) + glob.glob(os.path.join(pkg, "_core*.pyd"))
    if not cores:
        return f"the install in {pkg} has no compiled core"
    if os.path.getmtime(cores[0]) < _newest_source():
        return "a source file changed after the install"
    if importlib.util.find_spec("mpi4py") is not None and not glob.glob(
            os.path.join(pkg, "_mpi_exchange*")):
        return ("mpi4py is installed but the install has no ipuxl._mpi_exchange (built with "
                "build isolation, which hides mpi4py)")
    return None


def test_requirements():
    return [r.split(";")[0].strip() for r in (md.requires("ipuxl") or [])
            if "extra" in r and '"test"' in r.split(";", 1)[1]]


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        why = why_not_up_to_date()
        if why:
            print(f"run_tests: installing ipuxl: {why}", file=sys.stderr)
        sys.exit(1 if why else 0)
    if sys.argv[1:] == ["--test-requirements"]:
        print("\n".join(test_requirements()))
        sys.exit(0)
    sys.exit(__doc__)
