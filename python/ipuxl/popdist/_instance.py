"""One instance of ``ipuxl poprun``: ``python -m ipuxl.popdist._instance
script.py [args...]`` under ``mpirun``. Runs the script with the ``popxl`` /
``popdist`` import aliases; when it fails, aborts the whole MPI job so that
no other instance waits for it."""
import sys
import time
import traceback

_ABORT_GRACE_S = 1.0


def main(argv) -> int:
    from . import import_mpi, layout
    from ..cli import _run

    lay = layout()
    mpi = None
    if lay.instances > 1:
        mpi = import_mpi()  # MPI_Init here: fail early, before the script runs
    try:
        code = _run(argv[0], argv[1:])
    except BaseException:  # noqa: B902 - report any failure, then abort the job
        traceback.print_exc()
        code = 1
        print(f"ipuxl poprun: instance {lay.index} of {lay.instances} failed; stopping the "
              "other instances", file=sys.stderr, flush=True)
    if code and mpi is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        # Errors that every instance finds at once (collectives whose
        # instances disagree) are then printed by every instance before the
        # first abort stops them all.
        time.sleep(_ABORT_GRACE_S)
        mpi.COMM_WORLD.Abort(code if isinstance(code, int) and 0 < code < 256 else 1)
    return code


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: python -m ipuxl.popdist._instance SCRIPT.py [ARGS...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
