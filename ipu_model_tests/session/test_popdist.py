"""Multi-instance replication (``Ir(replication="popdist")``, ``ipuxl poprun``).

In-process tests of the popdist layout and the launcher's checks need no
MPI. The tests that start instances need Open MPI's ``mpirun`` and
``mpi4py`` (Debian: ``apt-get install openmpi-bin libopenmpi-dev``; PyPI:
``pip install mpi4py``) and are skipped, saying so, without them. They run
over loopback / shared memory on one host, each within a subprocess
timeout, and compare against NumPy and against one process with the same
replicas.
"""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import popdist
from ipuxl.popdist.launcher import LaunchError, poprun_command
from repo_modules import load

pytestmark = pytest.mark.slow  # starts MPI jobs of several processes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mnist_data_parallel.py"
HAVE_MPI = shutil.which("mpirun") is not None and importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(
    not HAVE_MPI, reason="needs Open MPI's mpirun and mpi4py (apt-get install openmpi-bin "
                         "libopenmpi-dev; pip install mpi4py)")
POPDIST_VARS = ("POPDIST_NUM_TOTAL_REPLICAS", "POPDIST_NUM_INSTANCES", "POPDIST_INSTANCE_INDEX",
                "POPDIST_NUM_IPUS_PER_REPLICA")


@pytest.fixture
def layout_env(monkeypatch):
    """Sets a popdist layout in this process (cleared afterwards)."""
    for k in POPDIST_VARS:
        monkeypatch.delenv(k, raising=False)

    def set_layout(total, instances, index=None):
        monkeypatch.setenv("POPDIST_NUM_TOTAL_REPLICAS", str(total))
        monkeypatch.setenv("POPDIST_NUM_INSTANCES", str(instances))
        if index is not None:
            monkeypatch.setenv("POPDIST_INSTANCE_INDEX", str(index))
        else:
            monkeypatch.delenv("POPDIST_INSTANCE_INDEX", raising=False)
    return set_layout


def _env(**extra):
    env = dict(os.environ)
    for k in ("PYTHONPATH", "IPUXL_CORE_DIR"):
        if env.get(k):
            env[k] = os.pathsep.join(os.path.abspath(p) if p else p
                                     for p in env[k].split(os.pathsep))
    for k in POPDIST_VARS:
        env.pop(k, None)
    env.update(extra)
    return env


def _native_built() -> bool:
    """Whether ipuxl._mpi_exchange was built (found without importing it:
    importing it initialises MPI in this process)."""
    d = os.environ.get("IPUXL_CORE_DIR")
    if d:
        return any(Path(d).glob("_mpi_exchange*.so"))
    return importlib.util.find_spec("ipuxl._mpi_exchange") is not None


@pytest.fixture(params=["native", "mpi4py"])
def exchange(request):
    """Each test that starts instances runs on both exchanges: the C module
    (when built) and the pure-mpi4py fallback. Returns the environment
    setting to pass to the instances."""
    if request.param == "native" and not _native_built():
        pytest.skip("ipuxl._mpi_exchange was not built (ipuxl built without an MPI library's "
                    "headers or without mpi4py)")
    return {"IPUXL_POPDIST_EXCHANGE": request.param}


def _poprun(script, instances, replicas, *args, timeout=240, **env):
    return subprocess.run(
        [sys.executable, "-m", "ipuxl", "poprun", "--num-instances", str(instances),
         "--num-replicas", str(replicas), str(script), *map(str, args)],
        capture_output=True, text=True, env=_env(**env), timeout=timeout, cwd=ROOT)


# ---------------------------------------------------------------- no MPI needed
def test_popdist_api_reads_the_launcher_layout(layout_env):
    layout_env(8, 2, 1)
    assert popdist.isPopdistEnvSet()
    assert (popdist.getNumTotalReplicas(), popdist.getNumInstances(), popdist.getInstanceIndex(),
            popdist.getNumLocalReplicas(), popdist.getReplicaIndexOffset(),
            popdist.getNumIpusPerReplica()) == (8, 2, 1, 4, 4, 1)


def test_popdist_index_falls_back_to_the_mpi_rank(layout_env, monkeypatch):
    layout_env(4, 2)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    assert popdist.getInstanceIndex() == 1 and popdist.getReplicaIndexOffset() == 2


