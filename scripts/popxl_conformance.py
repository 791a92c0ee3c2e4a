#!/usr/bin/env python3
"""Run Graphcore's own PopXL and popxl.addons test suites against ipuxl.

    python3 scripts/popxl_conformance.py --popart PATH --addons PATH \
        [--tutorials PATH] [--json conformance.json] [--timeout 120]

PATH are checkouts of graphcore/popart and graphcore/popxl-addons (and,
optionally, graphcore/tutorials) fetched by the user; nothing from them is
part of this project. The tests run unchanged: each test file runs in its
own ``python -m pytest`` process that loads this file as a plugin, and the
plugin calls ``ipuxl.compat.install()`` before collection so that
``import popxl`` / ``import popxl_addons`` resolve to ipuxl. ipuxl must be
importable in the environment this script runs in (installed, or
``IPUXL_CORE_DIR=build/dev PYTHONPATH=python``).

Which tests count ("public-API tests")
--------------------------------------
Suites: popart ``tests/integration/popxl`` and ``tests/unittests/python/popxl``;
popxl-addons ``tests/``; tutorials: every ``tests/test_*.py`` under
``tutorials/popxl``. A test *function* (a ``test_*`` function, or a
``test_*`` method of a ``Test*`` class) is excluded when its code, or code
it reaches, uses a non-public interface:

* an identifier containing ``_pb_`` or ``_internal``;
* a name bound by importing the ``popart`` module (``import popart``,
  ``import popart._internal.ir as _ir``, ``from popart import X``) or the
  ``test_util`` helper module (``import test_util as tu``);
* ``poprun`` (an identifier or a string: the test launches poprun).

"Code it reaches" is, transitively: its decorators (``parametrize`` lists),
default arguments, the fixtures it names (defined in its file or an
upstream ``conftest.py``), the module-level functions, classes and
constants of its file it names, the helpers it imports from modules next to
it in the suite (for example ``utils.contains_op_of_type``), and for methods
the non-test methods and class body of their class.

A file pytest cannot collect counts each of its test functions as the
number of items its literal ``pytest.mark.parametrize`` lists would make
(``name[i of ~n]``; 1 per non-literal list), so that denominators do not
move when a file starts to import.

That is decided per test function where possible and per file otherwise: a
file whose import itself runs an excluded import (a top-level
``import popart._internal.ir``, ``import test_util``, or a top-level import
of a helper module next to it that does so, e.g. ``from utils import
contains_op_of_type``) cannot be imported unchanged without PopART, so all
its tests are excluded, with reason ``file imports <module>``. Nothing is
faked: no ``popart`` or ``test_util`` stand-in is ever put on the path.
The report lists how many otherwise-public test functions those files hold.

Tests upstream skips (skip markers, ``pytest.skip``) are reported apart and
are not in the denominator. The table is printed twice: by test item (each
parametrisation counts, as pytest reports) and by test function (a function
passes when all its items pass), since a few heavily parametrised functions
weigh a lot in the first.

Tests outside the targets
-------------------------
Each counted test may carry tags, reported in their own columns; the
percentages "outside those" leave tagged tests out:

* ``replication``: it created a ``Session`` for an Ir whose
  ``replication_factor`` is above 1 (seen while it ran), its code sets a
  literal replication factor above 1 (``Ir(4)``, ``replication=4``,
  ``ir.replication_factor = 4``), or it references replica-sharded tensors (``replica_sharded_variable``,
  ``replica_sharded_buffer``, ``remote_replica_sharded_variable``);
* ``remote``: it references remote memory (``remote_buffer``,
  ``RemoteBuffer``, ``remote_variable``, ``remote_load``, ``remote_store``,
  ``remote_code_load``, ``TensorStorage.OffChip``, addons' ``remote``
  helpers ``named_buffers``, ``load_remote_graph``, ``store_remote_graph``);
* ``mpi``: it references ``popdist`` or ``mpi``, or ``Ir(replication='popdist')``;
* ``hw``: popart's CMake registers its file only for hardware
  (``VARIANTS Hw``) or marks it ``DISABLED``.

Failures are grouped by cause: exception type plus the first line of the
message with numbers and paths normalised; for ``AttributeError`` and
``ImportError`` the missing name is the cause; a missing module that is
neither popxl nor popxl_addons is an ``environment:`` cause (an upstream test
dependency such as ``onnx`` that is not installed). Each group names the
ipuxl files the exceptions were raised in.

Each test file runs in a fresh ``python -P -m pytest`` (``-P``: the suite's
directory is not on ``sys.path``, so an addons checkout's own
``popxl_addons`` package cannot shadow the alias). A test still running
after ``--timeout`` seconds fails with ``TimeoutError``; one stuck where
Python cannot interrupt it ends its process, is recorded as ``Timeout``,
and the rest of its file runs in a new process.
"""
import argparse
import collections
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLUGIN_NAME = Path(__file__).stem  # this file, loaded by each child pytest with -p
# The static analysis of the test files (scripts/conformance_analysis.py).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conformance_analysis import (  # noqa: E402,F401 - part of this script's API
    EXCLUDED_MODULES, EXCLUDED_STRINGS, EXCLUDED_SUBSTRINGS, TAG_TOKENS, TAGS, Analyser,
    ModuleInfo, analyse_file, cmake_hw_only, estimated_items)


