#!/usr/bin/env python3
"""Run the tests of Graphcore's PopXL applications unchanged against ipuxl.

    python3 scripts/popxl_apps.py --examples PATH [--examples-utils PATH] \\
        [--apps bert,gpt_j,t5,gpt3_2.7B] [--cache DIR] [--json apps.json] [--timeout 900]

PATH is a checkout of graphcore/examples (a work tree or a bare git
directory) and, optionally, of graphcore/examples-utils, fetched by the
user; nothing from them is part of this project. For each application
(``nlp/<app>/popxl``) the runner

1. exports the application and the repository's ``utils/examples_tests``
   (its tests import ``examples_tests.test_util``) into a temporary
   directory (``git archive`` of HEAD, or a copy of a work tree);
2. installs what the application's ``requirements.txt`` names into a cache
   directory (``pip install --target``, never into this environment), with
   the deviations :func:`plan_requirements` prints: packages this
   environment already provides are kept at its versions (constraints), a
   pin with no wheel for this Python, or that cannot import with this
   environment's NumPy, is replaced by the nearest version that works
   (``NEAREST``), ``popxl-addons`` is ipuxl's, and the
   GitHub-only ``examples-utils`` is installed from ``--examples-utils`` at
   the commit the app pins (without it, it is an environment gap);
3. runs every test of the app's ``tests/`` unchanged, one file per
   ``python -P -m pytest`` process, through the machinery of
   ``popxl_conformance.py`` (its plugin installs the ``popxl`` → ipuxl alias
   in the test process and in every script the tests start, enforces the
   per-test timeout, and the runner goes on in a new process after a crash
   or a hang);
4. prints a table per app and every failure grouped by cause, ipuxl's
   failures apart from environment gaps (a missing module that PyPI does
   not provide, a Hugging Face Hub download, PopART's internals such as
   ``popart._internal.ir`` or ``Session._pb_session``).

Two things about the environment, both reported in the output:

* The apps were written for Python 3.6-3.10. Their configuration
  dataclasses take dataclass instances as field defaults, which Python
  3.11 refuses (``ValueError: mutable default``) before any test starts. On
  Python 3.11+ the runner runs them with Python 3.10's rule for that check
  (only ``list``, ``dict`` and ``set`` defaults are refused), installed in
  the test processes by the same ``sitecustomize`` that installs the alias;
  ``--no-py310-dataclasses`` turns that off.
* ``pytest.ini`` of each app asks the ``pytest-pythonpath`` plugin (which
  needs pytest < 7) for ``python_paths = . ../../../utils/``: the runner
  puts those directories on the test processes' ``sys.path`` instead.

No network but PyPI is assumed: ``HF_HUB_OFFLINE=1`` makes Hub downloads
fail at once instead of waiting for a connection.
"""
import argparse
import collections
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import popxl_conformance as conformance  # noqa: E402  (its runner and plugin)

APPS = ("bert", "gpt_j", "t5", "gpt3_2.7B")

#: Requirements this environment provides: kept at the installed version
#: (the app's pin is replaced), with why.
ENVIRONMENT_PROVIDED = {
    "torch": "the environment's CPU torch (the pinned 2.0.1+cpu has no wheel for this Python "
             "on PyPI)",
    "numpy": "the environment's numpy (ipuxl's core and torch are built against it; 1.19.5 has "
             "no wheel for Python 3.11)",
    "scipy": "the environment's scipy",
    "pyyaml": "the environment's PyYAML (5.4.1 does not build on Python 3.11)",
    "pytest": "the environment's pytest",
    "pytest-pythonpath": "emulated: the runner puts pytest.ini's python_paths on sys.path "
                         "(the plugin needs pytest < 7)",
    "dataclasses": "part of Python",
}

#: A pin that cannot work here -> the nearest version that does, with why.
_WANDB_NUMPY2 = ("0.17.9", "wandb 0.12/0.14 use np.float_, which NumPy 2 removed (and "
                           "pkg_resources, which setuptools 81 removed); 0.17.9 imports with both")