def test_popdist_bad_layouts_are_refused(layout_env, monkeypatch):
    assert not popdist.isPopdistEnvSet()
    with pytest.raises(RuntimeError, match="instance layout is not set.*ipuxl poprun"):
        popdist.getNumInstances()
    with pytest.raises(RuntimeError, match="instance layout is not set"):
        popxl.Ir(replication="popdist")
    layout_env(3, 2, 0)
    with pytest.raises(ValueError, match="3 replicas are not divisible by "
                                         "POPDIST_NUM_INSTANCES=2 instances"):
        popxl.Ir(replication="popdist")
    layout_env(4, 2, 2)
    with pytest.raises(ValueError, match=r"instance index 2 is outside \[0, 2\)"):
        popdist.layout()
    layout_env(4, 2)
    monkeypatch.delenv("OMPI_COMM_WORLD_RANK", raising=False)
    monkeypatch.delenv("PMIX_RANK", raising=False)
    monkeypatch.delenv("PMI_RANK", raising=False)
    with pytest.raises(RuntimeError, match="no instance index"):
        popdist.layout()
    layout_env("x", 2, 0)
    with pytest.raises(ValueError, match="POPDIST_NUM_TOTAL_REPLICAS='x' is not an integer"):
        popdist.layout()


def test_one_instance_popdist_ir_is_plain_replication(layout_env):
    """With one instance, Ir("popdist") is Ir(R): no MPI; the same results."""
    layout_env(4, 1)
    ir = popxl.Ir(replication="popdist")
    assert ir.replication_factor == 4 and ir.instance_replication_factor == 4
    with pytest.raises(RuntimeError, match="takes its replication from popdist"):
        ir.replication_factor = 2
    with ir.main_graph:
        xs = popxl.h2d_stream((3,), popxl.float32, "x")
        y = ops.collectives.replicated_all_reduce(ops.host_load(xs), "max",
                                                  ir.replica_grouping(stride=2))
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    with popxl.Session(ir, "ipu_model") as s:
        out = s.run({xs: x})[ys]
    want = np.stack([np.maximum(x[0], x[2]), np.maximum(x[1], x[3])] * 2)
    np.testing.assert_array_equal(out, want)


def test_launcher_checks_the_layout_and_mpi(monkeypatch, tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('never')\n")
    with pytest.raises(LaunchError, match="--num-replicas 3 is not divisible by --num-instances 2"):
        poprun_command(str(script), [], 2, 3, mpirun="/bin/true")
    with pytest.raises(LaunchError, match="--num-instances must be at least 1"):
        poprun_command(str(script), [], 0, 2, mpirun="/bin/true")
    monkeypatch.setenv("PATH", str(tmp_path))  # no mpirun on PATH
    with pytest.raises(LaunchError, match="mpirun .* not found.*apt-get install openmpi-bin "
                                          "libopenmpi-dev"):
        poprun_command(str(script), [], 2, 2)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mpi4py" else real_find_spec(name, *a))
    with pytest.raises(LaunchError, match=r"mpi4py is not importable: `pip install mpi4py`"):
        poprun_command(str(script), [], 2, 2, mpirun="/bin/true")
    # One instance needs no MPI: the instance runner alone.
    cmd, env = poprun_command(str(script), [], 1, 2)
    assert cmd[1:3] == ["-m", "ipuxl.popdist._instance"] and env["POPDIST_INSTANCE_INDEX"] == "0"
    # The command line itself: N processes, the layout exported, the instance runner
    # (built, not run: it only needs mpi4py to be findable, installed or not).
    monkeypatch.undo()
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "mpi4py" else real_find_spec(name, *a))
    cmd, env = poprun_command(str(script), ["--a", "1"], 2, 4, mpirun="/usr/bin/mpirun")
    assert cmd[:3] == ["/usr/bin/mpirun", "-np", "2"]
    assert cmd[-5:] == ["-m", "ipuxl.popdist._instance", str(script), "--a", "1"]
    assert env["POPDIST_NUM_TOTAL_REPLICAS"] == "4" and env["POPDIST_NUM_INSTANCES"] == "2"
    assert "POPDIST_INSTANCE_INDEX" not in env