# --------------------------------------------------------------------------
# The pytest plugin (loaded with ``-p popxl_conformance`` in each child)
# --------------------------------------------------------------------------

_EVENTS = os.environ.get("POPXL_CONFORMANCE_EVENTS")
_STATE = {"rf": 1, "results": {}}


def _emit(**event):
    with open(_EVENTS, "a") as f:
        f.write(json.dumps(event) + "\n")


def _install_alias_and_probes():
    import functools
    import ipuxl.compat
    ipuxl.compat.install()
    import ipuxl

    # Record the replication factor of every Session a test creates (for
    # the ``replication`` tag). This only observes: the call goes through.
    real_init = ipuxl.Session.__init__

    @functools.wraps(real_init)
    def observing_init(self, *args, **kwargs):
        ir = args[0] if args else kwargs.get("ir")
        try:
            rf = int(getattr(ir, "replication_factor", 1))
        except Exception:
            rf = 1
        _STATE["rf"] = max(_STATE["rf"], rf)
        return real_init(self, *args, **kwargs)

    ipuxl.Session.__init__ = observing_init


if _EVENTS and __name__ != "__main__":
    _install_alias_and_probes()


def _plugin_config():
    with open(os.environ["POPXL_CONFORMANCE_SELECT"]) as f:
        return json.load(f)


def _func_of(item):
    """``path::Class::test[params]`` -> ``Class::test``."""
    parts = item.nodeid.split("::")[1:]
    if parts:
        parts[-1] = parts[-1].split("[")[0]
    return "::".join(parts)


def _exception_facts(excinfo):
    """(type name, first lines of the message, innermost ipuxl frame)."""
    if excinfo is None:
        return None, "", None
    etype = excinfo.type.__name__
    try:
        msg = str(excinfo.value)
    except Exception:
        msg = "<unprintable>"
    where = None
    try:
        for entry in excinfo.traceback:
            p = str(entry.path)
            if "/ipuxl/" in p:
                rel = p[p.rfind("/ipuxl/") + 1:]
                where = f"{rel}:{entry.lineno + 1} ({entry.name})"
    except Exception:
        pass
    return etype, _head_and_tail(msg), where


def _head_and_tail(msg, head=1000, tail=3000):
    """A long message cut to its start and its end: a failed script's
    output (popxl_apps.py's execution tests) ends with its traceback."""
    if len(msg) <= head + tail:
        return msg
    return msg[:head] + "\n[...]\n" + msg[-tail:]


def pytest_collection_modifyitems(session, config, items):
    if not _EVENTS:
        return
    cfg = _plugin_config()
    selected = set(cfg["selected"])
    done = set(cfg.get("done", ()))
    keep, drop = [], []
    for item in items:
        func = _func_of(item)
        if func in selected and item.nodeid not in done:
            keep.append(item)
            if item.nodeid not in cfg.get("announced", ()):
                _emit(event="collected", nodeid=item.nodeid, func=func)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


pytest_collection_modifyitems.trylast = True


def pytest_collectreport(report):
    if _EVENTS and report.failed:
        text = getattr(report, "longreprtext", "") or str(report.longrepr)
        lines = [l[4:].strip() for l in text.splitlines() if l.startswith("E   ")]
        etype, msg = "CollectionError", text.strip().splitlines()[-1] if text.strip() else ""
        for l in lines:
            m = re.match(r"([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): ?(.*)", l)
            if m:
                etype, msg = m.group(1).split(".")[-1], m.group(2)
        _emit(event="collect_error", nodeid=report.nodeid, exc_type=etype, message=msg[:2000])


