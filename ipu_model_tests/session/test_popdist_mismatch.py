"""Issue 42, item 3: instances whose collectives disagree (size, dtype,
operator, grouping) stop with an error naming the op on every instance,
instead of reducing garbage or "succeeding" with different results. A
handshake (one small message per peer) precedes every collective that
crosses instances. Runs on both exchanges (the C module and mpi4py)."""
import re
import textwrap
import time

import pytest

from test_popdist import _poprun, exchange, needs_mpi  # noqa: F401 - the fixture

MISMATCH = textwrap.dedent("""
    import sys
    import numpy as np
    import popxl, popxl.ops as ops
    import popdist

    me = popdist.getInstanceIndex()
    what = "{what}"
    n, dt, op, group = 4, popxl.float32, "add", None
    if me == 1:
        if what == "size":
            n = 8
        elif what == "dtype":
            dt = popxl.int32
        elif what == "operator":
            op = "max"
    ir = popxl.Ir(replication="popdist")
    if what == "group":
        # 4 replicas on 2 instances: groups (0, 2), (1, 3) against one of all.
        group = ir.replica_grouping(stride=2, group_size=2) if me == 0 else None
    with ir.main_graph:
        v = popxl.variable(np.arange(n).astype(dt.as_numpy()), dt, name="v")
        ops.collectives.replicated_all_reduce_(v, op, group)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        # One write per line: the instances share mpirun's output.
        sys.stdout.write(f"instance {{me}} result {{sess.get_tensor_data(v).tolist()}}\\n")
        sys.stdout.flush()
""")


@needs_mpi
@pytest.mark.parametrize("what", ["size", "dtype", "operator", "group"])
def test_mismatched_collectives_fail_on_every_instance_naming_the_op(tmp_path, what, exchange):
    script = tmp_path / f"mismatch_{what}.py"
    script.write_text(MISMATCH.format(what=what))
    t0 = time.monotonic()
    r = _poprun(script, 2, 4, timeout=120, IPUXL_POPDIST_TIMEOUT="20", **exchange)
    elapsed = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "result" not in r.stdout, out  # no instance went on with a wrong answer
    assert elapsed < 60, elapsed  # well inside the timeout: nobody waited for it
    for me, other in ((0, 1), (1, 0)):
        assert re.search(
            r"RuntimeError: ReplicatedAllReduceInplace op 'replicated_all_reduce_inplace': the "
            rf"instances disagree about this collective: instance {me} of 2 runs all-reduce.*, "
            rf"instance {other} runs all-reduce", out), (me, out)
    want = {"size": r"x4 .*x8|x8 .*x4", "dtype": r"float32.*int32|int32.*float32",
            "operator": r"\(add\).*\(max\)|\(max\).*\(add\)", "group": r"groups #"}[what]
    assert re.search(want, out), out


MATCHED = textwrap.dedent("""
    import sys
    import numpy as np
    import popxl, popxl.ops as ops
    import popdist

    ir = popxl.Ir(replication="popdist")
    with ir.main_graph:
        v = popxl.variable(np.arange(4, dtype=np.float32), name="v")
        ops.collectives.replicated_all_reduce_(v, "add")
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        # One write per line: the instances share mpirun's output.
        sys.stdout.write(f"instance {popdist.getInstanceIndex()} result "
                         f"{sess.get_tensor_data(v).tolist()}\\n")
        sys.stdout.flush()
""")


@needs_mpi
def test_matching_collectives_still_run(tmp_path, exchange):
    script = tmp_path / "matched.py"
    script.write_text(MATCHED)
    r = _poprun(script, 2, 4, timeout=120, **exchange)
    assert r.returncode == 0, r.stdout + r.stderr
    for me in (0, 1):
        assert f"instance {me} result [0.0, 4.0, 8.0, 12.0]" in r.stdout, r.stdout
