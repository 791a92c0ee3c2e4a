#!/usr/bin/env python3
"""Exports every program Graphcore's PopXL applications build, as Poplar C++.

Runs the apps' own tests exactly as ``scripts/popxl_apps.py`` does (same
arguments: ``--examples``, ``--examples-utils``, ``--apps``, ``--cache``,
``-k``), and in each test process, after every ``Session(...)`` the tests
create, writes that Session's program with ``ipuxl.export.export_poplar``
into a temporary directory (the source only; nothing is compiled). Then it
prints, per app, how many programs exported and every refusal grouped by
its message, which names the op or setting the export lacks.

  scripts/popxl_apps_export.py --examples <graphcore/examples> \\
      --examples-utils <graphcore/examples-utils> [--apps gpt_j,bert] [--log F]

The tests' own results are printed by popxl_apps.py's report as usual; an
export failure never fails a test (it is only recorded).
"""
import collections
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import popxl_apps  # noqa: E402

# Appended to the test processes' sitecustomize (popxl_apps.write_site_dir).
_HOOK = r'''
import os as _ipuxl_os
if _ipuxl_os.environ.get("POPXL_APPS_EXPORT_LOG"):
    def _ipuxl_export_hook():
        import ipuxl.session as _session
        init = _session.Session.__init__

        def __init__(self, ir, *args, **kwargs):
            init(self, ir, *args, **kwargs)
            import json, shutil, tempfile
            out = tempfile.mkdtemp(prefix="ipuxl_apps_export_")
            try:
                from ipuxl.export import export_poplar
                export_poplar(ir, out)
                result = "exported"
            except NotImplementedError as e:
                result = "refused: " + str(e)
            except Exception as e:  # recorded, never raised into the app's test
                result = "error: %s: %s" % (type(e).__name__, e)
            finally:
                shutil.rmtree(out, ignore_errors=True)
            with open(_ipuxl_os.environ["POPXL_APPS_EXPORT_LOG"], "a") as f:
                f.write(json.dumps({"test": _ipuxl_os.environ.get("PYTEST_CURRENT_TEST", ""),
                                    "cwd": _ipuxl_os.getcwd(), "result": result[:400]}) + "\n")
        _session.Session.__init__ = __init__
    _ipuxl_export_hook()
'''


def _app_of(rec) -> str:
    for app in popxl_apps.APPS:
        if f"/nlp/{app}/" in rec.get("cwd", "") + "/":
            return app
    return "?"


def summarise(records) -> str:
    lines = []
    by_app = collections.defaultdict(list)
    for r in records:
        by_app[_app_of(r)].append(r)
    for app, recs in sorted(by_app.items()):
        ok = sum(r["result"] == "exported" for r in recs)
        lines.append(f"{app}: {ok} of {len(recs)} programs exported")
        causes = collections.Counter(r["result"] for r in recs if r["result"] != "exported")
        for cause, n in causes.most_common():
            lines.append(f"    {n:3d}  {cause}")
    return "\n".join(lines)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    log = None
    if "--log" in argv:
        i = argv.index("--log")
        log = argv[i + 1]
        del argv[i:i + 2]
    fd, path = tempfile.mkstemp(prefix="popxl_apps_export_", suffix=".jsonl")
    os.close(fd)
    log = log or path
    Path(log).write_text("")
    os.environ["POPXL_APPS_EXPORT_LOG"] = log
    write_site_dir = popxl_apps.write_site_dir

    def with_hook(site_dir):
        write_site_dir(site_dir)
        p = site_dir / "sitecustomize.py"
        p.write_text(p.read_text() + _HOOK)

    popxl_apps.write_site_dir = with_hook
    rc = popxl_apps.main(argv)
    records = [json.loads(line) for line in Path(log).read_text().splitlines() if line.strip()]
    print("\nPoplar export of the programs the tests built (ipuxl export poplar, source only):")
    print(summarise(records))
    print(f"(records: {log})")
    return rc


if __name__ == "__main__":
    sys.exit(main())