def _timeout_handler(signum, frame):
    raise TimeoutError(f"conformance: test ran past {os.environ.get('POPXL_CONFORMANCE_TIMEOUT')} s")


import pytest as _pytest_for_hooks  # noqa: E402  (only the hookwrapper decorator)


@_pytest_for_hooks.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not _EVENTS:
        yield
        return
    import faulthandler
    import signal
    timeout = float(os.environ.get("POPXL_CONFORMANCE_TIMEOUT", "120"))
    _STATE["rf"] = 1
    _STATE["results"][item.nodeid] = []
    _emit(event="start", nodeid=item.nodeid)
    old = signal.signal(signal.SIGALRM, _timeout_handler)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    # A test stuck in C++ never returns to the interpreter to see SIGALRM:
    # end the process then; the runner records the test as timed out and
    # goes on with the rest of the file in a new process.
    faulthandler.dump_traceback_later(timeout + 30, exit=True)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        faulthandler.cancel_dump_traceback_later()
    phases = _STATE["results"].pop(item.nodeid, [])
    outcome, exc = "passed", None
    for when, out, facts, xfail in phases:
        if out == "skipped":
            if xfail:
                outcome, exc = "xfail", facts
            elif outcome == "passed":
                outcome, exc = "skipped", facts
        elif out == "failed":
            if outcome in ("passed", "skipped"):
                outcome = "failed" if when == "call" else "error"
                exc = facts
    etype, msg, where = exc if exc else (None, "", None)
    _emit(event="result", nodeid=item.nodeid, outcome=outcome, exc_type=etype,
          message=msg, where=where, rf=_STATE["rf"])


@_pytest_for_hooks.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    out = yield
    if not _EVENTS:
        return
    rep = out.get_result()
    facts = None
    if rep.failed or rep.skipped:
        if call.excinfo is not None:
            facts = _exception_facts(call.excinfo)
            if rep.skipped:
                reason = getattr(rep, "wasxfail", None) or (
                    rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(call.excinfo.value))
                facts = ("Skipped", str(reason)[:500], None)
        else:
            facts = ("Skipped" if rep.skipped else "Failed",
                     str(getattr(rep, "wasxfail", "") or rep.longrepr)[:500], None)
    _STATE["results"].setdefault(item.nodeid, []).append(
        (rep.when, rep.outcome, facts, hasattr(rep, "wasxfail")))


# --------------------------------------------------------------------------
# The runner
# --------------------------------------------------------------------------

class Suite:
    def __init__(self, name, root, dirs, pytest_args=(), extra_path=()):
        self.name = name
        self.root = Path(root).resolve()      # pytest rootdir and cwd
        self.dirs = [self.root / d for d in dirs]
        self.pytest_args = list(pytest_args)
        self.extra_path = [str(p) for p in extra_path]

    def files(self):
        out = []
        for d in self.dirs:
            if d.is_dir():
                out.extend(sorted(d.rglob("test_*.py")))
        return out


def make_suites(args):
    suites = []
    if args.popart:
        tests = Path(args.popart) / "tests"
        suites.append(Suite("PopXL integration + unit", tests,
                            ["integration/popxl", "unittests/python/popxl"],
                            ["--device-type", args.device_type]))
    if args.addons:
        suites.append(Suite("popxl.addons unit + integration", args.addons, ["tests"]))
    if args.tutorials:
        t = Path(args.tutorials)
        suites.append(Suite("PopXL tutorials", t, ["tutorials/popxl"],
                            extra_path=[t / "utils"]))
    return suites


_SITECUSTOMIZE = '''\
# Written by popxl_conformance.py: alias popxl -> ipuxl in every Python
# process the tests start (scripts run with sys.executable).
import os as _os, sys as _sys
if _os.environ.get("POPXL_CONFORMANCE_ALIAS") == "1":
    try:
        import ipuxl.compat as _c
        _c.install()
    except Exception as _e:  # report, never hide
        print("popxl_conformance: could not install the popxl alias:", _e, file=_sys.stderr)
# Chain to the sitecustomize this one shadows, if there is one.
import importlib.machinery as _m, importlib.util as _u
_here = _os.path.dirname(_os.path.abspath(__file__))
_spec = _m.PathFinder.find_spec("sitecustomize", [p for p in _sys.path
                                                  if _os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _mod = _u.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
'''


