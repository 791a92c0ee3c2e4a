"""``ipuxl poprun``: start a PopXL program as several instances with Open
MPI's ``mpirun``, as Graphcore's ``poprun`` did.

``ipuxl poprun --num-instances N --num-replicas R [--mpi-args "..."]
script.py [args...]`` runs ``mpirun -np N python -m ipuxl.popdist._instance
script.py args...`` (one instance without ``--mpi-args``: the same without
mpirun, which it does not need): each instance gets the layout in ``POPDIST_*``
variables (see :mod:`ipuxl.popdist`) and runs the script with the ``popxl``
and ``popdist`` import aliases. On one host (no ``--host`` / ``--hostfile``
in ``--mpi-args``) MPI is kept on the loopback interface and shared memory,
and oversubscribes the cores when N exceeds them; each instance gets
``IPUXL_NUM_THREADS`` = CPUs / N kernel threads (unless set). As root,
mpirun needs ``--allow-run-as-root``, which is added.
"""
import os
import shlex
import shutil
import subprocess
import sys
from typing import List, Optional

from .. import settings
from . import ENV, TIMEOUT_ENV

__all__ = ["poprun_command", "main"]

INSTALL_MPIRUN = ("mpirun (Open MPI) was not found on PATH: install it (Debian/Ubuntu: "
                  "`apt-get install openmpi-bin libopenmpi-dev`)")
INSTALL_MPI4PY = ("mpi4py is not importable: `pip install mpi4py` (or `pip install "
                  "ipuxl[distributed]`); it needs an MPI library (Debian/Ubuntu: `apt-get install "
                  "openmpi-bin libopenmpi-dev`)")


class LaunchError(ValueError):
    """Bad ``ipuxl poprun`` arguments or a missing MPI installation."""


def _check_layout(num_instances: int, num_replicas: int, ipus_per_replica: int) -> None:
    if num_instances < 1:
        raise LaunchError(f"--num-instances must be at least 1, got {num_instances}")
    if num_replicas < 1:
        raise LaunchError(f"--num-replicas must be at least 1, got {num_replicas}")
    if ipus_per_replica < 1:
        raise LaunchError(f"--ipus-per-replica must be at least 1, got {ipus_per_replica}")
    if num_replicas % num_instances:
        raise LaunchError(
            f"--num-replicas {num_replicas} is not divisible by --num-instances {num_instances}: "
            "every instance holds the same number of replicas")


def _python_path() -> str:
    """PYTHONPATH for the instances: this ipuxl first, then the caller's."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    old = settings.child_environment().get("PYTHONPATH", "")
    return here + (os.pathsep + old if old else "")


def poprun_command(script: str, args: List[str], num_instances: int, num_replicas: int,
                   ipus_per_replica: int = 1, mpi_args: Optional[List[str]] = None,
                   mpirun: Optional[str] = None):
    """``(argv, env)`` of the mpirun command that runs ``script`` as
    ``num_instances`` instances (``LaunchError`` for a bad layout or a
    missing mpirun / mpi4py)."""
    import importlib.util

    _check_layout(num_instances, num_replicas, ipus_per_replica)
    mpi_args = list(mpi_args or [])
    env = settings.child_environment()
    env.update({ENV["total"]: str(num_replicas), ENV["instances"]: str(num_instances),
                ENV["ipus"]: str(ipus_per_replica), "PYTHONPATH": _python_path()})
    env.pop(ENV["index"], None)  # each instance's index is its MPI rank
    instance = [sys.executable, "-m", "ipuxl.popdist._instance", script] + list(args)
    if num_instances == 1 and not mpi_args:
        env[ENV["index"]] = "0"
        return instance, env  # one instance: no MPI needed
    mpirun = mpirun or shutil.which("mpirun")
    if mpirun is None:
        raise LaunchError(INSTALL_MPIRUN)
    if num_instances > 1 and importlib.util.find_spec("mpi4py") is None:
        raise LaunchError(INSTALL_MPI4PY)
    cmd = [mpirun, "-np", str(num_instances)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    one_host = not any(a.startswith(("--host", "-host", "-H", "--hostfile", "-hostfile",
                                     "--machinefile")) for a in mpi_args)
    if one_host:
        cpus = os.cpu_count() or 1
        if num_instances > cpus:
            cmd.append("--oversubscribe")
        if num_instances >= cpus:
            # Every core busy: MPI's waits yield the CPU, or a waiting instance
            # can spin through the time slice its peer needs to answer
            # (exchanges then took milliseconds on a loaded 2-CPU host).
            cmd += ["--mca", "mpi_yield_when_idle", "1"]
        # The cores shared out between the instances' kernel threads (as
        # OMP_NUM_THREADS under MPI), unless set.
        env.setdefault("IPUXL_NUM_THREADS", str(max(1, cpus // num_instances)))
        # Loopback and shared memory only; threads are not bound to cores.
        cmd += ["--bind-to", "none", "--mca", "btl", "self,vader,tcp",
                "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
    for name in (ENV["total"], ENV["instances"], ENV["ipus"], "PYTHONPATH", TIMEOUT_ENV,
                 "IPUXL_CORE_DIR", "IPUXL_NUM_THREADS"):
        if name in env:
            cmd += ["-x", name]
    cmd += mpi_args
    cmd += instance
    return cmd, env


def main(ns) -> int:
    """The ``ipuxl poprun`` subcommand (``ns`` from :mod:`ipuxl.cli`)."""
    if not ns.script:
        print("ipuxl poprun: no script given. Usage: ipuxl poprun --num-instances N "
              "--num-replicas R [--mpi-args ARGS] SCRIPT.py [ARGS...]", file=sys.stderr)
        return 2
    if not os.path.isfile(ns.script):
        print(f"ipuxl poprun: no such script: {ns.script}", file=sys.stderr)
        return 2
    try:
        cmd, env = poprun_command(ns.script, ns.args, ns.num_instances, ns.num_replicas,
                                  ns.ipus_per_replica, shlex.split(ns.mpi_args or ""))
    except LaunchError as e:
        print(f"ipuxl poprun: {e}", file=sys.stderr)
        return 2
    if ns.print_command:
        # A dry run: the command and the variables the launcher sets for it
        # (mpirun -x passes them on), then nothing runs.
        names = (ENV["total"], ENV["instances"], ENV["ipus"], ENV["index"], "PYTHONPATH",
                 "IPUXL_NUM_THREADS")
        added = [f"{k}={shlex.quote(env[k])}" for k in names if k in env]
        print(" ".join(added + [shlex.quote(c) for c in cmd]))
        return 0
    code = subprocess.call(cmd, env=env)
    if code:
        print(f"ipuxl poprun: mpirun exited with status {code} (an instance failed; its error "
              "is above)", file=sys.stderr)
    return code