NEAREST = {
    ("wandb", "0.12.8"): _WANDB_NUMPY2,
    ("wandb", "0.14.0"): _WANDB_NUMPY2,
    ("transformers", "4.18.0"): ("4.23.1", "4.18.0 needs tokenizers < 0.13, which has no wheel "
                                           "for Python 3.11; 4.23 is the first to accept 0.13"),
    ("sklearn", "0.0"): ("scikit-learn", "the 'sklearn' alias package refuses to install; it "
                                         "stood for scikit-learn"),
}

#: GitHub-only requirements and how the runner treats them.
PROVIDED_BY_IPUXL = {"popxl-addons": "ipuxl.addons (the popxl_addons alias)"}


# --------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------

def _is_git_dir(path: Path) -> bool:
    r = subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"], capture_output=True)
    return r.returncode == 0


def export(repo: Path, paths, dest: Path, commit: str = "HEAD") -> str:
    """Copy ``paths`` of ``repo`` (git: at ``commit``) under ``dest``; returns
    the commit exported (or "work tree")."""
    dest.mkdir(parents=True, exist_ok=True)
    if _is_git_dir(repo):
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", commit], capture_output=True,
                             text=True, check=True).stdout.strip()
        tar = dest / ".export.tar"
        with open(tar, "wb") as f:
            # A mirror may lack blobs of unrelated paths: archive only these.
            subprocess.run(["git", "-C", str(repo), "archive", sha, *paths], stdout=f,
                           stderr=subprocess.PIPE, check=True)
        with tarfile.open(tar) as t:
            t.extractall(dest, filter="data")
        tar.unlink()
        return sha
    for p in paths:
        src = repo / p
        if src.is_dir():
            shutil.copytree(src, dest / p, dirs_exist_ok=True)
        elif src.is_file():
            (dest / p).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / p)
    return "work tree"


# --------------------------------------------------------------------------
# Requirements
# --------------------------------------------------------------------------

def _installed_version(dist: str):
    from importlib import metadata
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def plan_requirements(req_file: Path):
    """(pip requirement strings, notes, GitHub-only requirements) for one
    app's requirements.txt; notes say how each line was treated."""
    from packaging.requirements import InvalidRequirement, Requirement

    specs, notes, github = [], [], []
    for raw in req_file.read_text().splitlines():
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#") or line.startswith("-"):
            continue
        if "git+" in line:
            m = re.search(r"#egg=([\w.-]+)", line) or re.match(r"([\w.-]+)", line)
            name = m.group(1) if m else line
            ref = re.search(r"@([\w.-]+)(?:#|$)", line)
            extras = re.match(r"[\w.-]+(\[[\w,]+\])", line)
            github.append({"name": name, "ref": ref.group(1) if ref else None, "line": line,
                           "extras": extras.group(1) if extras else ""})
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            notes.append(f"{line}: not a requirement pip understands; skipped")
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = req.name.lower()
        if name in ENVIRONMENT_PROVIDED:
            have = _installed_version(name)
            notes.append(f"{line} -> {name} {have or '(not installed)'}: "
                         f"{ENVIRONMENT_PROVIDED[name]}")
            continue
        pinned = [s.version for s in req.specifier if s.operator == "=="]
        if pinned and (name, pinned[0]) in NEAREST:
            to, why = NEAREST[(name, pinned[0])]
            new = to if not to[0].isdigit() else f"{name}=={to}"
            notes.append(f"{line} -> {new}: {why}")
            specs.append(new)
            continue
        specs.append(str(req).split(";")[0].strip())
    return specs, notes, github


def _environment_constraints(tmp: Path) -> Path:
    """Constraints that keep the environment's own packages where they are."""
    lines = []
    for dist in ("numpy", "torch", "scipy", "pyyaml", "pytest"):
        v = _installed_version(dist)
        if v:
            lines.append(f"{dist}=={v}")
    path = tmp / "environment-constraints.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _pip(args, log):
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    log.append(f"$ {' '.join(cmd)}\n{r.stdout[-2000:]}{r.stderr[-4000:]}")
    return r


def cache_dir(specs, local_packages, cache_root: Path) -> Path:
    """The cache directory of one set of requirements. local_packages:
    (name, commit, path); the key names the commit, not the (temporary)
    path, so that a later run finds the cache."""
    key = hashlib.sha256(json.dumps([sys.version.split()[0], sorted(specs),
                                     sorted(f"{n}@{c}" for n, c, _ in local_packages)]).encode()
                         ).hexdigest()[:16]
    return cache_root / key


