"""The ``ipuxl`` command.

``ipuxl run script.py [args...]`` runs an unmodified PopXL script on ipuxl:
``popxl`` and ``popxl_addons`` imports resolve to ipuxl (unless the real
packages are installed), ``sys.argv`` is ``[script.py, args...]``.

``ipuxl profile [options] script.py [args...]`` runs it the same way and
writes the IPU model's profile of the last Session it created to
``profile.json`` and ``profile.html`` (plots; needs matplotlib) in
``--out``, and prints a short table. ``ipuxl profile --compare a.json
b.json`` shows two profiles side by side (and writes ``compare.html``).

``ipuxl poprun --num-instances N --num-replicas R [--mpi-args ARGS]
script.py [args...]`` runs it as N instances (processes) of R/N replicas
each under Open MPI's ``mpirun``, as Graphcore's ``poprun`` (see
:mod:`ipuxl.popdist.launcher`).
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


def _write_html(profiles, path) -> bool:
    from .profile import write_html

    try:
        write_html(profiles, path)
    except ImportError as e:
        print(f"ipuxl profile: no HTML page: {e}", file=sys.stderr)
        return False
    return True


def _profile(ns) -> int:
    from . import profile as prof
    from . import settings

    if ns.compare:
        if len(ns.compare) != 2 or ns.script:
            print("ipuxl profile --compare takes exactly two profile.json files", file=sys.stderr)
            return 2
        try:
            a, b = (prof.load(p) for p in ns.compare)
        except (OSError, ValueError) as e:
            print(f"ipuxl profile: {e}", file=sys.stderr)
            return 2
        a.name = a.name or os.path.basename(ns.compare[0])
        b.name = b.name or os.path.basename(ns.compare[1])
        print(prof.compare(a, b))
        if not ns.no_html:
            os.makedirs(ns.out, exist_ok=True)
            path = os.path.join(ns.out, "compare.html")
            if _write_html([a, b], path):
                print(f"wrote {path}")
        return 0
    if not ns.script:
        print("ipuxl profile: give a script to run, or --compare a.json b.json", file=sys.stderr)
        return 2
    # The command's IPU (IPUXL_IPU_MODEL's keys over the command line's)
    # becomes the script's default IpuModel for the run, through the
    # settings rather than the environment.
    model = prof.IpuModel.from_env(prof.IpuModel(
        version=ns.version, tiles_per_ipu=ns.tiles_per_ipu, allow_out_of_memory=True))
    with settings.override(ipu_model=vars(model)), prof.capture(model) as captured:
        code = _run(ns.script, ns.args)
    if not captured:
        print(f"ipuxl profile: {ns.script} created no Session: nothing to profile",
              file=sys.stderr)
        return code or 1
    os.makedirs(ns.out, exist_ok=True)
    for i, p in enumerate(captured):
        p.name = p.name or f"{os.path.basename(ns.script)} session {i + 1}"
        if len(captured) > 1:
            p.save(os.path.join(ns.out, f"profile_{i + 1}.json"))
    last = captured[-1]
    path = os.path.join(ns.out, "profile.json")
    last.save(path)
    print(last.summary())
    print(f"wrote {path}")
    if not ns.no_html:
        html = os.path.join(ns.out, "profile.html")
        if _write_html([last], html):
            print(f"wrote {html}")
    return code


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ipuxl", description="ipuxl: PopXL on a simulator")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run an unmodified PopXL script on ipuxl")
    run.add_argument("script", nargs="?", help="the PopXL script to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    pr = sub.add_parser("profile", help="profile a PopXL script on the IPU model, or compare "
                                        "two profiles")
    pr.add_argument("--compare", nargs=2, metavar=("A_JSON", "B_JSON"),
                    help="show two profile.json files side by side")
    pr.add_argument("--out", default=".", help="directory for profile.json / profile.html")
    pr.add_argument("--version", default="ipu2", choices=("ipu1", "ipu2", "ipu21"),
                    help="the IPU to model (default ipu2)")
    pr.add_argument("--tiles-per-ipu", type=int, default=None)
    pr.add_argument("--no-html", action="store_true", help="write profile.json only")
    pr.add_argument("script", nargs="?")
    pr.add_argument("args", nargs=argparse.REMAINDER)
    pp = sub.add_parser("poprun", help="run a PopXL script as several instances (processes) "
                                       "with mpirun, as poprun")
    pp.add_argument("--num-instances", type=int, required=True, help="processes to start")
    pp.add_argument("--num-replicas", type=int, required=True,
                    help="replicas of all instances together (divisible by --num-instances)")
    pp.add_argument("--ipus-per-replica", type=int, default=1)
    pp.add_argument("--mpi-args", default="", help="extra mpirun arguments, one string")
    pp.add_argument("--print-command", action="store_true", help="print the mpirun command")
    pp.add_argument("script", nargs="?")
    pp.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    if ns.command == "poprun":
        from .popdist.launcher import main as poprun_main

        return poprun_main(ns)
    if ns.command == "run":
        if ns.script is None:
            print("ipuxl run: no script given. Usage: ipuxl run SCRIPT.py [ARGS...]",
                  file=sys.stderr)
            return 2
        return _run(ns.script, ns.args)
    if ns.command == "profile":
        return _profile(ns)
    return 2


if __name__ == "__main__":
    sys.exit(main())
