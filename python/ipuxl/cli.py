"""The ``ipuxl`` command.

``ipuxl run script.py [args...]`` runs an unmodified PopXL script on ipuxl:
``popxl`` and ``popxl_addons`` imports resolve to ipuxl (unless the real
packages are installed), ``sys.argv`` is ``[script.py, args...]``.

``ipuxl profile [options] script.py [args...]`` runs it the same way and
writes the IPU model's profile of every Session it creates
(``profile_N.json`` and the viewer's ``profile_N.html`` when there are
several) and of the main one (``--session N``, by
default the one that ran most) to ``profile.json`` / ``profile.html`` in
``--out``, lists the Sessions and prints a short table and whether the
program fits (memory per IPU and per tile, Streaming Memory per replica).
With ``--abstract`` the script's Irs are abstract builds
(:mod:`ipuxl._abstract`): variables without host data, so a release
configuration of a large model is built and profiled without its weights;
the script stops at its first run. ``ipuxl profile
--compare a.json b.json`` compares two profiles (a table, and
``compare.html``).

``ipuxl export popart-ir|onnx|poplar script.py [args...] --out FILE`` runs it
the same way and exports the Ir of its main Session (the one that ran most,
or ``--session N``): PopART's IR JSON dump, an ONNX opset 11 model of the
inference program, or (``poplar``, ``--out DIR``) a standalone Poplar C++
program with its Makefile and weights (see :mod:`ipuxl.export`).

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


def _run(script: str, args, abstract: bool = False) -> int:
    """Runs ``script`` as ``__main__``; its exit status. ``abstract``: the
    script builds abstract programs, and the first thing it asks values of
    (a Session's run, its weights) ends it, as the place where the
    program is complete (:mod:`ipuxl._abstract`)."""
    from . import compat
    from ._abstract import AbstractValueError

    if not os.path.isfile(script):
        print(f"ipuxl run: no such script: {script}", file=sys.stderr)
        return 2
    compat.install()
    sys.argv = [script] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except AbstractValueError as e:
        if not abstract:
            raise
        print(f"ipuxl profile --abstract: {os.path.basename(script)} stopped where it needed "
              f"values: {str(e).split(':', 2)[0]}", file=sys.stderr)
        return 0
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


def _write_html(profiles, path, **kw) -> bool:
    from .profile import write_html

    try:
        write_html(profiles, path, **kw)
    except ImportError as e:
        print(f"ipuxl profile: no HTML page: {e}", file=sys.stderr)
        return False
    return True


def _compare(ns) -> int:
    from . import profile as prof

    if len(ns.compare) != 2 or ns.script:
        print("ipuxl profile --compare takes exactly two profile.json files", file=sys.stderr)
        return 2
    try:
        a, b = (prof.load(p) for p in ns.compare)
    except (OSError, ValueError) as e:
        print(f"ipuxl profile: {e}", file=sys.stderr)
        return 2
    # Each labelled by its own name (script, arguments, session) and file.
    labels = [f"{p.name} [{os.path.basename(f)}]" if p.name else os.path.basename(f)
              for p, f in zip((a, b), ns.compare)]
    a.name, b.name = labels
    print(prof.compare(a, b))
    if not ns.no_html:
        os.makedirs(ns.out, exist_ok=True)
        path = os.path.join(ns.out, "compare.html")
        if _write_html([a, b], path, labels=labels):
            print(f"wrote {path}")
    return 0


def _session_line(p) -> str:
    t = p.totals
    fns = len(p.functions())
    return (f"{len(p.ops['name']):,} ops, {fns} Function(s), {p.runs} run(s), total "
            f"{t['total'] / 2**20:,.2f} MiB, code {t['code'] / 2**20:,.2f} MiB, "
            f"{p.cycles:,} cycles" + ("" if p.fits else
                                      f", OUT OF MEMORY on {p.overflow_tiles.size} tile(s)"))


def _main_session(profiles, wanted) -> int:
    """Index of the Session for profile.json / profile.html: ``--session
    N`` (1-based), else the one that ran most (a training script's training
    Session rather than its test Session), the first of equals."""
    if wanted is not None:
        return wanted - 1
    runs = [p.runs for p in profiles]
    return runs.index(max(runs))


def _profile(ns) -> int:
    from . import profile as prof
    from . import settings

    if ns.compare:
        return _compare(ns)
    if not ns.script:
        print("ipuxl profile: give a script to run, or --compare a.json b.json", file=sys.stderr)
        return 2
    if ns.session is not None and ns.session < 1:
        print(f"ipuxl profile: --session counts from 1, got {ns.session}", file=sys.stderr)
        return 2
    # The command's IPU (IPUXL_IPU_MODEL's keys over the command line's)
    # becomes the script's default IpuModel for the run, through the
    # settings rather than the environment.
    model = prof.IpuModel.from_env(prof.IpuModel(
        version=ns.version, tiles_per_ipu=ns.tiles_per_ipu, allow_out_of_memory=True))
    with settings.override(ipu_model=vars(model), abstract=ns.abstract), \
            prof.capture(model) as captured:
        code = _run(ns.script, ns.args, abstract=ns.abstract)
    profiles = [c.finish() for c in captured]
    if not profiles:
        print(f"ipuxl profile: {ns.script} created no Session: nothing to profile",
              file=sys.stderr)
        return code or 1
    if ns.session is not None and ns.session > len(profiles):
        print(f"ipuxl profile: --session {ns.session}, but {ns.script} created "
              f"{len(profiles)} Session(s)", file=sys.stderr)
        return 2
    return _write_sessions(ns, profiles, [c.device for c in captured],
                           [c.ir.replication_factor for c in captured]) or code


def _write_sessions(ns, profiles, devices, replicas) -> int:
    """profile_N.json / .html for each Session (when there are several),
    profile.json / .html for the main one, and the list on the console."""
    os.makedirs(ns.out, exist_ok=True)
    what = " ".join([os.path.basename(ns.script)] + list(ns.args))
    for i, p in enumerate(profiles):
        p.name = p.name or (f"{what} · session {i + 1}" if len(profiles) > 1 else what)
    main = _main_session(profiles, ns.session)
    several = len(profiles) > 1
    pages = [f"profile_{i + 1}.html" for i in range(len(profiles))] if several else []
    print(profiles[main].summary())
    print(profiles[main].fit_report(replicas[main]))
    print(f"ipuxl profile: {len(profiles)} Session(s) of {what}:")
    for i, p in enumerate(profiles):
        files = ""
        if several:
            p.save(os.path.join(ns.out, f"profile_{i + 1}.json"))
            files = f" -> profile_{i + 1}.json"
            if not ns.no_html:
                links = [{"label": f"session {k + 1}", "href": h} for k, h in enumerate(pages)
                         if k != i]
                if _write_html([p], os.path.join(ns.out, pages[i]), links=links):
                    files += f", {pages[i]}"
        mark = "  [main page]" if i == main else ""
        print(f"  session {i + 1} ({devices[i]}): {_session_line(p)}{files}{mark}")
    path = os.path.join(ns.out, "profile.json")
    profiles[main].save(path)
    print(f"wrote {path}" + (f" (session {main + 1}; --session N picks another)"
                             if several else ""))
    if not ns.no_html:
        html = os.path.join(ns.out, "profile.html")
        links = [{"label": f"session {k + 1}", "href": h} for k, h in enumerate(pages)]
        if _write_html([profiles[main]], html, links=links):
            print(f"wrote {html}")
    return 0


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("ipuxl")
        except PackageNotFoundError:
            pass
    except ImportError:
        pass
    return "0.1.0 (source checkout)"


def build_parser() -> argparse.ArgumentParser:
    """The ``ipuxl`` command's arguments (every one with its help)."""
    parser = argparse.ArgumentParser(prog="ipuxl", description="ipuxl: PopXL on a simulator")
    parser.add_argument("--version", action="version", version=f"ipuxl {_version()}",
                        help="print ipuxl's version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run an unmodified PopXL script on ipuxl")
    run.add_argument("script", nargs="?", help="the PopXL script to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    pr = sub.add_parser(
        "profile", help="profile a PopXL script on the IPU model, or compare two profiles",
        description="Runs SCRIPT with ARGS on ipuxl and writes the IPU model's profile of "
                    "every Session it creates (profile_N.json / profile_N.html when there "
                    "are several) and of the main one (profile.json / profile.html), and "
                    "prints a summary; or compares two profile.json files.")
    pr.add_argument("--compare", nargs=2, metavar=("A_JSON", "B_JSON"),
                    help="compare two profile.json files: a table here and compare.html")
    pr.add_argument("--out", default=".", help="directory for the json and html files "
                                                "(default: the current directory)")
    pr.add_argument("--session", type=int, default=None, metavar="N",
                    help="the Session (1 = the first the script creates) for profile.json / "
                         "profile.html (default: the one that ran most)")
    pr.add_argument("--version", "--ipu-version", dest="version", default="ipu2",
                    choices=("ipu1", "ipu2", "ipu21"),
                    help="the IPU to model (default ipu2); `ipuxl --version` prints ipuxl's")
    pr.add_argument("--tiles-per-ipu", type=int, default=None, metavar="T",
                    help="model T tiles per IPU instead of the whole chip (1472 on ipu2)")
    pr.add_argument("--no-html", action="store_true", help="write the json files only")
    pr.add_argument("--abstract", action="store_true",
                    help="build the script's programs without host data: variables keep their "
                         "shape and dtype only (popxl-addons' factories make no data), so a "
                         "large model profiles in seconds; the script ends at its first run or "
                         "weight copy, which an abstract Session refuses")
    pr.add_argument("script", nargs="?", help="the PopXL script to run and profile")
    pr.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    ex = sub.add_parser(
        "export", help="export a PopXL script's program: PopART IR JSON, ONNX or Poplar C++",
        description="Runs SCRIPT with ARGS on ipuxl and exports the Ir of its main Session "
                    "(the one that ran most): popart-ir writes PopART's IR JSON dump "
                    "(POPART_IR_DUMP), onnx an ONNX opset 11 model of the inference program "
                    "with the variables' values when the script ended, poplar a directory "
                    "with a standalone Poplar C++ program (program.cpp, program.hpp, "
                    "codelets.cpp if needed, Makefile, CMakeLists.txt, weights.npz with the "
                    "variables' values when the script ended): build it with `eval \"$(ipuxl "
                    "poplar-env)\"; make -C DIR` and run `DIR/program --inputs in.npz "
                    "--outputs out.npz` (docs/export.md).")
    ex.add_argument("format", choices=("popart-ir", "onnx", "poplar"), help="what to write")
    ex.add_argument("--out", default=None, metavar="FILE",
                    help="the file (poplar: the directory) to write; may also come last, after "
                         "the script's arguments")
    ex.add_argument("--no-main", action="store_true",
                    help="poplar: leave main() out of program.cpp (build the programs from your "
                         "own host code through buildPrograms() in program.hpp)")
    ex.add_argument("--session", type=int, default=None, metavar="N",
                    help="the Session to export (1 = the first the script creates)")
    ex.add_argument("script", help="the PopXL script to run")
    ex.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    pp = sub.add_parser("poprun", help="run a PopXL script as several instances (processes) "
                                       "with mpirun, as poprun")
    pp.add_argument("--num-instances", type=int, required=True, help="processes to start")
    pp.add_argument("--num-replicas", type=int, required=True,
                    help="replicas of all instances together (divisible by --num-instances)")
    pp.add_argument("--ipus-per-replica", type=int, default=1,
                    help="IPUs each replica uses (default 1)")
    pp.add_argument("--mpi-args", default="", help="extra mpirun arguments, one string")
    pp.add_argument("--print-command", action="store_true",
                    help="a dry run: print the mpirun command and run nothing")
    pp.add_argument("script", nargs="?", help="the PopXL script each instance runs")
    pp.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    pe = sub.add_parser("poplar-env", help="print the shell lines that put ipuxl's Poplar "
                                            "(headers, libpoplar.so, PopLibs, popc) on the paths, "
                                            "as the SDK's enable.sh: eval \"$(ipuxl poplar-env)\"")
    pe.add_argument("--build-dir", default=None,
                    help="a developer build (scripts/dev_build.sh DIR); default: IPUXL_CORE_DIR "
                         "or the installed package")
    return parser


def main(argv=None) -> int:
    ns = build_parser().parse_args(argv)
    if ns.command == "poplar-env":
        from .poplar_env import shell_lines

        try:
            print(shell_lines(ns.build_dir))
        except FileNotFoundError as e:
            print(f"ipuxl poplar-env: {e}", file=sys.stderr)
            return 1
        return 0
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
    if ns.command == "export":
        from .export.command import run_export

        return run_export(ns, _run)
    return 2


if __name__ == "__main__":
    sys.exit(main())