def cached_packages(app_root: Path, cache_root: Path):
    """The filled cache directory of an exported app's requirements (with
    examples-utils from a checkout, as ``--examples-utils`` installs it), or
    None when this Python has not filled it yet."""
    specs, _notes, github = plan_requirements(app_root / "requirements.txt")
    local = [("examples-utils", g["ref"], None) for g in github
             if g["name"].lower() == "examples-utils"]
    target = cache_dir(specs, local, cache_root)
    return target if (target / ".popxl_apps.json").is_file() else None


def install(specs, local_packages, cache_root: Path, tmp: Path, log):
    """Install ``specs`` (and local source trees) into a cache directory keyed
    by them and this Python; returns (directory, installed [(name, version)],
    failures). Resolution is against this environment, so the cache holds
    only what it lacks; a requirement pip cannot satisfy on this Python is
    retried without its version pin, then left out (recorded)."""
    target = cache_dir(specs, local_packages, cache_root)
    done = target / ".popxl_apps.json"
    if done.is_file():
        info = json.loads(done.read_text())
        return target, info["installed"], info["failures"]
    constraints = _environment_constraints(tmp)
    specs, failures = list(specs), []
    report = tmp / "pip-report.json"
    for _ in range(len(specs) + 2):
        args = ["install", "--dry-run", "--quiet", "--report", str(report), "-c", str(constraints),
                *specs, *(str(p) for _, _, p in local_packages)]
        r = _pip(args, log)
        if r.returncode == 0:
            break
        m = re.search(r"No matching distribution found for ([\w.-]+)", r.stderr) or \
            re.search(r"Cannot install ([\w.-]+)", r.stderr)
        culprit = m.group(1).lower() if m else None
        idx = next((i for i, s in enumerate(specs)
                    if re.match(r"[\w.-]+", s).group(0).lower().replace("_", "-") ==
                    (culprit or "").replace("_", "-")), None)
        if idx is None:
            failures.append({"requirement": " ".join(specs), "error": r.stderr.strip()[-600:]})
            return target, [], failures
        spec = specs[idx]
        bare = re.match(r"[\w.-]+", spec).group(0)
        if bare != spec:
            failures.append({"requirement": spec, "error": f"no release for this Python; "
                                                           f"installed {bare} unpinned"})
            specs[idx] = bare
        else:
            failures.append({"requirement": spec, "error": "not installable from PyPI here"})
            specs.pop(idx)
    items = json.loads(report.read_text()).get("install", [])
    pinned = []
    for it in items:
        url = it.get("download_info", {}).get("url", "")
        if url.startswith("file://") and "dir_info" in it.get("download_info", {}):
            pinned.append(url[len("file://"):])
        else:
            pinned.append(f"{it['metadata']['name']}=={it['metadata']['version']}")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    if pinned:
        r = _pip(["install", "--quiet", "--no-deps", "--target", str(target), *pinned], log)
        if r.returncode != 0:
            failures.append({"requirement": " ".join(pinned), "error": r.stderr.strip()[-600:]})
    installed = [(it["metadata"]["name"], it["metadata"]["version"]) for it in items]
    done.write_text(json.dumps({"specs": specs, "installed": installed, "failures": failures},
                               indent=1))
    return target, installed, failures


# --------------------------------------------------------------------------
# The test processes
# --------------------------------------------------------------------------

_PY310_DATACLASSES = '''\
# Written by popxl_apps.py: Python 3.10's mutable-default rule for dataclass
# fields (3.11 also refuses any unhashable default, e.g. a dataclass
# instance, which Graphcore's application configs use).
import dataclasses as _dc, os as _os
if _os.environ.get("POPXL_APPS_PY310_DATACLASSES") == "1" and not hasattr(_dc, "_popxl_apps"):
    _dc._popxl_apps = _get_field = _dc._get_field

    def _get_field_py310(cls, a_name, a_type, *rest):
        try:
            return _get_field(cls, a_name, a_type, *rest)
        except ValueError:
            default = getattr(cls, a_name, None)
            kind = type(default)
            if isinstance(default, (list, dict, set)) or kind.__dict__.get("__hash__", 0) is not None:
                raise
            kind.__hash__ = object.__hash__   # only while 3.11's check looks
            try:
                return _get_field(cls, a_name, a_type, *rest)
            finally:
                kind.__hash__ = None

    _dc._get_field = _get_field_py310
'''