def test_poprun_cli_reports_bad_arguments(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('never')\n")
    r = _poprun(script, 2, 3, timeout=60)
    assert r.returncode == 2
    assert "--num-replicas 3 is not divisible by --num-instances 2" in r.stderr
    r = _poprun(tmp_path / "missing.py", 2, 2, timeout=60)
    assert r.returncode == 2 and "no such script" in r.stderr


# ---------------------------------------------------------------- with MPI
COLLECTIVES = textwrap.dedent("""
    import numpy as np
    import popxl, popxl.ops as ops
    import popdist

    ir = popxl.Ir(replication="popdist")
    G, R, off = ir.replication_factor, ir.instance_replication_factor, popdist.getReplicaIndexOffset()
    assert (G, R) == ({total}, {total} // 2), (G, R)
    rng = np.random.default_rng(5)
    cases = []  # (stream, oracle of every global replica's output)
    groupings = [("all", None), ("stride1", ir.replica_grouping(group_size=2)),
                 ("stride2", ir.replica_grouping(stride=2, group_size=2))] if G == 4 else \\
        [("all", None)]

    def groups(rg):
        a = rg.assignment if rg is not None else [0] * G
        return [[r for r in range(G) if a[r] == g] for g in range(max(a) + 1)], a

    feeds = {{}}
    with ir.main_graph:
        for dt, npd in ((popxl.float32, np.float32), (popxl.int32, np.int32),
                        (popxl.float16, np.float16)):
            if dt == popxl.int32:
                x = rng.integers(-3, 4, size=(G, 5)).astype(npd)
            else:
                x = rng.uniform(-2, 2, size=(G, 5)).astype(npd)
            xs = popxl.h2d_stream((5,), dt, f"x_{{dt.name}}")
            t = ops.host_load(xs)
            feeds[xs] = x[off:off + R] if R > 1 else x[off]
            for gname, rg in groupings:
                members, a = groups(rg)
                ops_list = ["add", "mean", "mul", "min", "max", "square_add"]
                if dt == popxl.int32:
                    ops_list += ["and", "or"]
                for op in ops_list:
                    if dt == popxl.int32 and op == "mean":
                        continue
                    y = ops.collectives.replicated_all_reduce(t, op, rg)
                    s = popxl.d2h_stream(y.shape, y.dtype, f"ar_{{op}}_{{dt.name}}_{{gname}}")
                    ops.host_store(s, y)
                    w = x.astype(np.float64)
                    want = np.empty_like(w)
                    for m in members:
                        v = w[m]
                        red = {{"add": v.sum(0), "mean": v.mean(0), "mul": v.prod(0), "min": v.min(0),
                               "max": v.max(0), "square_add": (v * v).sum(0),
                               "and": np.all(v != 0, 0), "or": np.any(v != 0, 0)}}[op]
                        want[m] = red
                    cases.append((s, want.astype(npd), f"all-reduce {{op}} {{dt.name}} {{gname}}"))
                y = ops.collectives.replicated_all_gather(t, group=rg)
                s = popxl.d2h_stream(y.shape, y.dtype, f"ag_{{dt.name}}_{{gname}}")
                ops.host_store(s, y)
                cases.append((s, np.stack([x[m].reshape(-1) for m in
                                           (members[a[r]] for r in range(G))]),
                              f"all-gather {{dt.name}} {{gname}}"))
                y = ops.collectives.replicated_reduce_scatter(t, "add", rg)
                s = popxl.d2h_stream(y.shape, y.dtype, f"rs_{{dt.name}}_{{gname}}")
                ops.host_store(s, y)
                k = -(-5 // len(members[0]))
                want = []
                for r in range(G):
                    m = members[a[r]]
                    full = np.zeros(k * len(m))
                    full[:5] = x[m].astype(np.float64).sum(0)
                    rank = m.index(r)
                    want.append(full[rank * k:(rank + 1) * k])
                cases.append((s, np.stack(want).astype(npd), f"reduce-scatter {{dt.name}} {{gname}}"))
                y = ops.collectives.replica_sharded_slice(t, rg)
                s = popxl.d2h_stream(y.shape, y.dtype, f"sl_{{dt.name}}_{{gname}}")
                ops.host_store(s, y)
                want = []
                for r in range(G):
                    m = members[a[r]]
                    full = np.zeros(k * len(m), npd)
                    full[:5] = x[r]
                    rank = m.index(r)
                    want.append(full[rank * k:(rank + 1) * k])
                cases.append((s, np.stack(want), f"replica_sharded_slice {{dt.name}} {{gname}}"))
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run(feeds)
    for s, want, what in cases:
        got = out[s].reshape((R,) + want.shape[1:])
        mine = want[off:off + R]
        tol = 2e-3 if mine.dtype == np.float16 else 1e-6
        if mine.dtype.kind == "f":
            np.testing.assert_allclose(got, mine, rtol=tol, atol=tol, err_msg=what)
        else:
            np.testing.assert_array_equal(got, mine, err_msg=what)
    # one write (atomic on a pipe): mpirun may interleave print()'s pieces
    import os
    os.write(1, f"OK instance {{popdist.getInstanceIndex()}}: {{len(cases)}} collectives\\n".encode())
""")


@needs_mpi
@pytest.mark.parametrize("total", [2, 4])
def test_collectives_across_instances_match_numpy(tmp_path, total, exchange):
    script = tmp_path / "collectives.py"
    script.write_text(COLLECTIVES.format(total=total))
    r = _poprun(script, 2, total, **exchange)
    assert r.returncode == 0, r.stdout + r.stderr
    found = re.findall(r"OK instance (\d): (\d+) collectives", r.stdout)
    assert sorted(i for i, _ in found) == ["0", "1"], r.stdout + r.stderr
    assert int(found[0][1]) >= (60 if total == 4 else 20)


LARGE_ALL_REDUCE = textwrap.dedent("""
    import os
    import numpy as np
    import popxl, popxl.ops as ops
    import popdist
    from ipuxl._core_loader import core

    # All-reduces large enough for the split path between instances (each
    # instance reduces its slice, then the slices are all-gathered; sizes
    # that do not divide by the instances) and small ones (every instance
    # reduces everything), in place and not, over groupings that cross
    # instances: the bits of the member-order fold in double (int64 for
    # integers) that one process computes, rounded once.
    ir = popxl.Ir(replication="popdist")
    G, R, off = ir.replication_factor, ir.instance_replication_factor, popdist.getReplicaIndexOffset()
    rng = np.random.default_rng(11)
    groupings = [("all", None)]
    if G == 4:
        groupings += [("stride2", ir.replica_grouping(stride=2, group_size=2)),
                      ("stride1", ir.replica_grouping(group_size=2))]
    feeds, cases, calls = {{}}, [], 0
    with ir.main_graph:
        for dt, npd in ((popxl.float32, np.float32), (popxl.float16, np.float16),
                        (popxl.int32, np.int32)):
            for n in (3, 4096, 70001):  # 70001: split for the three dtypes
                if dt == popxl.int32:
                    x = rng.integers(-1000, 1000, size=(G, n)).astype(npd)
                else:  # near 1, so that products of 4 stay in range
                    x = rng.uniform(0.5, 1.5, size=(G, n)).astype(npd)
                xs = popxl.h2d_stream((n,), dt, f"x_{{dt.name}}_{{n}}")
                feeds[xs] = x[off:off + R] if R > 1 else x[off]
                loaded = ops.host_load(xs)
                w = x.astype(np.int64 if dt == popxl.int32 else np.float64)
                for gname, rg in groupings:
                    a = rg.assignment if rg is not None else [0] * G
                    for op in ("add", "mean", "mul", "min", "max", "square_add"):
                        if dt == popxl.int32 and op == "mean":
                            continue
                        for inplace in (False, True):
                            t = ops.identity(loaded) if inplace else loaded
                            y = (ops.collectives.replicated_all_reduce_ if inplace else
                                 ops.collectives.replicated_all_reduce)(t, op, rg)
                            s = popxl.d2h_stream(y.shape, y.dtype,
                                                 f"ar_{{op}}_{{dt.name}}_{{n}}_{{gname}}_{{inplace}}")
                            ops.host_store(s, y)
                            want = np.empty_like(w)
                            for g in set(a):
                                m = [r for r in range(G) if a[r] == g]
                                v = w[m[0]] * w[m[0]] if op == "square_add" else w[m[0]].copy()
                                for r in m[1:]:
                                    v = {{"add": v + w[r], "mean": v + w[r], "mul": v * w[r],
                                         "min": np.minimum(v, w[r]), "max": np.maximum(v, w[r]),
                                         "square_add": v + w[r] * w[r]}}[op]
                                if op == "mean":
                                    v = v / len(m)
                                want[m] = v
                            if dt == popxl.float16:  # the core rounds via float32
                                want = want.astype(np.float32)
                            cases.append((s, want.astype(npd),
                                          f"{{op}} {{dt.name}} {{n}} {{gname}} {{inplace}}"))
                            # Exchanges it makes: none when no group crosses
                            # instances; else the handshake and two when split
                            # (split_all_reduce_bytes and more per replica,
                            # every group on every instance), else one.
                            homes = [{{r // R for r in range(G) if a[r] == g}} for g in set(a)]
                            if any(len(h) > 1 for h in homes):
                                split = all(len(h) == G // R for h in homes)
                                calls += 1 + (2 if split and n * x.itemsize >= core.split_all_reduce_bytes
                                              else 1)
    c = popdist.communicator()
    count = lambda: c.native.calls if c.native is not None else c.calls
    with popxl.Session(ir, "ipu_model") as sess:
        before = count()
        out = sess.run(feeds)
        # IPUXL_CHECK_HOST_PASSES runs the program without host passes too.
        runs = 1 if sess._host_pass_checker is None else 2
        assert count() - before == calls * runs, (count() - before, calls, runs)
    for s, want, what in cases:
        got = out[s].reshape((R,) + want.shape[1:])
        np.testing.assert_array_equal(got.view(np.uint8), want[off:off + R].view(np.uint8),
                                      err_msg=str(what))
    os.write(1, f"OK instance {{popdist.getInstanceIndex()}}: {{len(cases)}} all-reduces\\n".encode())
""")


@needs_mpi
@pytest.mark.parametrize("instances,total", [(2, 2), (2, 4), (4, 4)])
def test_large_all_reduces_across_instances_are_bit_exact(tmp_path, instances, total, exchange):
    """The split all-reduce between instances (reduce-scatter, then
    all-gather of the reduced slices) and the small one give the bits of
    one process's member-order fold, on both exchanges, for every reduction
    operator, float32 / float16 / int32, in place or not, sizes that do not
    divide by the instances, groupings that cross instances (and one that
    does not, at 2 instances), over 2 and 4 instances."""
    script = tmp_path / "large_all_reduce.py"
    script.write_text(LARGE_ALL_REDUCE.format())
    r = _poprun(script, instances, total, **exchange)
    assert r.returncode == 0, r.stdout + r.stderr
    found = re.findall(r"OK instance (\d): (\d+) all-reduces", r.stdout)
    assert sorted(i for i, _ in found) == [str(i) for i in range(instances)], r.stdout + r.stderr
    assert int(found[0][1]) == 3 * 17 * 2 * (3 if total == 4 else 1), r.stdout

@needs_mpi
@pytest.mark.parametrize("total", [2, 4])
def test_training_on_two_instances_matches_one_process(tmp_path, total, exchange):
    """The same data-parallel MNIST run on 1 process x R replicas and on
    2 instances x R/2 replicas: the same weights (to float32 rounding; in
    fact bit for bit, as the reductions run in the same order), on both
    instances."""
    dp = load("examples/mnist_data_parallel.py")
    steps, batch = 12, 32
    data = dp.get_data("synthetic", steps * batch, 10, 0)[0]
    want, _, _ = dp.train(total, data, batch, 0.05, steps, 0, verbose=False)
    save = tmp_path / "w_{instance}.npz"
    r = _poprun(EXAMPLE, 2, total, "--replicas", "popdist", "--dataset", "synthetic",
                "--limit-steps", steps, "--global-batch", batch, "--test-size", 10,
                "--save", save, **exchange)
    assert r.returncode == 0, r.stdout + r.stderr
    for i in (0, 1):
        got = np.load(str(save).format(instance=i))
        for k, w in want.items():
            np.testing.assert_allclose(got[k], w, rtol=1e-6, atol=1e-7,
                                       err_msg=f"{k} on instance {i}")
    assert not np.array_equal(want["W0"], dp.init_weights(0)["W0"])  # it trained


PATHS = textwrap.dedent("""
    import sys
    import numpy as np
    import popxl, popxl.ops as ops
    import popdist

    ir = popxl.Ir(replication="popdist")
    with ir.main_graph:
        v = popxl.variable(np.full(3, popdist.getInstanceIndex() + 1.0, np.float32))
        ops.collectives.replicated_all_reduce_(v)
    sess = popxl.Session(ir, "ipu_model")
    c = popdist.communicator()
    count = lambda: (c.calls, c.native.calls if c.native is not None else 0)
    with sess:
        before = count()
        sess.run()
        sess.run()
        after = count()
        got = sess.get_tensor_data(v)
    line = " ".join(map(str, ("PATH", popdist.getInstanceIndex(),
                              "native" if c.native is not None else "mpi4py",
                              after[0] - before[0], after[1] - before[1], got.tolist())))
    with open(sys.argv[1].format(instance=popdist.getInstanceIndex()), "w") as f:
        f.write(line)
""")


@needs_mpi
def test_the_exchange_path_is_the_one_asked_for(tmp_path, exchange):
    """With the C exchange, a collective between instances never calls back
    into Python (the Communicator's Python method is not called; the C
    function is); with mpi4py, it does. Both give the sums."""
    script = tmp_path / "paths.py"
    script.write_text(PATHS)
    out = tmp_path / "path_{instance}.txt"
    r = _poprun(script, 2, 2, out, **exchange)
    assert r.returncode == 0, r.stdout + r.stderr
    mode = exchange["IPUXL_POPDIST_EXCHANGE"]
    # two runs: 1 + 2 = 3, then 3 + 3 = 6; each all-reduce is two exchanges
    # (the handshake, then the data)
    want = (0, 4) if mode == "native" else (4, 0)
    for i in (0, 1):
        line = Path(str(out).format(instance=i)).read_text()
        _, index, path, py_calls, c_calls, got = line.split(" ", 5)
        assert index == str(i), line
        assert (path, int(py_calls), int(c_calls)) == (mode,) + want, r.stdout
        assert got == "[6.0, 6.0, 6.0]", r.stdout


@needs_mpi
def test_without_the_c_module_the_mpi4py_path_is_used(tmp_path):
    """An ipuxl built without MPI's headers (no ipuxl._mpi_exchange): `auto`
    falls back to mpi4py and gives the same sums; `native` says what is
    missing. Simulated with a core directory holding only the core."""
    core_dir = os.environ.get("IPUXL_CORE_DIR")
    if not core_dir:
        pytest.skip("needs a developer build (IPUXL_CORE_DIR): the test hides the C exchange module "
                    "by pointing IPUXL_CORE_DIR at a folder holding only _core; an installed "
                    "package cannot hide it")
    only_core = tmp_path / "core_only"
    only_core.mkdir()
    for so in Path(core_dir).glob("_core*.so"):
        (only_core / so.name).symlink_to(so.resolve())
    script = tmp_path / "paths.py"
    script.write_text(PATHS)
    out = tmp_path / "path_{instance}.txt"
    r = _poprun(script, 2, 2, out, IPUXL_CORE_DIR=str(only_core), IPUXL_POPDIST_EXCHANGE="auto")
    assert r.returncode == 0, r.stdout + r.stderr
    for i in (0, 1):
        line = Path(str(out).format(instance=i)).read_text()
        # 2 runs, each a handshake and the data exchange
        assert line.split(" ", 5)[2:] == ["mpi4py", "4", "0", "[6.0, 6.0, 6.0]"], line
    r = _poprun(script, 2, 2, out, timeout=120, IPUXL_CORE_DIR=str(only_core),
                IPUXL_POPDIST_EXCHANGE="native")
    assert r.returncode != 0
    assert "IPUXL_POPDIST_EXCHANGE=native, but ipuxl._mpi_exchange was not built" in r.stderr, \
        r.stderr


@needs_mpi
def test_a_bad_exchange_setting_is_refused(tmp_path):
    script = tmp_path / "paths.py"
    script.write_text(PATHS)
    r = _poprun(script, 2, 2, tmp_path / "unused_{instance}", timeout=120,
                IPUXL_POPDIST_EXCHANGE="fast")
    assert r.returncode != 0
    assert "IPUXL_POPDIST_EXCHANGE=fast is not one of auto, native, mpi4py" in r.stderr, r.stderr


FOUR = """import numpy as np, popxl, popxl.ops as ops, popdist, os
ir = popxl.Ir(replication="popdist")
R, off = ir.instance_replication_factor, popdist.getReplicaIndexOffset()
with ir.main_graph:
    xs = popxl.h2d_stream((1000,), popxl.float32, "x")
    x = ops.host_load(xs)
    y = ops.collectives.replicated_all_reduce(x, "add")
    g = ops.collectives.replicated_all_gather(x, group=ir.replica_grouping(stride=2, group_size=ir.replication_factor // 2))
    s1 = popxl.d2h_stream(y.shape, y.dtype, "y"); ops.host_store(s1, y)
    s2 = popxl.d2h_stream(g.shape, g.dtype, "g"); ops.host_store(s2, g)
G = ir.replication_factor
allx = np.random.default_rng(1).normal(size=(G, 1000)).astype(np.float32)
with popxl.Session(ir, "ipu_model") as s:
    out = s.run({xs: allx[off:off+R] if R > 1 else allx[off]})
want = allx.astype(np.float64).sum(0).astype(np.float32)
got = out[s1].reshape(R, 1000)
assert all(np.array_equal(got[i], want) for i in range(R))
ga = out[s2].reshape(R, -1)
for i in range(R):
    r = off + i
    members = [m for m in range(G) if m % 2 == r % 2]
    assert np.array_equal(ga[i], allx[members].reshape(-1)), (r, members)
os.write(1, f"OK4 {popdist.getInstanceIndex()} {'native' if popdist.communicator().native else 'mpi4py'}\\n".encode())
"""


@needs_mpi
def test_four_instances(tmp_path, exchange):
    """4 instances x 2 replicas: an all-reduce over all 8 (every instance
    exchanges with 3 peers) and an all-gather over strided groups that span
    all instances, against NumPy (the sum in double, rounded once: what
    one process computes)."""
    script = tmp_path / "four.py"
    script.write_text(FOUR)
    r = _poprun(script, 4, 8, **exchange)
    assert r.returncode == 0, r.stdout + r.stderr
    mode = exchange["IPUXL_POPDIST_EXCHANGE"]
    assert sorted(re.findall(rf"OK4 (\d) {mode}", r.stdout)) == ["0", "1", "2", "3"], r.stdout


VARIABLES = textwrap.dedent("""
import numpy as np
import popxl, popxl.ops as ops, popdist
ir = popxl.Ir(replication="popdist")
G = ir.replication_factor
with ir.main_graph:
    rg = ir.replica_grouping(group_size=2, stride=1)   # groups [0,0,1,1]: one per instance
    a = popxl.variable(np.arange(2 * 3, dtype=np.float32).reshape(2, 3), replica_grouping=rg, name="a")
    b = popxl.variable(np.zeros(3, np.float32), name="b", retrieval_mode="all_replicas")
    xs = popxl.h2d_stream((3,), popxl.float32, "x")
    x = ops.host_load(xs)
    ops.var_updates.accumulate_(a, x)     # a += x  (x differs per replica but equal within group)
    ops.var_updates.accumulate_(b, x)
R = ir.instance_replication_factor; off = popdist.getReplicaIndexOffset()
allx = np.array([[1, 1, 1], [1, 1, 1], [5, 5, 5], [5, 5, 5]], np.float32)
with popxl.Session(ir, "ipu_model") as s:
    s.run({xs: allx[off:off + R]})
    ga = s.get_tensor_data(a); gb = s.get_tensor_data(b)
    print(popdist.getInstanceIndex(), "a", ga.tolist(), "b", gb.tolist(), flush=True)
    assert np.array_equal(ga, np.arange(6).reshape(2, 3) + np.array([[1], [5]]))
    assert np.array_equal(gb, allx), gb
    s.write_variable_data(a, np.full((2, 3), 7, np.float32))
    s.run({xs: allx[off:off + R]})
    ga = s.get_tensor_data(a)
    assert np.array_equal(ga, np.array([[8] * 3, [12] * 3])), ga
print("OK", popdist.getInstanceIndex())
""")


@needs_mpi
def test_variables_gather_across_instances(tmp_path, exchange):
    """get_tensor_data as one process would return it: a grouped variable
    whose groups live on different instances, every replica of an
    ``all_replicas`` variable; write_variable_data reaches every instance."""
    script = tmp_path / "variables.py"
    script.write_text(VARIABLES)
    r = _poprun(script, 2, 4, **exchange)
    assert r.returncode == 0, r.stdout + r.stderr
    # Both instances got to the end (their asserts passed). mpirun interleaves
    # the two instances' output even within a line ("OK OK 0\n1"), so count.
    assert r.stdout.count("OK") == 2, r.stdout


DEAD = textwrap.dedent("""
    import os, time
    import numpy as np
    import popxl, popxl.ops as ops
    import popdist

    ir = popxl.Ir(replication="popdist")
    with ir.main_graph:
        v = popxl.variable(np.ones(4, np.float32))
        ops.collectives.replicated_all_reduce_(v)
    sess = popxl.Session(ir, "ipu_model")
    if popdist.getInstanceIndex() == 1:
        if "{mode}" == "exit":
            os._exit(3)      # dies without a word
        time.sleep(60)       # hangs: never reaches the collective
    with sess:
        sess.run()
    print("unreachable")
""")


@needs_mpi
def test_a_hung_instance_times_out_with_a_clear_error(tmp_path, exchange):
    script = tmp_path / "hang.py"
    script.write_text(DEAD.format(mode="hang"))
    t0 = time.monotonic()
    r = _poprun(script, 2, 2, timeout=120, IPUXL_POPDIST_TIMEOUT="3", **exchange)
    elapsed = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert elapsed < 50, f"took {elapsed:.0f} s: the peer's 60 s sleep was waited for"
    assert re.search(r"InstanceError: popdist: ReplicatedAllReduceInplace op "
                     r"'replicated_all_reduce_inplace' \(handshake\) between instances timed out "
                     r"after 3 s "
                     r"\(instance 0 of 2 waiting\)", out), out
    assert "IPUXL_POPDIST_TIMEOUT" in out and "unreachable" not in out


@needs_mpi
def test_a_dead_instance_stops_the_job(tmp_path, exchange):
    script = tmp_path / "dead.py"
    script.write_text(DEAD.format(mode="exit"))
    t0 = time.monotonic()
    r = _poprun(script, 2, 2, timeout=120, IPUXL_POPDIST_TIMEOUT="20", **exchange)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert time.monotonic() - t0 < 60
    assert "ipuxl poprun: mpirun exited with status" in out and "unreachable" not in out


# ---------------------------------------------------------------- the user guide
MIRROR = Path(os.environ.get("IPUXL_POPART_MIRROR", "/work/.mirror/graphcore+popart/repo"))
# The user guide's programs have bugs against PopXL's own API (PopXL rejects
# them too): each is run with the one fix it needs.
GUIDE_FIXES = {
    "distributed_simple_example.py": (
        "popxl.variable(v_data, grouping=grouping)",
        "popxl.variable(v_data, replica_grouping=grouping)"),
    "distributed_rts_simple_example.py": ("ops.matmul_(w, v_gathered)", "ops.matmul(w, v_gathered)"),
    "distributed_rts_complex_example.py": (
        "replicated_all_gather(v_shard, collective_rg)",
        "replicated_all_gather(v_shard, group=collective_rg)"),
}


def _guide_example(tmp_path, name):
    try:
        text = subprocess.run(["git", f"--git-dir={MIRROR}", "show",
                               f"HEAD:docs/popxl/files/{name}"], capture_output=True, text=True,
                              timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip(f"the graphcore/popart mirror with docs/popxl/files/{name} is not at "
                    f"{MIRROR} (set IPUXL_POPART_MIRROR)")
    old, new = GUIDE_FIXES[name]
    assert text.count(old) == 1, name
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


@needs_mpi
@pytest.mark.parametrize("name,replicas,want", [
    ("distributed_simple_example.py", 2, np.arange(8).reshape(2, 4) + 1),
    # v = [1, 1] sharded over 2 replicas; the reduce-scatter ("add") of the
    # constant [1, 1] over 2 replicas gives each shard 2: v = [3, 3]. (The
    # guide's comment says [2, 2].)
    ("distributed_rts_simple_example.py", 2, np.array([3, 3])),
    # "Should be 16 in our scenario": 16 replicas, 8 per instance; v_h + 1.
    ("distributed_rts_complex_example.py", 16, np.arange(4 * 32).reshape(4, 32) + 1),
])
def test_user_guide_distributed_examples(tmp_path, name, replicas, want, exchange):
    r = _poprun(_guide_example(tmp_path, name), 2, replicas, **exchange)
    assert r.returncode == 0, r.stdout + r.stderr
    printed = str(want.astype(np.float32 if name == "distributed_rts_simple_example.py"
                              else want.dtype))
    assert r.stdout.count(str(want)) == 2 or r.stdout.count(printed) == 2, r.stdout
