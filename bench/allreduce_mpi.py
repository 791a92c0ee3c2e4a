"""All-reduce between 2 instances (processes): ipuxl's replicated_all_reduce
under ``Ir(replication="popdist")`` against mpi4py's own ``Allreduce`` on
buffers of the same size, and data-parallel MNIST step time with the
replicas split over 2 instances against one process.

Run it plainly; it starts itself under ``ipuxl poprun --num-instances 2``
(Open MPI ``mpirun``, shared memory on one host)::

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/allreduce_mpi.py

For each size (float32, 1 KB .. 64 MB) the sides are timed in turn, in
blocks of ``--reps`` calls, ``--rounds`` times; medians are printed with
the ratio to mpi4py (1.0: as fast as MPI's own all-reduce). Two tables:

* per ``Session.run``: an ipuxl all-reduce is one ``Session.run`` of a
  program holding one in-place ``replicated_all_reduce_`` of a variable
  (the run's host overhead, ~2.5 us, included) against one
  ``Allreduce`` call;
* per all-reduce (what the issue asks: the all-reduce's own bandwidth): a
  program that all-reduces the variable K times in a repeat loop, in one
  ``Session.run``, against K ``Allreduce`` calls in a Python loop, K such
  that a block takes >= ~1 ms. ipuxl's time per all-reduce holds the
  exchange, the reduction and the loop's step; mpi4py's the Python call
  and MPI's all-reduce.

An all-reduce between instances (see cpp/exec/collectives.hpp): from 128 KB
a reduce-scatter (each instance reduces its slice of every member's
elements, in double, in replica order, as one process computes it, so
results do not depend on the layout) then an all-gather of the reduced
slices; below, every instance's inputs are all-gathered and each reduces
everything. The messages are nonblocking point-to-point, polled against
the collective timeout. Two ipuxl sides: ``ipuxl``, the engine
calling the C exchange (``ipuxl._mpi_exchange``, when built) without the
GIL, and ``ipuxl-mpi4py``, the fallback that calls back into Python and
mpi4py for each exchange. mpi4py's ``Allreduce`` reduces in float32 inside
MPI.

Then the MNIST training step (examples/mnist_data_parallel.py, global batch
64) at R = 2 and 4 replicas over 2 instances, next to R = 1, 2, 4 in one
process (measured by the launching process before it starts the
instances, so not interleaved with them: compare with care on a loaded
machine).
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.append(HERE)  # after examples/: bench/ has its own mnist_data_parallel.py

SIZES = [1 << k for k in range(10, 27, 2)]  # bytes: 1 KB .. 64 MB


def _median(xs):
    return float(np.median(np.asarray(xs)))


def _session(n, group_size, mpi4py_path, loop=1, one_process=None):
    """A Session whose program is one in-place all-reduce ("add") of a
    float32 variable of n elements over groups of ``group_size`` replicas
    (None: all), ``loop`` times in one run (ops.repeat).
    ``one_process``: that many replicas in this process alone (no
    instances). ``mpi4py_path``: its engine exchanges through mpi4py (the
    fallback path, a call back into Python per collective) even where the C
    exchange (ipuxl._mpi_exchange) is used."""
    import ipuxl as popxl
    import ipuxl.ops as ops
    from ipuxl import popdist

    ir = popxl.Ir(replication=one_process or "popdist")
    with ir.main_graph:
        v = popxl.variable(np.zeros(n, np.float32), name="v")
        rg = ir.replica_grouping(group_size=group_size) if group_size else None
        if loop == 1:
            ops.collectives.replicated_all_reduce_(v, "add", rg)
        else:  # `loop` all-reduces of v itself (by reference: no copies) in one run
            body = ir.create_empty_graph("body")
            with body:
                x = popxl.graph_input((n,), popxl.float32, "x", by_ref=True)
                ops.collectives.replicated_all_reduce_(x, "add", rg)
            ops.repeat(body, loop, inputs_dict={x: v})
    sess = popxl.Session(ir, "ipu_model")
    if mpi4py_path and not one_process:
        # Rebinds the engine's exchange (Session._distribute bound the C one).
        lay, comm = ir._popdist, popdist.communicator()
        # (exchange_mpi4py: the same on trees before the block exchange, so
        # that this script can time an older build side by side.)
        fn = getattr(comm, "exchange_blocks", None) or comm.exchange_mpi4py
        sess._engine.set_distributed(lay.offset, lay.total, fn)
    sess.__enter__()
    return sess


def bench_allreduce(a, comm, MPI, rank):
    from ipuxl import popdist

    native = popdist.communicator().native is not None
    sides = ["ipuxl", "ipuxl-mpi4py", "mpi4py"] if native else ["ipuxl-mpi4py", "mpi4py"]
    if rank == 0:
        print("ipuxl: the C exchange (ipuxl._mpi_exchange), no call back into Python" if native
              else f"ipuxl: only the mpi4py exchange ({popdist.communicator().native_reason})",
              flush=True)

    def block(fn, reps):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) / reps

    # The cost of crossing instances for a tiny collective: the same
    # all-reduce of 4 bytes with groups of one replica (nothing crosses: no
    # exchange) and with one group of all replicas, on each exchange, next
    # to mpi4py's Allreduce. Interleaved, fastest block of each.
    one, one_out = np.zeros(1, np.float32), np.empty(1, np.float32)
    small = {"local": _session(1, 1, False).run,
             "mpi4py Allreduce": lambda: comm.Allreduce(one, one_out, op=MPI.SUM)}
    if native:
        small["crossing, C exchange"] = _session(1, None, False).run
    small["crossing, mpi4py exchange"] = _session(1, None, True).run
    best = {k: [] for k in small}
    for rnd in range(a.rounds + 1):
        for k, fn in small.items():
            t = block(fn, a.reps * 10)
            if rnd:
                best[k].append(t)
    best = {k: max(comm.allgather(min(v))) for k, v in best.items()}
    if rank == 0:
        print(f"4-byte all-reduce, fastest of {a.rounds} interleaved blocks (us): "
              + "; ".join(f"{k} {v * 1e6:.1f}" for k, v in best.items())
              + " ('local': Session.run of the same program with nothing crossing instances)",
              flush=True)
    rows = []
    for nbytes in SIZES:
        n = nbytes // 4
        runs = {}
        if native:
            runs["ipuxl"] = _session(n, None, False).run
        runs["ipuxl-mpi4py"] = _session(n, None, True).run
        send = np.zeros(n, np.float32)
        recv = np.empty(n, np.float32)
        runs["mpi4py"] = lambda: comm.Allreduce(send, recv, op=MPI.SUM)
        reps = max(1, min(a.reps, (8 << 20) // nbytes))
        ts = {k: [] for k in runs}
        for rnd in range(a.rounds + 1):
            for k, fn in runs.items():
                t = block(fn, reps)
                if rnd:  # the first round warms up
                    ts[k].append(t)
        # Every instance's medians (and fastest blocks: the least disturbed by
        # other load); the slower instance's is the collective's time.
        med = {k: max(comm.allgather(_median(v))) for k, v in ts.items()}
        fast = {k: max(comm.allgather(min(v))) for k, v in ts.items()}
        rows.append((nbytes, med, fast))
    if rank == 0:
        head = f"{'bytes':>10}" + "".join(f" {k + ' us':>16}" for k in sides)
        head += "".join(f" {k + '/mpi4py':>20}" for k in sides[:-1])
        head += "".join(f" {'(fastest) ' + k:>24}" for k in sides[:-1])
        print(head)
        for nbytes, med, fast in rows:
            line = f"{nbytes:>10}" + "".join(f" {med[k] * 1e6:>16.1f}" for k in sides)
            line += "".join(f" {med[k] / med['mpi4py']:>20.2f}" for k in sides[:-1])
            line += "".join(f" {fast[k] / fast['mpi4py']:>24.2f}" for k in sides[:-1])
            print(line, flush=True)


def bench_allreduce_loop(a, comm, MPI, rank):
    """The all-reduce's own time: K all-reduces in one Session.run (a
    repeat loop over the variable, by reference) against K calls of
    mpi4py's Allreduce in a Python loop, K such that a block takes >= ~1 ms.
    Per all-reduce, ipuxl's time holds the exchange, the reduction and the
    loop's step (the run's fixed cost is spread over K); mpi4py's holds the
    Python call into mpi4py and MPI's all-reduce."""
    from ipuxl import popdist

    native = popdist.communicator().native is not None
    sides = ["ipuxl", "ipuxl-mpi4py", "mpi4py"] if native else ["ipuxl-mpi4py", "mpi4py"]
    total = int(os.environ[popdist.ENV["total"]])
    if total > comm.Get_size():
        # Several replicas per instance: the same all-reduce over all `total`
        # replicas in one process too (every instance runs its own copy at
        # the same time), the cost without crossing instances.
        sides.insert(-1, "one-process")

    def block(fn, k):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) / k

    rows = []
    for nbytes in SIZES:
        n = nbytes // 4
        k = max(4, int(1e-3 / (1.5e-6 + nbytes / 2e9)))
        runs = {}
        if native:
            runs["ipuxl"] = _session(n, None, False, k).run
        runs["ipuxl-mpi4py"] = _session(n, None, True, k).run
        if "one-process" in sides:
            runs["one-process"] = _session(n, None, False, k, one_process=total).run
        send = np.zeros(n, np.float32)
        recv = np.empty(n, np.float32)

        def mpi_loop(k=k):
            for _ in range(k):
                comm.Allreduce(send, recv, op=MPI.SUM)
        runs["mpi4py"] = mpi_loop
        ts = {s: [] for s in runs}
        for rnd in range(a.rounds + 1):
            for s, fn in runs.items():
                t = block(fn, k)
                if rnd:
                    ts[s].append(t)
        med = {s: max(comm.allgather(_median(v))) for s, v in ts.items()}
        fast = {s: max(comm.allgather(min(v))) for s, v in ts.items()}
        rows.append((nbytes, k, med, fast))
    if rank == 0:
        print(f"\nper all-reduce of {total} replicas over {comm.Get_size()} instances, K in one "
              f"run / K mpi4py calls of one replica's buffer ({a.rounds} rounds, medians; GB/s: "
              "bytes / time)")
        head = f"{'bytes':>10} {'K':>5}" + "".join(f" {s + ' us':>16}" for s in sides)
        head += "".join(f" {s + '/mpi4py':>20}" for s in sides[:-1])
        head += "".join(f" {'(fastest) ' + s:>24}" for s in sides[:-1])
        head += f" {'ipuxl GB/s':>11} {'mpi4py GB/s':>12}"
        print(head)
        for nbytes, k, med, fast in rows:
            line = f"{nbytes:>10} {k:>5}" + "".join(f" {med[s] * 1e6:>16.1f}" for s in sides)
            line += "".join(f" {med[s] / med['mpi4py']:>20.2f}" for s in sides[:-1])
            line += "".join(f" {fast[s] / fast['mpi4py']:>24.2f}" for s in sides[:-1])
            line += f" {nbytes / med[sides[0]] / 1e9:>11.2f} {nbytes / med['mpi4py'] / 1e9:>12.2f}"
            print(line, flush=True)