def write_site_dir(site_dir: Path) -> None:
    site_dir.mkdir(parents=True, exist_ok=True)
    (site_dir / "sitecustomize.py").write_text(_PY310_DATACLASSES + conformance._SITECUSTOMIZE)


def python_paths(app_root: Path):
    """The directories pytest.ini's ``python_paths`` names (pytest-pythonpath)."""
    ini = app_root / "pytest.ini"
    if not ini.is_file():
        return [app_root]
    m = re.search(r"^python_paths\s*=\s*(.*)$", ini.read_text(), re.M)
    if not m:
        return [app_root]
    return [(app_root / p).resolve() for p in m.group(1).split()]


# --------------------------------------------------------------------------
# Causes
# --------------------------------------------------------------------------

_GITHUB_ONLY_MODULES = {"examples_utils": "examples-utils", "graphcore_cloud_tools":
                        "graphcore-cloud-tools"}
_EXC_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit)): ?(.*)$", re.M)


def innermost_exception(exc_type, message):
    """(type, message) of a failure; for a script the test ran (the apps'
    ``SubProcessChecker`` asserts with the script's output), the script's own
    last exception."""
    msg = message or ""
    if exc_type in ("AssertionError", "CalledProcessError") and \
            ("Output of failed command" in msg or "Traceback" in msg):
        found = _EXC_LINE.findall(msg)
        if found:
            t, m = found[-1]
            return t.split(".")[-1], m, True
    return exc_type, msg, False


def classify(exc_type, message):
    """("ipuxl" | "environment", cause) of one failure."""
    if exc_type == "NotCollected":
        # the file, or a conftest.py, failed to import: pytest's "E   X: y" line
        found = re.findall(r"^E\s+([A-Za-z_][\w.]*(?:Error|Exception)): ?(.*)$", message or "",
                           re.M)
        if found:
            exc_type, message = found[-1][0].split(".")[-1], found[-1][1]
    etype, msg, sub = innermost_exception(exc_type, message)
    first = (msg.strip().splitlines() or [""])[0]
    where = "in a script the test runs: " if sub else ""
    m = re.search(r"No module named '([^']+)'", first)
    if etype in ("ModuleNotFoundError", "ImportError") and m:
        mod = m.group(1)
        top = mod.split(".")[0]
        if top == "popart" and "." in mod:
            return "environment", f"{where}PopART internals: imports {mod} (PopART's C++ IR)"
        if mod == "popart":
            return "ipuxl", f"{where}import popart: ipuxl's compat aliases have no popart module"
        if top in _GITHUB_ONLY_MODULES:
            return "environment", (f"{where}GitHub-only package {_GITHUB_ONLY_MODULES[top]} "
                                   f"(module {top}) is not installed (--examples-utils)")
        if top not in ("popxl", "popxl_addons", "ipuxl", "popart", "popdist"):
            return "environment", f"{where}module {top} is not installed"
    if re.search(r"huggingface\.co|Hub|HF_HUB_OFFLINE|offline mode|LocalEntryNotFound|"
                 r"couldn't connect|Can't load (tokenizer|config)|outgoing traffic has been "
                 r"disabled", msg):
        return "environment", f"{where}Hugging Face Hub download (no network): {first[:120]}"
    if re.search(r"was removed in the NumPy \d", first):
        return "environment", f"{where}a package uses NumPy API that NumPy 2 removed: {first[:100]}"
    if re.search(r"_pb_session|_pb_graph|_pb_ir\b(?!.*getSessionOptions)|_was_attached_stack",
                 first):
        return "environment", f"{where}PopART internals: {first[:140]}"
    return "ipuxl", where + conformance.normalise_cause(etype, msg)


# --------------------------------------------------------------------------
# Running and reporting
# --------------------------------------------------------------------------