def _child_env(suite, events, select, timeout, site_dir):
    env = dict(os.environ)
    path = [str(site_dir), str(Path(__file__).resolve().parent)] + suite.extra_path
    # The children run in the suite's directory: make relative paths of this
    # environment (PYTHONPATH=python, IPUXL_CORE_DIR=build/dev) absolute.
    path += [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(path)
    if env.get("IPUXL_CORE_DIR"):
        env["IPUXL_CORE_DIR"] = os.path.abspath(env["IPUXL_CORE_DIR"])
    env["POPXL_CONFORMANCE_EVENTS"] = str(events)
    env["POPXL_CONFORMANCE_SELECT"] = str(select)
    env["POPXL_CONFORMANCE_TIMEOUT"] = str(timeout)
    env["POPXL_CONFORMANCE_ALIAS"] = "1"
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


def _read_events(path):
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def run_file(suite, test_file, selected, serial, args, workdir, site_dir):
    """Run the selected tests of one file; returns (results by nodeid,
    collection error or None)."""
    events = workdir / "events.jsonl"
    select = workdir / "select.json"
    if events.exists():
        events.unlink()
    results, collected, announced = {}, [], []
    collect_error = None
    attempts = 0
    while True:
        attempts += 1
        select.write_text(json.dumps({"selected": sorted(selected),
                                      "done": sorted(results), "announced": announced}))
        # -P: the suite's directory is not put on sys.path, so the real
        # popxl_addons package of an addons checkout is not importable (the
        # alias never shadows a real package).
        cmd = [sys.executable, "-P", "-m", "pytest", "-p", PLUGIN_NAME, str(test_file),
               "--rootdir", str(suite.root), "-q", "-p", "no:cacheprovider",
               "-o", "addopts=", "-W", "ignore::DeprecationWarning"] + suite.pytest_args
        if serial:
            cmd.append("--serial")
        start_len = len(_read_events(events))
        try:
            proc = subprocess.run(cmd, cwd=suite.root, capture_output=True, text=True,
                                  env=_child_env(suite, events, select, args.timeout, site_dir),
                                  timeout=args.file_timeout)
            rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-3000:]
        except subprocess.TimeoutExpired as e:
            rc, tail = "file-timeout", str(e)
        evs = _read_events(events)[start_len:]
        started = None
        for e in evs:
            if e["event"] == "collected":
                collected.append(e)
                announced.append(e["nodeid"])
            elif e["event"] == "start":
                started = e["nodeid"]
            elif e["event"] == "result":
                results[e["nodeid"]] = e
                started = None
            elif e["event"] == "collect_error" and collect_error is None:
                collect_error = e
        if started is not None and started not in results:
            results[started] = {"nodeid": started, "outcome": "timeout",
                                "exc_type": "Timeout" if rc != 0 else "Crash",
                                "message": f"the test process ended (rc={rc}) during this test",
                                "where": None, "rf": 1}
            continue   # the rest of the file in a new process
        pending = [c["nodeid"] for c in collected if c["nodeid"] not in results]
        if not pending or attempts > 50:
            for n in pending:
                results[n] = {"nodeid": n, "outcome": "error", "exc_type": "NotRun",
                              "message": f"not run (rc={rc}): {tail[-300:]}", "where": None,
                              "rf": 1}
            break
        if not evs or not any(e["event"] == "result" for e in evs):
            for n in pending:
                results[n] = {"nodeid": n, "outcome": "error", "exc_type": "NotRun",
                              "message": f"not run (rc={rc}): {tail[-300:]}", "where": None,
                              "rf": 1}
            break
    funcs = {c["nodeid"]: c["func"] for c in collected}
    for n, r in results.items():
        r.setdefault("func", funcs.get(n, n.split("::", 1)[-1].split("[")[0]))
    if not collected and collect_error is None and selected:
        collect_error = {"exc_type": "NotCollected",
                         "message": f"nothing collected (rc={rc}): {tail[-1500:]}"}
    return results, collect_error


# -- cause normalisation -----------------------------------------------------

