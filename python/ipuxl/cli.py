"""The ``ipuxl`` command.

``ipuxl run script.py [args...]`` runs an unmodified PopXL script on ipuxl:
``popxl`` and ``popxl_addons`` imports resolve to ipuxl (unless the real
packages are installed), ``sys.argv`` is ``[script.py, args...]``.
"""
import argparse
import os
import runpy
import sys

__all__ = ["main"]


def _run(script: str, args) -> int:
    from . import compat

    if not os.path.isfile(script):
        print(f"ipuxl run: no such script: {script}", file=sys.stderr)
        return 2
    compat.install()
    sys.argv = [script] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ipuxl", description="ipuxl: PopXL on a simulator")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run an unmodified PopXL script on ipuxl")
    run.add_argument("script", nargs="?", help="the PopXL script to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    ns = parser.parse_args(argv)
    if ns.command == "run":
        if ns.script is None:
            print("ipuxl run: no script given. Usage: ipuxl run SCRIPT.py [ARGS...]",
                  file=sys.stderr)
            return 2
        return _run(ns.script, ns.args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