def run_app(app, root: Path, extra_path, args, tmp: Path, site_dir: Path, t0):
    analyser = conformance.Analyser()
    suite = conformance.Suite(app, root, ["tests"], extra_path=extra_path)
    records = []
    for f in suite.files():
        rel = str(f.relative_to(root))
        if args.filter not in rel:
            continue
        facts = conformance.analyse_file(analyser, f, root)
        funcs = facts["functions"]
        if not funcs:
            continue
        sys.stderr.write(f"[{time.time() - t0:6.0f}s] {app}:{rel} ({len(funcs)} test functions)\n")
        results, cerr = conformance.run_file(suite, f, set(funcs), facts.get("serial"), args,
                                             tmp, site_dir)
        for q, info in funcs.items():
            mine = [r for r in results.values() if r["func"] == q]
            if not mine:
                e = cerr or {"exc_type": "NotCollected", "message": "pytest did not collect it"}
                mine = [{"nodeid": f"{rel}::{q}", "outcome": "error", "exc_type": e["exc_type"],
                         "message": e["message"], "where": None}]
            for r in mine:
                kind = cause = None
                if r["outcome"] not in ("passed", "skipped", "xfail"):
                    kind, cause = classify(r.get("exc_type"), r.get("message"))
                records.append({"app": app, "file": rel, "func": q, "nodeid": r["nodeid"],
                                "outcome": r["outcome"], "exc_type": r.get("exc_type"),
                                "message": r.get("message"), "where": r.get("where"),
                                "kind": kind, "cause": cause})
    return records


def format_table(records):
    rows = collections.OrderedDict()
    for r in records:
        c = rows.setdefault(r["app"], collections.Counter())
        if r["outcome"] in ("skipped", "xfail"):
            c["skipped"] += 1
            continue
        c["tests"] += 1
        if r["outcome"] == "passed":
            c["pass"] += 1
        else:
            c[r["kind"]] += 1
    lines = ["| app | tests | pass | % | fail: ipuxl | fail: environment | skipped upstream |",
             "|---|---|---|---|---|---|---|"]
    total = collections.Counter()
    for app, c in rows.items():
        total.update(c)
        lines.append(f"| {app} | {c['tests']} | {c['pass']} | {conformance.pct(c['pass'], c['tests'])}"
                     f" | {c['ipuxl']} | {c['environment']} | {c['skipped']} |")
    if len(rows) > 1:
        lines.append(f"| all | {total['tests']} | {total['pass']} | "
                     f"{conformance.pct(total['pass'], total['tests'])} | {total['ipuxl']} | "
                     f"{total['environment']} | {total['skipped']} |")
    return "\n".join(lines)


def format_groups(records, list_tests=True):
    groups = collections.OrderedDict()
    for r in records:
        if r["kind"]:
            groups.setdefault((r["kind"], r["cause"]), []).append(r)
    out = []
    for kind, title in (("ipuxl", "Failures of ipuxl:"),
                        ("environment", "Environment gaps (not ipuxl's):")):
        mine = sorted(((c, rs) for (k, c), rs in groups.items() if k == kind),
                      key=lambda cr: (-len(cr[1]), cr[0]))
        out.append("")
        out.append(title + ("" if mine else " none"))
        for cause, rs in mine:
            wheres = collections.Counter(r["where"].split(" ")[0].rsplit(":", 1)[0]
                                         for r in rs if r.get("where"))
            files = ", ".join(w for w, _ in wheres.most_common(3))
            out.append(f"  {len(rs):4d}  {cause}" + (f"   [raised in {files}]" if files else ""))
            if list_tests:
                for r in sorted(rs, key=lambda r: r["nodeid"]):
                    out.append(f"          {r['app']}:{r['nodeid']}")
    return "\n".join(out)