_NUM = re.compile(r"(?<![A-Za-z_])[-+]?\d+(\.\d+)?(e[-+]?\d+)?")


def normalise_cause(exc_type, message):
    msg = (message or "").strip()
    first = msg.splitlines()[0] if msg else ""
    if exc_type == "CalledProcessError":
        # a script the test ran failed: its own last exception is the cause
        found = re.findall(r"^([A-Za-z_][\w.]*(?:Error|Exception)): ?(.*)$", msg, re.M)
        if found:
            inner_type, inner_msg = found[-1]
            return "in a subprocess: " + normalise_cause(inner_type.split(".")[-1], inner_msg)
    if exc_type == "AttributeError":
        m = re.search(r"has no attribute '([^']+)'", first)
        obj = re.match(r"'?([^']*)'? (?:object|module)", first)
        if m:
            owner = re.sub(r"^module ", "", first.split(" has no attribute")[0])
            owner = owner.replace("'", "")
            if owner.split(".")[0] in ("numpy", "torch"):
                return (f"environment: the test uses {owner}.{m.group(1)}, which the installed "
                        f"{owner.split('.')[0]} no longer has")
            return f"AttributeError: {owner} has no attribute '{m.group(1)}'"
    if exc_type == "ModuleNotFoundError":
        m = re.search(r"No module named '([^'.]+)", first)
        if m and m.group(1) not in ("popxl", "popxl_addons", "ipuxl"):
            return (f"environment: the test needs the module '{m.group(1)}', "
                    f"which is not installed")
    if exc_type in ("ImportError", "ModuleNotFoundError"):
        first = re.sub(r"\s*\(.*\)$", "", first)
        return f"{exc_type}: {first}"
    if exc_type == "NotImplementedError":
        return f"NotImplementedError: {_NUM.sub('N', first)[:160]}"
    if exc_type == "Failed" and first.startswith("DID NOT RAISE"):
        return f"Failed: {first}"
    if "Regex pattern did not match" in msg:   # pytest.raises(match=...)
        regex = re.search(r"(?:Expected regex|Regex): (.*)", msg)
        return "error message differs" + (f": expects {regex.group(1)[:100]}" if regex else "")
    if exc_type in ("Timeout", "Crash", "TimeoutError"):
        return f"{exc_type}: {first[:100]}"
    text = re.sub(r"0x[0-9a-f]+", "0x…", first)
    text = re.sub(r"/\S+", "<path>", text)
    text = _NUM.sub("N", text)
    text = re.sub(r"\s+", " ", text)
    return f"{exc_type}: {text[:160]}"


# -- reporting ---------------------------------------------------------------

def summarise(records):
    """Per suite: counts for the table."""
    table = collections.OrderedDict()
    for r in records:
        s = table.setdefault(r["suite"], collections.Counter())
        if r["excluded"]:
            s["excluded"] += 1
            if r["excluded"].startswith("file imports") and r.get("public_in_body"):
                s["excluded_file_only"] += 1
            continue
        if r["outcome"] in ("skipped", "xfail"):
            s["skipped"] += 1
            continue
        s["tests"] += 1
        ok = r["outcome"] == "passed"
        s["pass"] += ok
        if r["tags"]:
            for t in r["tags"]:
                s[f"tag_{t}"] += 1
                s[f"tag_{t}_pass"] += ok
            s["tagged"] += 1
        else:
            s["outside"] += 1
            s["outside_pass"] += ok
    return table


def by_function(records):
    """The records folded into one per test function: it passes when all its
    (not skipped) items pass, carries the union of their tags, and is skipped
    when all its items are."""
    funcs = collections.OrderedDict()
    for r in records:
        key = (r["suite"], r["file"], r["func"])
        f = funcs.get(key)
        if f is None:
            funcs[key] = f = dict(r, tags=set(r["tags"]), outcomes=[])
        f["tags"] |= set(r["tags"])
        f["outcomes"].append(r["outcome"])
    out = []
    for f in funcs.values():
        live = [o for o in f["outcomes"] if o not in ("skipped", "xfail")]
        if f["excluded"]:
            outcome = "excluded"
        elif not live:
            outcome = "skipped"
        else:
            outcome = "passed" if all(o == "passed" for o in live) else "failed"
        out.append(dict(f, outcome=outcome, tags=sorted(f["tags"])))
    return out


def pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "–"