def mnist_steps(replicas, steps, warmup, feeds_seed=0):
    """Median seconds per training step (global batch 64) on ``replicas``
    (an int, or "popdist")."""
    import ipuxl as popxl
    import mnist_data_parallel as dp

    ir, (xs, ls), _, _ = dp.build_train_ir(replicas, 64, 0.01, dp.init_weights(0))
    r, local = ir.instance_replication_factor, 64 // ir.replication_factor
    shape = (r, local) if r > 1 else (local,)
    rng = np.random.default_rng(feeds_seed)
    feeds = {xs: rng.normal(size=shape + (784,)).astype(np.float32),
             ls: rng.integers(0, 10, size=shape).astype(np.int32)}
    times = []
    with popxl.Session(ir, "ipu_model") as s:
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            s.run(feeds)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
    return _median(times)


def instance_main(a):
    from ipuxl import popdist

    MPI = popdist.import_mpi()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if not a.skip_allreduce:
        if rank == 0:
            print(f"all-reduce between {comm.Get_size()} instances, float32, {a.rounds} rounds "
                  f"of up to {a.reps} calls (medians)", flush=True)
        total = int(os.environ[popdist.ENV["total"]])
        if not a.loop_only and total == comm.Get_size():
            bench_allreduce(a, comm, MPI, rank)
        if total in a.loop_replicas:
            bench_allreduce_loop(a, comm, MPI, rank)
    if a.mnist_steps:
        total = int(os.environ[popdist.ENV["total"]])
        t = max(comm.allgather(mnist_steps("popdist", a.mnist_steps, 3)))
        if rank == 0:
            print(f"MNIST step, R={total} over {comm.Get_size()} instances: {t * 1e3:.2f} ms",
                  flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--mnist-steps", type=int, default=20, help="0: skip the MNIST steps")
    ap.add_argument("--loop-replicas", default="2,4",
                    type=lambda v: [int(x) for x in v.split(",") if x],
                    help="replica counts (over 2 instances) of the per-all-reduce table")
    ap.add_argument("--loop-only", action="store_true",
                    help="only the K-all-reduces-in-one-run table (no per-Session.run table)")
    ap.add_argument("--instance", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--skip-allreduce", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.instance:
        return instance_main(a)
    from fma_peak import cpu_model
    from ipuxl.popdist.launcher import poprun_command

    print(f"CPU: {cpu_model()}; {os.cpu_count()} logical CPUs")
    one = {}
    if a.mnist_steps:
        for r in (1, 2, 4):
            one[r] = mnist_steps(r, a.mnist_steps, 3)
            print(f"MNIST step, R={r} in one process: {one[r] * 1e3:.2f} ms", flush=True)
    code = 0
    for total in (2, 4):
        # The per-Session.run table at R = 2 (one replica per instance); the
        # per-all-reduce table at the --loop-replicas; MNIST at R = 2 and 4.
        tables = total in a.loop_replicas or (total == 2 and not a.loop_only)
        if not tables and not a.mnist_steps:
            continue
        args = [f"--rounds={a.rounds}", f"--reps={a.reps}", f"--mnist-steps={a.mnist_steps}",
                f"--loop-replicas={','.join(map(str, a.loop_replicas))}", "--instance"]
        args += ["--loop-only"] if a.loop_only else []
        args += [] if tables else ["--skip-allreduce"]
        cmd, env = poprun_command(os.path.abspath(__file__), args, 2, total)
        code = code or subprocess.call(cmd, env=env)
    return code


if __name__ == "__main__":
    sys.exit(main())