def print_report(data, list_tests=True):
    for app, info in data.get("apps", {}).items():
        print(f"\n{app}: examples {info.get('examples_commit')}; requirements.txt:")
        for n in info.get("notes", []):
            print(f"    {n}")
        for g in info.get("github", []):
            print(f"    {g['line']} -> {g['treatment']}")
        for f in info.get("install_failures", []):
            print(f"    could not install {f['requirement']}: {f['error'][:200]}")
        inst = ", ".join(f"{n} {v}" for n, v in info.get("installed", []))
        print(f"    cache: {info.get('cache')} ({inst or 'nothing to install'})")
    print()
    print(format_table(data["tests"]))
    print(format_groups(data["tests"], list_tests))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", help="checkout of graphcore/examples (work tree or git dir)")
    ap.add_argument("--examples-utils", help="checkout of graphcore/examples-utils (git), "
                                             "installed at the commit each app pins")
    ap.add_argument("--apps", default=",".join(APPS), help=f"comma-separated, from {APPS}")
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "ipuxl" / "popxl_apps"),
                    help="where the apps' requirements are installed (pip --target)")
    ap.add_argument("--json", default="popxl_apps.json", help="where to write the results")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per test")
    ap.add_argument("--file-timeout", type=float, default=3600, help="seconds per test file")
    ap.add_argument("-k", "--filter", default="", help="only test files whose path contains this")
    ap.add_argument("--no-py310-dataclasses", action="store_true",
                    help="run the apps under this Python's own dataclass rules")
    ap.add_argument("--no-tests-listed", action="store_true",
                    help="print the failure groups without their tests")
    ap.add_argument("--report", metavar="JSON", help="print the report of an earlier run and exit")
    args = ap.parse_args(argv)
    if args.report:
        data = json.loads(Path(args.report).read_text())
        for r in data["tests"]:   # causes re-derived with this version's rules
            if r["kind"]:
                r["kind"], r["cause"] = classify(r.get("exc_type"), r.get("message"))
        print(f"{args.report}: run of {data.get('date')}, ipuxl {data.get('ipuxl_commit')}")
        print_report(data, not args.no_tests_listed)
        return 0
    if not args.examples:
        ap.error("--examples PATH is required")
    apps = [a for a in args.apps.split(",") if a]
    for a in apps:
        if a not in APPS:
            ap.error(f"unknown app {a!r}; choose from {APPS}")
    examples = Path(args.examples).resolve()
    eutils = Path(args.examples_utils).resolve() if args.examples_utils else None
    cache = Path(args.cache).resolve()
    t0 = time.time()
    data = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "ipuxl_commit": conformance.git_head(Path(__file__).resolve().parent),
            "python": sys.version.split()[0], "argv": sys.argv,
            "py310_dataclasses": not args.no_py310_dataclasses and sys.version_info >= (3, 11),
            "apps": {}, "tests": []}
    os.environ["POPXL_APPS_PY310_DATACLASSES"] = "1" if data["py310_dataclasses"] else "0"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="popxl_apps_") as tmp:
        tmp = Path(tmp)
        site_dir = tmp / "site"
        write_site_dir(site_dir)
        for app in apps:
            rel = f"nlp/{app}/popxl"
            dest = tmp / "examples"
            commit = export(examples, [rel, "utils/examples_tests"], dest)
            root = dest / rel
            specs, notes, github = plan_requirements(root / "requirements.txt")
            local, log = [], []
            for g in github:
                name = g["name"].lower()
                if name in PROVIDED_BY_IPUXL:
                    g["treatment"] = f"provided by {PROVIDED_BY_IPUXL[name]}"
                elif name == "examples-utils" and eutils is not None:
                    try:
                        src = tmp / f"examples-utils-{g['ref']}"
                        if not src.exists():
                            export(eutils, ["."], src, g["ref"] or "HEAD")
                        local.append((name, g["ref"], f"{src}{g['extras']}"))
                        g["treatment"] = f"installed from --examples-utils at {g['ref']}"
                    except subprocess.CalledProcessError as e:
                        g["treatment"] = (f"environment gap: {g['ref']} not in --examples-utils "
                                          f"({e.stderr.decode(errors='replace').strip()[:100]})")
                else:
                    g["treatment"] = "environment gap: GitHub-only, not installed"
            sys.stderr.write(f"[{time.time() - t0:6.0f}s] {app}: installing into {cache}\n")
            target, installed, failures = install(specs, local, cache, tmp, log)
            data["apps"][app] = {"examples_commit": commit, "notes": notes, "github": github,
                                 "cache": str(target), "installed": installed,
                                 "install_failures": failures}
            extra = [str(p) for p in python_paths(root)] + [str(target)]
            data["tests"] += run_app(app, root, extra, args, tmp, site_dir, t0)
            shutil.rmtree(dest, ignore_errors=True)
    data["seconds"] = round(time.time() - t0, 1)
    print_report(data, not args.no_tests_listed)
    Path(args.json).write_text(json.dumps(data, indent=1))
    print(f"\nwrote {args.json} ({data['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