def format_table(table):
    lines = ["| suite | public-API tests | pass | % | skipped upstream | replication | remote | MPI | hw only "
             "| outside those | pass | % |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in table.items():
        tag = lambda t: f"{s[f'tag_{t}']} ({s[f'tag_{t}_pass']} pass)" if s[f"tag_{t}"] else "0"
        lines.append(
            f"| {name} | {s['tests']} | {s['pass']} | {pct(s['pass'], s['tests'])} | {s['skipped']} "
            f"| {tag('replication')} | {tag('remote')} | {tag('mpi')} | {tag('hw')} "
            f"| {s['outside']} | {s['outside_pass']} | {pct(s['outside_pass'], s['outside'])} |")
    return "\n".join(lines)


def group_failures(records):
    groups = collections.OrderedDict()
    fails = [r for r in records if not r["excluded"]
             and r["outcome"] not in ("passed", "skipped", "xfail")]
    for r in fails:
        key = ("tagged" if r["tags"] else "target", r["cause"])
        groups.setdefault(key, []).append(r)
    return sorted(groups.items(), key=lambda kv: (kv[0][0] != "target", -len(kv[1]), kv[0][1]))


def format_groups(groups, list_tests=True):
    out = []
    current = None
    for (kind, cause), rs in groups:
        if kind != current:
            current = kind
            out.append("")
            out.append("Failures counted in the targets:" if kind == "target" else
                       "Failures in tests that need replication, remote buffers, MPI or hardware:")
        wheres = collections.Counter(r["where"].split(" ")[0].rsplit(":", 1)[0]
                                     for r in rs if r.get("where"))
        files = ", ".join(w for w, _ in wheres.most_common(3))
        out.append(f"  {len(rs):4d}  {cause}" + (f"   [raised in {files}]" if files else ""))
        if list_tests:
            for r in sorted(rs, key=lambda r: r["nodeid"]):
                tags = f"  ({','.join(r['tags'])})" if r["tags"] else ""
                out.append(f"          {r['suite_short']}:{r['nodeid']}{tags}")
    return "\n".join(out)


def print_report(records, list_tests=True):
    table = summarise(records)
    groups = group_failures(records)
    print()
    print("By test item (each parametrisation counts):")
    print(format_table(table))
    print()
    print("By test function (passes when all its items pass):")
    print(format_table(summarise(by_function(records))))
    for name, s in table.items():
        print(f"  {name}: {s['excluded']} test functions excluded as non-public; "
              f"{s['excluded_file_only']} of them only because their file imports popart/test_util")
    print(format_groups(groups, list_tests=list_tests))
    return table, groups


def report(path, list_tests=True):
    data = json.loads(Path(path).read_text())
    records = data["tests"]
    for r in records:
        if r.get("cause"):
            r["cause"] = normalise_cause(r.get("exc_type"), r.get("message"))
    print(f"{path}: run of {data.get('date')}, ipuxl {data.get('ipuxl_commit')}, "
          f"popart {data.get('popart_commit')}, popxl-addons {data.get('addons_commit')}")
    print_report(records, list_tests)
    return 0


def git_head(path):
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True,
                              text=True).stdout.strip() or None
    except OSError:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--popart", help="checkout of graphcore/popart")
    ap.add_argument("--addons", help="checkout of graphcore/popxl-addons")
    ap.add_argument("--tutorials", help="checkout of graphcore/tutorials (at a commit that "
                                        "still holds tutorials/popxl, e.g. b7ffa4d)")
    ap.add_argument("--json", default="popxl_conformance.json", help="where to write the results")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per test")
    ap.add_argument("--file-timeout", type=float, default=1800, help="seconds per test file")
    ap.add_argument("--device-type", default="IpuModel2",
                    help="popart's --device-type (sets TEST_TARGET); default IpuModel2")
    ap.add_argument("-k", "--filter", default="",
                    help="only test files whose path contains this string")
    ap.add_argument("--list", action="store_true", help="only print the selection")
    ap.add_argument("--no-tests-listed", action="store_true",
                    help="print the failure groups without their tests")
    ap.add_argument("--report", metavar="JSON",
                    help="print the table and failure groups of an earlier run's JSON "
                         "(causes re-derived with this version's rules) and exit")
    args = ap.parse_args(argv)
    if args.report:
        return report(args.report, list_tests=not args.no_tests_listed)
    if not (args.popart or args.addons or args.tutorials):
        ap.error("give at least one of --popart, --addons, --tutorials")

    analyser = Analyser()
    records = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="popxl_conformance_") as tmp:
        tmp = Path(tmp)
        site_dir = tmp / "site"
        site_dir.mkdir()
        (site_dir / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        for suite in make_suites(args):
            short = {"PopXL integration + unit": "popart",
                     "popxl.addons unit + integration": "addons"}.get(suite.name, "tutorials")
            files = [f for f in suite.files() if args.filter in str(f)]
            for f in files:
                rel = str(f.relative_to(suite.root))
                facts = analyse_file(analyser, f, suite.root)
                funcs = facts["functions"]
                selected = {q for q, i in funcs.items() if i["excluded"] is None}
                if args.list:
                    for q, i in funcs.items():
                        print(f"{short}:{rel}::{q}  {i['excluded'] or 'COUNTED'}"
                              + (f"  tags={','.join(i['tags'])}" if i["tags"] else ""))
                    continue
                results, cerr = {}, None
                if selected:
                    sys.stderr.write(f"[{time.time() - t0:6.0f}s] {short}:{rel} "
                                     f"({len(selected)} test functions)\n")
                    results, cerr = run_file(suite, f, selected, facts.get("serial"), args,
                                             tmp, site_dir)
                ran_funcs = {r["func"] for r in results.values()}
                for q, info in funcs.items():
                    base = {"suite": suite.name, "suite_short": short, "file": rel, "func": q,
                            "excluded": info["excluded"], "public_in_body": info["public_in_body"],
                            "static_tags": info["tags"]}
                    if info["excluded"]:
                        records.append(dict(base, nodeid=f"{rel}::{q}", outcome="excluded",
                                            tags=info["tags"], cause=None))
                        continue
                    mine = [r for r in results.values() if r["func"] == q]
                    if not mine:
                        e = cerr or {"exc_type": "NotCollected",
                                     "message": "pytest did not collect this test"}
                        # not collected: weigh it as the items its parametrisation
                        # would make (estimated from literal parametrize lists)
                        n = info.get("estimated_items", 1)
                        mine = [{"nodeid": f"{rel}::{q}" + (f"[{i + 1} of ~{n}]" if n > 1 else ""),
                                 "outcome": "error", "exc_type": e["exc_type"],
                                 "message": e["message"], "where": None, "rf": 1}
                                for i in range(n)]
                    for r in mine:
                        tags = set(info["tags"])
                        if r.get("rf", 1) > 1:
                            tags.add("replication")
                        if r.get("exc_type") == "NotImplementedError":
                            m = (r.get("message") or "").lower()
                            if "replica" in m or "replication" in m:
                                tags.add("replication")
                            if "remote" in m:
                                tags.add("remote")
                            if "popdist" in m:
                                tags.add("mpi")
                        cause = None
                        if r["outcome"] not in ("passed", "skipped", "xfail"):
                            cause = normalise_cause(r.get("exc_type"), r.get("message"))
                        records.append(dict(base, nodeid=r["nodeid"], outcome=r["outcome"],
                                            exc_type=r.get("exc_type"), message=r.get("message"),
                                            where=r.get("where"), tags=sorted(tags), cause=cause))
    if args.list:
        return 0

    table, groups = print_report(records, list_tests=not args.no_tests_listed)
    try:
        import ipuxl
        ipuxl_file = ipuxl.__file__
    except Exception:
        ipuxl_file = None
    out = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "ipuxl": ipuxl_file,
        "ipuxl_commit": git_head(Path(__file__).resolve().parent),
        "popart_commit": git_head(args.popart) if args.popart else None,
        "addons_commit": git_head(args.addons) if args.addons else None,
        "tutorials_commit": git_head(args.tutorials) if args.tutorials else None,
        "argv": sys.argv,
        "seconds": round(time.time() - t0, 1),
        "table": {k: dict(v) for k, v in table.items()},
        "groups": [{"kind": k, "cause": c, "count": len(rs),
                    "tests": [r["suite_short"] + ":" + r["nodeid"] for r in rs]}
                   for (k, c), rs in groups],
        "tests": records,
    }
    Path(args.json).write_text(json.dumps(out, indent=1))
    print(f"\nwrote {args.json} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
