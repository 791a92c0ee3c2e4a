"""session.profile(), profile_ir, the JSON profile, autoReport through
POPLAR_ENGINE_OPTIONS, and the ``ipuxl profile`` command."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import profile as prof

SCRIPT = '''
import numpy as np
import popxl
import popxl.ops as ops

ir = popxl.Ir()
with ir.main_graph:
    xs = popxl.h2d_stream((8, 64), popxl.float32, name="x")
    w = popxl.variable(np.ones((64, 32), np.float32), name="w")
    g = ir.create_graph(lambda a, m: ops.relu(a @ m), popxl.TensorSpec((8, 64), popxl.float32),
                        popxl.TensorSpec((64, 32), popxl.float32))
    (y,) = ops.call(g, ops.host_load(xs), w)
    ys = popxl.d2h_stream(y.shape, y.dtype, name="y")
    ops.host_store(ys, y)
with popxl.Session(ir, "{device}") as s:
    out = s.run({{xs: np.ones((8, 64), np.float32)}})
assert out[ys].shape == (8, 32)
print("script ran")
'''


def small_ir():
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((8, 64), popxl.float32, name="x")
        w = popxl.variable(np.ones((64, 32), np.float32), name="w")
        y = ops.softmax(ops.host_load(xs) @ w, 1)
        ys = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(ys, y)
    return ir, xs, ys


def test_session_profile_structure():
    ir, xs, ys = small_ir()
    with popxl.Session(ir, "ipu_model") as s:
        s.run({xs: np.ones((8, 64), np.float32)})
        p = s.profile()
    assert p.runs == 1
    n = p.num_tiles
    assert n == 1472
    for c in p.categories:
        assert p.per_tile[c].shape == (n,)
    t = p.totals
    assert t["total"] == t["alwaysLive"] + t["notAlwaysLive"]
    assert t["variables"] == 64 * 32 * 4
    names = p.ops["name"]
    assert "matmul" in names and "softmax" in names
    assert len(p.steps["live_bytes"]) == len(p.steps["cycles"]) >= 4
    assert p.cycles == sum(p.steps["cycles"]) and p.seconds > 0
    assert p.graphs[0]["main"]
    assert any(v.startswith("poplin::ConvPartial1x1Out") for v in p.vertex_types)


def test_profile_ir_needs_no_session_and_matches_it():
    ir, xs, ys = small_ir()
    a = prof.profile_ir(ir).to_dict()
    b = popxl.Session(ir, "ipu_model").profile().to_dict()
    for k in ("per_tile", "ops", "steps", "total_cycles"):
        assert a[k] == b[k]


def test_json_round_trip(tmp_path):
    ir, _, _ = small_ir()
    p = prof.profile_ir(ir, name="small")
    path = tmp_path / "p.json"
    p.save(str(path))
    q = prof.load(str(path))
    assert q.name == "small" and q.totals == p.totals and q.cycles == p.cycles
    assert json.loads(path.read_text())["format"] == "ipuxl-profile-1"
    assert "small" in prof.compare(p, q)


def test_load_rejects_other_json(tmp_path):
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(ValueError, match="not an ipuxl profile"):
        prof.load(str(tmp_path / "x.json"))


@pytest.mark.slow  # runs scripts in subprocesses
def test_autoreport_writes_the_profile(tmp_path, monkeypatch):
    d = tmp_path / "reports"
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps(
        {"autoReport.all": "true", "autoReport.directory": str(d)}))
    ir, _, _ = small_ir()
    popxl.Session(ir, "cpu")
    p = prof.load(str(d / "profile.json"))
    assert p.target["version"] == "cpu"
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "not json")
    with pytest.raises(ValueError, match="POPLAR_ENGINE_OPTIONS"):
        popxl.Session(small_ir()[0], "cpu")


def _cli_env():
    env = dict(os.environ)
    if env.get("IPUXL_CORE_DIR"):
        env["IPUXL_CORE_DIR"] = os.path.abspath(env["IPUXL_CORE_DIR"])
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.path.dirname(popxl.__file__), ".."),
                                         env.get("PYTHONPATH", "")])
    return env


def _cli(args, cwd):
    return subprocess.run([sys.executable, "-m", "ipuxl", "profile"] + args, cwd=cwd,
                          env=_cli_env(), capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # runs scripts in subprocesses
@pytest.mark.parametrize("device", ["ipu_model", "cpu"])
def test_cli_profiles_an_unmodified_popxl_script(tmp_path, device):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT.format(device=device))
    r = _cli(["--out", str(tmp_path / "out"), "--no-html", str(script)], str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "script ran" in r.stdout and "vertexCode" in r.stdout and "cycles" in r.stdout
    p = prof.load(str(tmp_path / "out" / "profile.json"))
    assert p.target["version"] == "ipu2" and p.num_tiles == 1472
    (fn,) = p.functions()
    assert fn["call_sites"] == 1


@pytest.mark.slow  # runs scripts in subprocesses
def test_cli_compare(tmp_path):
    ir, _, _ = small_ir()
    prof.profile_ir(ir, name="a").save(str(tmp_path / "a.json"))
    prof.profile_ir(ir, "ipu21", name="b").save(str(tmp_path / "b.json"))
    r = _cli(["--compare", "a.json", "b.json", "--no-html"], str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "b / a" in r.stdout and "cycles" in r.stdout and "total" in r.stdout


@pytest.mark.slow  # runs scripts in subprocesses
def test_cli_without_a_script():
    r = _cli([], ".")
    assert r.returncode == 2 and "give a script" in r.stderr


def test_the_faithful_program_is_modelled_not_the_host_one():
    # The host passes fuse the bias add and GELU into the GEMM; the model
    # sees the program PopXL would build: three ops.
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((16, 128), popxl.float32, name="x")
        w = popxl.variable(np.ones((128, 64), np.float32), name="w")
        b = popxl.variable(np.ones((64,), np.float32), name="b")
        y = ops.gelu(ops.host_load(xs) @ w + b)
        ys = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(ys, y)
    s = popxl.Session(ir, "ipu_model", host_passes="all")
    assert any(s._prog.host_passes.values())
    classes = dict(zip(s.profile().ops["name"], s.profile().ops["cost_class"]))
    assert classes["matmul"] == "matmul" and classes["add"] == "elementwise"
    assert classes["gelu"] == "elementwise"


def test_ops_of_called_graphs_are_labelled_with_their_graph():
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((8, 64), popxl.float32, name="x")
        g = ir.create_graph(lambda a: ops.relu(a), popxl.TensorSpec((8, 64), popxl.float32))
        (y,) = ops.call(g, ops.host_load(xs))
        ys = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(ys, y)
    rows = {r["label"]: r for r in prof.profile_ir(ir).op_table()}
    assert f"{g.name}/relu" in rows and rows[f"{g.name}/relu"]["executions"] == 1


TWO_SESSIONS = '''
import sys
import numpy as np
import popxl
import popxl.ops as ops


def program(name):
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((8, 64), popxl.float32, name="x")
        w = popxl.variable(np.ones((64, 32), np.float32), name=name)
        y = ops.relu(ops.host_load(xs) @ w)
        ys = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(ys, y)
    return ir, xs


train, xs = program("w_train")
with popxl.Session(train, "ipu_model") as s:
    for _ in range(int(sys.argv[1])):
        s.run({xs: np.ones((8, 64), np.float32)})
test, xt = program("w_test")
with popxl.Session(test, "ipu_model") as s:
    s.run({xt: np.ones((8, 64), np.float32)})
'''


def test_cli_profiles_every_session(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TWO_SESSIONS)
    out = tmp_path / "out"
    r = _cli(["--out", str(out), "--no-html", str(script), "5"], str(tmp_path))
    assert r.returncode == 0, r.stderr
    # Both Sessions listed, each with the runs the script made.
    assert "2 Session(s) of train.py 5" in r.stdout
    assert "session 1 (ipu_model)" in r.stdout and "5 run(s)" in r.stdout
    assert "session 2 (ipu_model)" in r.stdout and "1 run(s)" in r.stdout
    one, two = (prof.load(str(out / f"profile_{i}.json")) for i in (1, 2))
    assert (one.runs, two.runs) == (5, 1)
    assert json.loads((out / "profile_1.json").read_text())["runs"] == 5
    assert one.name == "train.py 5 · session 1" and two.name == "train.py 5 · session 2"
    assert "w_train" in one.tensors["name"] and "w_test" in two.tensors["name"]
    # The main page is the Session that ran most (training, not test)...
    main = prof.load(str(out / "profile.json"))
    assert main.name == one.name
    (marked,) = [ln for ln in r.stdout.splitlines() if "[main page]" in ln]
    assert marked.strip().startswith("session 1")
    # ...unless --session picks another.
    r = _cli(["--out", str(out), "--no-html", "--session", "2", str(script), "5"], str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert prof.load(str(out / "profile.json")).name == two.name
    r = _cli(["--out", str(out), "--no-html", "--session", "3", str(script), "1"], str(tmp_path))
    assert r.returncode == 2 and "created 2 Session(s)" in r.stderr


def test_cli_writes_a_page_for_every_session(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TWO_SESSIONS)
    out = tmp_path / "out"
    r = _cli(["--out", str(out), str(script), "2"], str(tmp_path))
    assert r.returncode == 0, r.stderr
    for name in ("profile.html", "profile_1.html", "profile_2.html"):
        text = (out / name).read_text()
        assert 'id="ipuxl-data"' in text
    # Each page links to the other Sessions' pages.
    assert 'profile_2.html' in (out / "profile_1.html").read_text()


def test_cli_version_and_help():
    from ipuxl import cli

    r = subprocess.run([sys.executable, "-m", "ipuxl", "--version"], capture_output=True,
                       text=True, env=_cli_env())
    assert r.returncode == 0 and r.stdout.startswith("ipuxl ")
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subs.choices.items():
        for action in sub._actions:
            assert action.help, f"ipuxl {name}: {action.option_strings or action.dest} has no help"


def test_poprun_print_command_is_a_dry_run(tmp_path):
    script = tmp_path / "touch.py"
    marker = tmp_path / "ran"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    r = subprocess.run([sys.executable, "-m", "ipuxl", "poprun", "--num-instances", "1",
                        "--num-replicas", "1", "--print-command", str(script)],
                       capture_output=True, text=True, env=_cli_env(), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "ipuxl.popdist._instance" in r.stdout and str(script) in r.stdout
    assert "POPDIST_NUM_TOTAL_REPLICAS=1" in r.stdout
    assert not marker.exists(), "--print-command ran the script"
