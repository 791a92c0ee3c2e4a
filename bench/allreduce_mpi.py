"""All-reduce between 2 instances (processes): ipuxl's replicated_all_reduce
under ``Ir(replication="popdist")`` against mpi4py's own ``Allreduce`` on
buffers of the same size, and data-parallel MNIST step time with the
replicas split over 2 instances against one process.

Run it plainly; it starts itself under ``ipuxl poprun --num-instances 2``
(Open MPI ``mpirun``, shared memory on one host)::

    IPUXL_CORE_DIR=build/dev PYTHONPATH=python python3 bench/allreduce_mpi.py

For each size (float32, 1 KB .. 64 MB) the two are timed alternately, in
blocks of ``--reps`` calls, ``--rounds`` times; medians are printed with
the ratio ipuxl / mpi4py (1.0: as fast as MPI's own all-reduce). An ipuxl
all-reduce is one ``Session.run`` of a program holding one in-place
``replicated_all_reduce_`` of a variable: the run's host overhead, the
byte exchange between the instances (nonblocking point-to-point messages
polled against the collective timeout) and the reduction in C++ (in double,
in replica order, as one process computes it, so results do not depend on
the layout). mpi4py's ``Allreduce`` reduces in float32 inside MPI.

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


def bench_allreduce(a, comm, MPI, rank):
    import ipuxl as popxl
    import ipuxl.ops as ops

    # The cost of crossing instances for a tiny collective: the same
    # all-reduce of 4 bytes with groups of one replica (nothing crosses: no
    # callback into Python, no MPI) and with one group of all replicas.
    small = {}
    for name, size in (("local", 1), ("crossing", None)):
        ir = popxl.Ir(replication="popdist")
        with ir.main_graph:
            v = popxl.variable(np.zeros(1, np.float32), name="v")
            ops.collectives.replicated_all_reduce_(v, "add", ir.replica_grouping(group_size=size))
        with popxl.Session(ir, "ipu_model") as sess:
            ts = []
            for rnd in range(a.rounds + 1):
                comm.Barrier()
                t0 = time.perf_counter()
                for _ in range(a.reps * 10):
                    sess.run()
                if rnd:
                    ts.append((time.perf_counter() - t0) / (a.reps * 10))
        small[name] = max(comm.allgather(min(ts)))
    one, one_out = np.zeros(1, np.float32), np.empty(1, np.float32)
    ts = []
    for rnd in range(a.rounds + 1):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(a.reps * 10):
            comm.Allreduce(one, one_out, op=MPI.SUM)
        if rnd:
            ts.append((time.perf_counter() - t0) / (a.reps * 10))
    small["mpi4py"] = max(comm.allgather(min(ts)))
    if rank == 0:
        print(f"4-byte all-reduce (fastest of {a.rounds} blocks): Session.run with nothing "
              f"crossing {small['local'] * 1e6:.1f} us, "
              f"crossing instances {small['crossing'] * 1e6:.1f} us (the callback into Python "
              f"and the exchange: {(small['crossing'] - small['local']) * 1e6:.1f} us); mpi4py "
              f"Allreduce {small['mpi4py'] * 1e6:.1f} us", flush=True)
    rows = []
    for nbytes in SIZES:
        n = nbytes // 4
        ir = popxl.Ir(replication="popdist")
        with ir.main_graph:
            v = popxl.variable(np.zeros(n, np.float32), name="v")
            ops.collectives.replicated_all_reduce_(v, "add")
        sess = popxl.Session(ir, "ipu_model")
        sess.__enter__()
        send = np.zeros(n, np.float32)
        recv = np.empty(n, np.float32)
        reps = max(1, min(a.reps, (8 << 20) // nbytes))
        t_ipuxl, t_mpi = [], []
        for rnd in range(a.rounds + 1):
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(reps):
                sess.run()
            t1 = time.perf_counter()
            comm.Barrier()
            t2 = time.perf_counter()
            for _ in range(reps):
                comm.Allreduce(send, recv, op=MPI.SUM)
            t3 = time.perf_counter()
            if rnd:  # the first round warms up
                t_ipuxl.append((t1 - t0) / reps)
                t_mpi.append((t3 - t2) / reps)
        sess.__exit__(None, None, None)
        # Every instance's medians (and fastest blocks: the least disturbed by
        # other load); the slower instance's is the collective's time.
        ti = max(comm.allgather(_median(t_ipuxl)))
        tm = max(comm.allgather(_median(t_mpi)))
        bi = max(comm.allgather(min(t_ipuxl)))
        bm = max(comm.allgather(min(t_mpi)))
        rows.append((nbytes, ti, tm, bi, bm))
    if rank == 0:
        print(f"{'bytes':>10} {'ipuxl us':>10} {'mpi4py us':>10} {'ipuxl GB/s':>11} "
              f"{'mpi4py GB/s':>12} {'ipuxl/mpi4py':>13} {'(fastest blocks)':>17}")
        for nbytes, ti, tm, bi, bm in rows:
            print(f"{nbytes:>10} {ti * 1e6:>10.1f} {tm * 1e6:>10.1f} {nbytes / ti / 1e9:>11.3f} "
                  f"{nbytes / tm / 1e9:>12.3f} {ti / tm:>13.2f} {bi / bm:>17.2f}", flush=True)


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
        bench_allreduce(a, comm, MPI, rank)
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
    for total in ((2, 4) if a.mnist_steps else (2,)):
        # The all-reduce table once (R = 2: one replica per instance).
        args = [f"--rounds={a.rounds}", f"--reps={a.reps}", f"--mnist-steps={a.mnist_steps}",
                "--instance"] + (["--skip-allreduce"] if total != 2 else [])
        cmd, env = poprun_command(os.path.abspath(__file__), args, 2, total)
        code = code or subprocess.call(cmd, env=env)
    return code


if __name__ == "__main__":
    sys.exit(main())
