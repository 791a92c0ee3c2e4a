"""ipuxl's Poplar: C++ programs written here, built against its headers and
libraries as a user's Makefile would (g++ -std=c++11 prog.cpp -lpoplar ...),
run, and checked against NumPy or the documented behaviour.

The programs print `@name shape : values` lines (progs/report.hpp); every
value is recomputed here from the inputs the program printed.
"""
from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from ipuxl.poplar_env import environment

PROGS = Path(__file__).resolve().parent / "progs"
LIBS = {
    "views": ["-lpoplar", "-lpoputil"],
    "codelets": ["-lpoplar"],
    "control": ["-lpoplar", "-lpopops", "-lpoputil"],
    "poplibs": ["-lpoplar", "-lpopops", "-lpoplin", "-lpopnn", "-lpoprand", "-lpoputil"],
    "errors": ["-lpoplar", "-lpopops", "-lpoplin", "-lpoputil"],
    "profile": ["-lpoplar"],
    "nn": ["-lpoplar", "-lpopops", "-lpopnn", "-lpoputil"],
    "replication": ["-lpoplar", "-lpopops", "-lpoputil", "-lgcl"],
    "conv": ["-lpoplar", "-lpoplin", "-lpopops", "-lpoputil"],
    "half": ["-lpoplar"],
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Compiles every program (two at a time) with the environment `ipuxl poplar-env` sets."""
    try:
        env = environment()
    except FileNotFoundError as e:
        pytest.fail(f"ipuxl's Poplar is not built: {e}")
    # Codelets compiled by the tests go to a cache of their own.
    env["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    out = tmp_path_factory.mktemp("bin")

    def build(name):
        exe = out / name
        cmd = ["g++", "-std=c++11", str(PROGS / f"{name}.cpp"), *LIBS[name], "-o", str(exe)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
        return name, exe

    with ThreadPoolExecutor(2) as pool:
        exes = dict(pool.map(build, LIBS))
    return exes, env


def run(built, name, *args, extra_env=None):
    exes, env = built
    e = dict(env, **(extra_env or {}))
    r = subprocess.run([str(exes[name]), str(PROGS), *args], env=e, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout, r.stderr


def parse(text):
    arrays = {}
    for line in text.splitlines():
        m = re.match(r"@(\S+) (\S*) :(.*)$", line)
        if m:
            shape = tuple(int(s) for s in m.group(2).split(",")) if m.group(2) else ()
            vals = np.array([float(v) for v in m.group(3).split()], dtype=np.float64)
            arrays[m.group(1)] = vals.reshape(shape)
    return arrays


def test_tensor_views_match_numpy(built):
    out, _ = run(built, "views")
    a = parse(out)
    x, y = a["x"], a["y"]
    expect = {
        "slice1": x[:, 1:3], "sliceND": x[1:3, 0:3, 2:5], "index": x[2][1], "element": x[1, 2, 3],
        "indexList": x[0][3], "reshape": x.reshape(6, 10), "flatten": x.ravel(), "flatten12": x.reshape(3, 20),
        "dimShuffle": x.transpose(2, 0, 1), "dimRoll": np.moveaxis(x, 2, 0), "transpose": x[1].T,
        "concat1": np.concatenate([x, y], 1), "concatList": np.concatenate([y, x, y], 1),
        "broadcast": np.repeat(x[0:1], 3, 0), "expand": x[:, None], "squeeze": x[:, 2], "reverse": x[:, :, ::-1],
        "subSample": x[:, ::2], "upsample": np.repeat(x, 2, 0),
        "shuffleThenSlice": x.transpose(1, 2, 0)[:, 1:4][2],
    }
    for k, v in expect.items():
        np.testing.assert_array_equal(a[k], v, err_msg=k)
    np.testing.assert_array_equal(a["reinterpret"], x[0].ravel().astype(np.float32).view(np.int32))
    # 100 elements, at least 10 a tile in grains of 4, over 8 tiles: 16 a tile from tile 0.
    lm = a["linearMapping"].astype(int)
    assert [tuple(r) for r in lm] == [(t, 16 * t, min(100, 16 * t + 16)) for t in range(7)]
    assert a["shuffledMappingTile0"][0] == 60  # x is all on tile 0: one interval of every element
    assert "@contiguous_slice 1" in out and "@contiguous_shuffle 0" in out and "@intersects 1 0" in out


def test_codelet_field_kinds_half_and_workers(built):
    out, _ = run(built, "codelets")
    a = parse(out)
    k = np.array([2, 3, 4])
    np.testing.assert_allclose(a["s"], a["in_a"] * k + a["in_b"], rtol=1e-6)
    np.testing.assert_array_equal(a["xi_out"], np.arange(1, 8) + np.resize([10, -20, 30], 7))
    np.testing.assert_allclose(a["rows"], a["in_m"].sum(0), rtol=1e-6)
    l = a["in_l"]
    np.testing.assert_array_equal(a["lmax"], [l[0:2].max(), l[2:7].max(), l[7:10].max()])
    hx = a["in_hx"].astype(np.float16)
    hy = hx * np.float16(0.5) + np.float16(1.0)  # computed in half, round to nearest even
    np.testing.assert_array_equal(a["hy"], hy.astype(np.float64))
    np.testing.assert_array_equal(a["hy_bits"], hy.view(np.uint16))
    np.testing.assert_array_equal(a["w2"], a["in_w"] * 2)
    np.testing.assert_array_equal(a["ran"], np.arange(6) + 100)  # each of the six workers ran
    np.testing.assert_allclose(a["sfo"], a["in_sf"] * 2.5)
    np.testing.assert_array_equal(a["sio"], np.array([1, -2, 3, 7]) * -3)
    np.testing.assert_array_equal(a["ng_out"], -a["in_ng"].ravel())  # negated three times, through a transposed view
    assert "@profile_has_memory 1" in out


def test_control_programs_streams_remote_buffers(built):
    out, _ = run(built, "control")
    a = parse(out)
    np.testing.assert_array_equal(a["loop0"], [7, 14, 21])  # RepeatWhileTrue(i < 7)
    np.testing.assert_array_equal(a["loop1"], [7, 14, 21])  # RepeatWhileFalse(i >= 7)
    np.testing.assert_array_equal(a["loop2"], [5, 10, 15])  # Repeat(5)
    np.testing.assert_array_equal(a["if0"], [-1, -1])
    np.testing.assert_array_equal(a["if5"], [1, 1])
    for s, v in {"0": [0, 10], "3": [3, 30], "-2": [-2, -20], "7": [99, 99]}.items():
        np.testing.assert_array_equal(a["switch" + s], v)
    np.testing.assert_array_equal(a["calls"], np.array([1, -2, 0.5, 8]) * 4)
    np.testing.assert_array_equal(a["code_load"], np.array([1, -2]) * 9)  # FunctionBuffer, 2 calls
    # The FIFO reads its host buffer circularly: 6 transfers of 2 over 4 values.
    np.testing.assert_array_equal(a["ring_sink"], [3, 4, 1, 2, 3, 4])
    np.testing.assert_array_equal(a["callback"], [1, -1])  # the second run used the prefetched value
    np.testing.assert_array_equal(a["callback_counts"], [1, 2, 2])  # fetch, prefetch, complete
    np.testing.assert_array_equal(a["remote_row1_host"], [1, 10])
    np.testing.assert_array_equal(a["remote_back"], [[0, 0], [1, 10], [-7, -8]])
    assert "pt: [\n [1.5000000 -2.0000000]\n [3.0000000 4.0000000]\n]" in out
    assert "pti: [0 1 2 ... 17 18 19]" in out  # summarised past 16 elements
    assert "pb: [\n [true false]\n [true true]\n]" in out


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_poplibs_against_numpy(built):
    out, _ = run(built, "poplibs")
    a = parse(out)
    x, b, c = a["in_a"].astype(np.float32), a["in_b"].astype(np.float32), a["in_c"].astype(np.float32)
    close = lambda k, v, **kw: np.testing.assert_allclose(a[k], v, rtol=kw.get("rtol", 2e-6), atol=kw.get("atol", 1e-6), err_msg=k)
    close("add_bcast", x + b)
    close("sub_col", x - c)
    close("mul", x * x)
    close("div_scalar", x / 4)
    close("max", np.maximum(x, c))
    close("exp", np.exp(c))
    close("tanh", np.tanh(x))
    close("sigmoid", 1 / (1 + np.exp(-x)))
    close("abs_neg", -np.abs(x))
    close("map_expr", np.where(x > b, x * x - 2 * b, -1))
    close("gt", (x > b).astype(float))
    close("scaledAddTo", x - 0.25 * (2 * x))
    close("reduce_add_0", x.sum(0), atol=1e-5)
    close("reduce_max_1", x.max(1))
    close("reduce_sq_all", (x.astype(np.float64) ** 2).sum(), rtol=1e-6)
    r3 = a["in_r3"]
    close("reduce_mul_02", r3.prod((0, 2)), rtol=1e-5)
    close("reduce_update_scaled", 10 + 0.5 * r3.sum((0, 2)), rtol=1e-6)
    # Groups spanning tiles: two stages (float partials on the input tiles).
    rs = a["in_rs"].astype(np.float64)
    close("split_add_0", rs.sum(0), rtol=1e-6, atol=1e-6)
    close("split_sqadd_1", (rs**2).sum(1), rtol=1e-6)
    close("split_max_all", rs.max())
    close("split_update_scaled", 3 + 0.5 * rs.sum(0), rtol=1e-6, atol=1e-6)
    close("split_half_add_1", rs.astype(np.float16).astype(np.float64).sum(1), rtol=1e-6, atol=1e-6)
    close("zero", np.zeros_like(x))
    close("fill_int", np.full_like(x, -7.0))
    np.testing.assert_array_equal(a["cast_half"], x.astype(np.float16).astype(np.float64))
    np.testing.assert_array_equal(a["cast_int"], np.trunc(x))
    o = a["in_off"].astype(int)
    close("dyn_slice", x[o[0]:o[0] + 2, o[1]:o[1] + 3])
    upd = x.copy()
    upd[o[0]:o[0] + 2, o[1]:o[1] + 3] = 9
    close("dyn_update", upd)
    m1, m2 = a["in_m1"], a["in_m2"]
    close("matmul", m1 @ m2, rtol=1e-5, atol=1e-5)
    close("matmul_tt", (m1 @ m2).T, rtol=1e-5, atol=1e-5)
    close("matmul_lhs", m1 @ m2, rtol=1e-5, atol=1e-5)
    close("relu", np.maximum(x, 0))
    p = _softmax(x.astype(np.float64))
    close("softmax", p, rtol=1e-5)
    close("logsoftmax", np.log(p), rtol=1e-5, atol=1e-5)
    lab = a["in_labels"].astype(int)
    close("loss", -np.log(p[np.arange(6), lab]), rtol=1e-5)
    close("deltas", p - np.eye(8)[lab], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(a["correct"], [(p.argmax(1) == lab).sum()])
    u, n, bern = a["uniform"], a["normal"], a["bernoulli"]
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.1 and abs(u.std() - 5 / np.sqrt(12)) < 0.1
    assert abs(n.mean() - 1) < 0.12 and abs(n.std() - 2) < 0.12
    assert set(np.unique(bern)) <= {0.0, 1.0} and abs(bern.mean() - 0.25) < 0.03
    assert not np.array_equal(u, a["uniform_run2"])  # the generator advances between runs
    assert "@broadcastToMatch {6,8} {6,8}" in out


ERRORS = {
    "unmapped": ("invalid_tile_mapping", "Tensor 'lonely'"),
    "unconnected": ("graph_connection_error", "Field 'ins' of vertex 0 of type 'SumRows'"),
    "written_twice": ("graph_connection_error", "writes element 1 of variable 't' twice"),
    "unknown_vertex": ("unknown_vertex_type", "NoSuchVertex"),
    "unknown_field": ("unknown_field", "no field 'nope'"),
    "type_mismatch": ("graph_connection_error", "has element type float"),
    "scalar_edge_size": ("graph_connection_error", "is a scalar edge"),
    "slice_range": ("index_error", "[2, 5) out of range"),
    "reshape": ("tensor_creation_error", "{5,2}"),
    "copy_size": ("graph_connection_error", "3 elements"),
    "stream_unconnected": ("stream_connection_error", "'feed'"),
    "write_size": ("poplar_error", "12 bytes"),
    "run_before_load": ("poplar_error", "Engine::load"),
    "compile_error": ("graph_program_compilation_error", "undeclared_variable_xyz"),
    "popops_no_codelets": ("poplibs_error", "popops::addCodelets"),
    "popops_shapes": ("poplibs_error", "do not broadcast"),
    "matmul_partials_type": ("invalid_option", "partialsType must be 'half' or 'float', got 'double'"),
    "if_predicate": ("control_program_error", "one element"),
    "vertex_false": ("application_runtime_error", "returned false"),
    "hardware": ("poplar_error", "Poplar SDK"),
    "tile_range": ("invalid_tile_mapping", "tile 4 is out of range"),
    "other_functions_buffer": ("poplar_error", "holds the code of function 0, not of function 1"),
}


def test_rule_violations_raise_poplars_errors(built):
    out, err = run(built, "errors", *ERRORS)
    got = {}
    for m in re.finditer(r"^@error (\S+) (\S+) \| (.*?)(?=^@|\Z)", out, re.S | re.M):
        got[m.group(1)] = (m.group(2), m.group(3))
    for case, (etype, text) in ERRORS.items():
        assert case in got, f"{case}: no result in\n{out}"
        assert got[case][0] == etype, (case, got[case])
        assert text in got[case][1], (case, got[case])
    assert "@hardware_devices 0" in out
    assert "no IPU hardware device is available" in err
    # The compiler's own message reaches the user, with the line it points at.
    assert "was not declared" in got["compile_error"][1] and "broken_codelet.cpp:8" in got["compile_error"][1]


def test_engine_options_from_environment(built):
    out, _ = run(built, "errors", "engine_options_env", extra_env={"POPLAR_ENGINE_OPTIONS": "{bad"})
    assert "@error engine_options_env invalid_option | POPLAR_ENGINE_OPTIONS" in out
    out, _ = run(built, "errors", "engine_options_env", extra_env={"POPLAR_ENGINE_OPTIONS": '{"debug.x": "true"}'})
    assert "@error engine_options_env none" in out


def test_popc_object_loads_and_autoreport(built, tmp_path):
    exes, env = built
    gp = tmp_path / "codelets.gp"
    r = subprocess.run(["popc", str(PROGS / "field_codelets.cpp"), "-o", str(gp)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert gp.read_bytes()[:4] == b"\x7fELF"
    bad = subprocess.run(["popc", str(PROGS / "broken_codelet.cpp"), "-o", str(tmp_path / "b.gp")], env=env,
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "undeclared_variable_xyz" in bad.stderr
    e = dict(env, POPLAR_ENGINE_OPTIONS=f'{{"autoReport.all": "true", "autoReport.directory": "{tmp_path}"}}')
    r = subprocess.run([str(exes["codelets"]), str(PROGS)], env=e, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    import json

    import ipuxl.profile

    # profile.pop: the Poplar summary (what ipuxl's libpva reads)
    prof = json.loads((tmp_path / "profile.pop").read_text())
    assert prof["target"]["tilesPerIPU"] == 4 and len(prof["memory"]["perTile"]) == 4
    assert prof["execution"]["computeSets"]["cs"] > 0 and prof["execution"]["tileAverageCompute"] > 0
    # profile.json: ipuxl's profile format, with memory per tile from the real mappings
    p = ipuxl.profile.load(str(tmp_path / "profile.json"))
    assert p.num_tiles == 4 and p.cycles == prof["execution"]["totalCycles"]
    # codelets.cpp's variables: 96 float, 15 int, 6 unsigned (4 bytes each) and 10 half
    assert p.totals["variables"] == 4 * (96 + 15 + 6) + 2 * 10
    assert {r["name"] for r in p.op_table()} == {"cs", "cs2"}
    assert "cs" in p.summary()

def test_poplar_env_cli_prints_the_paths():
    import sys

    from ipuxl.poplar_env import poplar_dirs

    d = poplar_dirs()
    r = subprocess.run([sys.executable, "-m", "ipuxl", "poplar-env"], capture_output=True, text=True,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert [ln.split("=")[0] for ln in lines] == ["export CPATH", "export LIBRARY_PATH", "export LD_LIBRARY_PATH",
                                                   "export PATH"]
    assert str(d["include"]) in lines[0] and str(d["lib"]) in lines[1] and str(d["bin"]) in lines[3]
    assert (d["include"] / "poplar" / "Graph.hpp").exists() and (d["lib"] / "libpopops.so").exists()
    bad = subprocess.run([sys.executable, "-m", "ipuxl", "poplar-env", "--build-dir", "/nonexistent"],
                         capture_output=True, text=True, env={k: v for k, v in os.environ.items()})
    # An explicit build without the libraries falls back to the package, else says where it looked.
    assert bad.returncode == 0 or "/nonexistent/poplar/lib" in bad.stderr


def _figure(text, label):
    m = re.search(re.escape(label) + r":\s+([\d,.]+)", text)
    assert m, f"{label!r} not in the summary:\n{text}"
    return float(m.group(1).replace(",", ""))


def test_profile_summary_follows_the_model(built):
    """Compute, exchange, host and sync figures recomputed from docs/poplar.md's rules."""
    out, _ = run(built, "profile")
    c = parse(out)["cycles"].astype(int)
    tiles, workers = 4, 6
    per_tile = {0: sorted(c[0::2]), 1: sorted(c[1::2])}
    with_idle = busy = 0.0
    for t, cyc in per_tile.items():
        load = [0] * workers
        for v in c[t::2]:  # each vertex, in order, to the least loaded worker
            load[load.index(min(load))] += v
        with_idle += max(load) * workers
        busy += sum(cyc)
    runs = 2
    assert _figure(out, "Tile average compute cycles (including idle threads)") == pytest.approx(runs * with_idle / tiles)
    assert _figure(out, "Tile average compute cycles (excluding idle threads)") == pytest.approx(runs * busy / tiles)
    # Exchange: tile 1 receives row 0 (8 floats) for vertex 3, at 4 bytes a cycle: 8 cycles per run;
    # the host stream's 320 bytes are spread over the 4 tiles: 20 cycles each.
    assert _figure(out, "Tile average IPU exchange cycles") == pytest.approx((runs * 8 + 20 * tiles) / tiles)
    assert _figure(out, "Tile average host exchange cycles") == pytest.approx(np.ceil(320 / 6))
    assert _figure(out, "Tile average sync cycles") == pytest.approx(3 * 150)  # a stream copy and two compute sets
    assert "cs: " in out and "2 runs" in out
    # Memory: x and y (80 floats each) are split evenly over tiles 0 and 1.
    # Neither outlives a run (x is streamed in, then read; y is written),
    # so neither is always live; both are live at the Executes.
    assert _figure(out, "Variables") == 0
    assert _figure(out, "Not always live (peak)") == 2 * 80 * 4
    assert _figure(out, "Stack") == tiles * (1024 + 128)
    # Code (docs/poplar.md, PopXL's model figures): the stream copy (2 x 12 B)
    # and two Executes (12 B each) on every tile's control program; exchange
    # code: 48 + 2 B of host exchange on x's two tiles, and per Execute 32 +
    # 2 B on the two tiles that exchange row 0; a landing-pad copy descriptor
    # (8 B) on x's tiles.
    assert _figure(out, "Control code") == tiles * (2 * 12 + 2 * 12)
    assert _figure(out, "Exchange code") == 2 * (48 + 2) + 2 * 2 * (32 + 2)
    assert _figure(out, "Copy descriptors") == 2 * 8


def _ramp(n, scale, offset):
    i = np.arange(n)
    return (np.float32(offset) + np.float32(scale) * ((i * 7) % 23).astype(np.float32)).astype(np.float32)


def test_multi_slice_and_updates_match_numpy(built):
    out, _ = run(built, "nn")
    a = parse(out)
    emb, t3, upd, t3u = a["in_emb"], a["in_t3"], a["in_upd"], a["in_t3u"]
    idx, idx2 = a["in_idx"].astype(int), a["in_idx2"].astype(int)
    fits = lambda o, size, d: 0 <= o and o + size <= d
    ms = np.stack([emb[o:o + 1] if fits(o, 1, 10) else np.zeros((1, 12)) for o in idx])
    np.testing.assert_array_equal(a["ms"], ms)
    np.testing.assert_array_equal(a["ms_static"], emb[[7, 0, 7]][:, None])
    sl = lambda o: t3[:, o:o + 2] if fits(o, 2, 10) else np.zeros((3, 2, 4))
    np.testing.assert_array_equal(a["ms_dim1_size2"], np.stack([sl(o) for o in idx2]))
    np.testing.assert_array_equal(a["ms_remap"], np.stack([sl(o if fits(o, 2, 10) else 0) for o in idx2]))
    mu, mua, mumax, t3c = emb.copy(), emb.copy(), emb.copy(), t3.copy()
    muh = emb.astype(np.float16)
    for i, o in enumerate(idx):
        if fits(o, 1, 10):
            mu[o] = upd[i, 0]
            mua[o] = (mua[o].astype(np.float32) + np.float32(-0.5) * upd[i, 0].astype(np.float32))
            mumax[o] = np.maximum(mumax[o], upd[i, 0])
            muh[o] = (muh[o].astype(np.float64) + 0.25 * upd[i, 0].astype(np.float16).astype(np.float64)).astype(np.float16)
    for i, o in enumerate(idx2):
        if fits(o, 2, 10):
            t3c[:, o:o + 2] += -0.5 * t3u[i]
    np.testing.assert_array_equal(a["mu"], mu)
    np.testing.assert_allclose(a["mua"], mua, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(a["mumax"], mumax)
    np.testing.assert_array_equal(a["mua_half"], muh.astype(np.float64))
    gemb, gidx, gupd = a["in_gemb"], a["in_gidx"].astype(int), a["in_gupd"]
    gms = np.zeros((2, 3, 1, 12))
    gmua = gemb.copy()
    for k in range(2):
        for i, o in enumerate(gidx[k]):
            if fits(o, 1, 10):
                gms[k, i] = gemb[k, o:o + 1]
                gmua[k, o] += -0.5 * gupd[k, i, 0]
    np.testing.assert_array_equal(a["gms"], gms)
    np.testing.assert_allclose(a["gmua"], gmua, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(a["mua_dim1"], t3c, rtol=1e-6, atol=1e-6)


def _group_norm_torch(x, gamma, beta, gin, groups, eps, strided):
    """Outputs and gradients of group norm by PyTorch autograd (float64): the
    strided grouping (channel c in group c % G) by permuting the channels."""
    import torch
    c = x.shape[1]
    perm = np.arange(c).reshape(c // groups, groups).T.ravel() if strided else np.arange(c)
    xt = torch.tensor(x[:, perm], dtype=torch.float64, requires_grad=True)
    gt = torch.tensor(gamma[perm], dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(beta[perm], dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.group_norm(xt, groups, gt, bt, eps)
    (y * torch.tensor(gin[:, perm])).sum().backward()
    inv = np.argsort(perm)
    return (y.detach().numpy()[:, inv], xt.grad.numpy()[:, inv], gt.grad.numpy()[inv], bt.grad.numpy()[inv])


def test_group_layer_instance_norm_match_torch(built):
    out, _ = run(built, "nn")
    a = parse(out)
    acts, gamma, beta, gin = a["in_acts"], a["in_gamma"], a["in_beta"], a["in_gin"]
    tol = dict(rtol=2e-5, atol=2e-5)
    for strided in (False, True):
        sfx = "_strided" if strided else ""
        x4 = acts.reshape(4, 2, 3, 5).transpose(0, 2, 1, 3) if strided else acts.reshape(4, 3, 2, 5)
        np.testing.assert_allclose(a["gn_mean" + sfx], x4.mean((2, 3)).ravel(), **tol)
        np.testing.assert_allclose(a["gn_istd" + sfx], 1 / np.sqrt(x4.var((2, 3)).ravel() + 1e-3), **tol)
        y, dx, dg, db = _group_norm_torch(acts, gamma, beta, gin, 3, 1e-3, strided)
        np.testing.assert_allclose(a["gn_out" + sfx], y, **tol)
        np.testing.assert_allclose(a["gn_grad" + sfx], dx, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(a["gn_dgamma" + sfx], dg, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(a["gn_dbeta" + sfx], db, rtol=1e-4, atol=1e-4)
    x2, g2, gm2, bt2 = a["in_x2"], a["in_g2"], a["in_gm2"], a["in_bt2"]
    np.testing.assert_allclose(a["ln_mean_unbiased"], x2.mean(1), **tol)
    np.testing.assert_allclose(a["ln_istd_unbiased"], 1 / np.sqrt(x2.var(1, ddof=1) + 1e-5), **tol)
    y, dx, dg, db = _group_norm_torch(x2, gm2, bt2, g2, 1, 1e-5, False)
    np.testing.assert_allclose(a["ln_out"], y, **tol)
    np.testing.assert_allclose(a["ln_whiten"], (x2 - x2.mean(1, keepdims=True)) / np.sqrt(x2.var(1, keepdims=True) + 1e-5), **tol)
    np.testing.assert_allclose(a["ln_grad"], dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(a["ln_dgamma"], dg, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(a["ln_dbeta"], db, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(a["ln_gamma_upd"], gm2 - 0.1 * dg, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(a["ln_beta_upd"], bt2 - 0.1 * db, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(a["ln_half_out"], y, rtol=1e-2, atol=2e-2)  # statistics in float, values in half
    np.testing.assert_allclose(a["in_mean"], acts.mean(2).ravel(), **tol)


def test_non_linearity_gradients_match_torch(built):
    import torch
    out, _ = run(built, "nn")
    a = parse(out)
    x, g = a["in_x2"], a["in_g2"]
    fns = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu,
           "gelu": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
           "gelu_erf": torch.nn.functional.gelu, "swish": torch.nn.functional.silu,
           "softmax": lambda t: torch.softmax(t, -1)}
    for name, f in fns.items():
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        (f(xt) * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(a["nlgrad_" + name], xt.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    # HARD_SIGMOID as PopLibs defines it: clamp(0.2 x + 0.5, 0, 1).
    y = np.clip(0.2 * x + 0.5, 0, 1)
    np.testing.assert_allclose(a["nl_hard_sigmoid"], y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(a["nlgrad_hard_sigmoid"], np.where((y > 0) & (y < 1), 0.2 * g, 0), rtol=1e-6, atol=1e-6)


def test_replicated_graph_streams_control_flow_and_collectives(built):
    out, err = run(built, "replication")
    a = parse(out)
    R = 4
    assert a["replication_factor"] == R
    np.testing.assert_array_equal(a["replica_target"], [1, 4])  # one IPU of 4 tiles per replica
    w = a["in_w"].astype(np.float32)
    xs = [a[f"in_x_{r}"].astype(np.float32) for r in range(R)]
    np.testing.assert_array_equal(xs[1], _ramp(6, 0.4, -0.5))  # each replica read its own stream
    ys = [x * w + np.float32(0.25) for x in xs]  # b is a BROADCAST stream: b[0] on every replica
    Y = np.stack(ys).astype(np.float64)
    got = lambda name: np.stack([a[f"{name}_{r}"] for r in range(R)])
    tol = dict(rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got("y"), Y, **tol)
    np.testing.assert_array_equal(got("replica_index"), np.arange(R)[:, None])
    every = lambda v: np.broadcast_to(v, Y.shape)
    np.testing.assert_allclose(got("ar_add"), every(Y.sum(0)), **tol)
    np.testing.assert_allclose(got("ar_mean"), every(Y.mean(0)), **tol)
    np.testing.assert_allclose(got("ar_mul"), every(Y.prod(0)), rtol=1e-5)
    np.testing.assert_array_equal(got("ar_min"), every(Y.min(0)))
    np.testing.assert_array_equal(got("ar_max"), every(Y.max(0)))
    np.testing.assert_allclose(got("ar_square_add"), every((Y ** 2).sum(0)), rtol=1e-6)
    np.testing.assert_array_equal(got("ar_local"), Y.astype(np.float32))

    def grouped(groups, f):
        res = np.zeros_like(Y)
        for grp in groups:
            for r in grp:
                res[r] = f(Y[grp])
        return res
    cons2, orth2 = [[0, 1], [2, 3]], [[0, 2], [1, 3]]
    np.testing.assert_allclose(got("ar_cons2"), grouped(cons2, lambda v: v.sum(0)), **tol)
    np.testing.assert_allclose(got("ar_orth2"), grouped(orth2, lambda v: v.sum(0)), **tol)
    np.testing.assert_allclose(got("ar_strided2"), grouped(orth2, lambda v: v.sum(0)), **tol)
    np.testing.assert_array_equal(got("ar_inplace_max_cons2"), grouped(cons2, lambda v: v.max(0)))
    for r in range(R):
        np.testing.assert_array_equal(a[f"ag_{r}"], Y)
        grp = orth2[r % 2]
        np.testing.assert_array_equal(a[f"ag_orth2_{r}"], Y[grp])
    full = np.concatenate([Y.sum(0), [0, 0]])  # 6 elements over 4 replicas: 2 each, zero-padded
    np.testing.assert_allclose(got("rs"), full.reshape(R, 2), **tol)
    s01, s23 = Y[0] + Y[1], Y[2] + Y[3]
    np.testing.assert_allclose(got("rs_cons2"), [s01[:3], s01[3:], s23[:3], s23[3:]], **tol)
    np.testing.assert_array_equal(got("bcast_root1_cons2"), Y[[1, 1, 3, 3]])
    # Control flow per replica: replica r loops r + 1 times; the If follows y[0]'s sign.
    np.testing.assert_allclose(got("loop_acc"), np.stack([(r + 1) * Y[r] for r in range(R)]), rtol=1e-6)
    branch = np.stack([10 * Y[r] if Y[r, 0] > 0 else -Y[r] for r in range(R)])
    assert (Y[:, 0] > 0).any() and (Y[:, 0] <= 0).any()  # the replicas did diverge
    np.testing.assert_allclose(got("branch_sum"), every(branch.sum(0)), rtol=1e-5)
    np.testing.assert_array_equal(got("remote_row1"), [[100 * r, 100 * r + 1, 100 * r + 2] for r in range(R)])
    # A collective that only some replicas of a group reach is an error (a hang on an IPU).
    assert a["diverge_error"] == 1 and "only 2 of the 4 replicas" in out
    assert a["bad_group"] == 1 and a["bad_factor"] == 1
    # The IPU model's cost of an all-reduce of 4000 bytes over 4 replicas
    # (docs/poplar.md): 2(G-1) steps of a 500-cycle global sync, 2(G-1)/G of
    # the bytes at 32 GB/s, and on-tile adds of a 1/G slice per step.
    G, B, tiles = 4, 4000, 4
    link = 2 * (G - 1) * 500 + np.ceil(2 * (G - 1) / G * B / (32e9 / 1.33e9))
    per_step = np.ceil(np.ceil(np.ceil(B / tiles) / G) / 8)
    assert a["allreduce_cycles"] == link + 2 * (G - 1) * (11 + 2 * per_step)


def _transform(a, first_axis, trunc_lo, trunc_hi, dil, pad_lo, pad_hi, flip):
    """ConvParams' input/kernel transform of the spatial axes of `a` (from
    `first_axis`), as the Poplar API documents it: truncate, dilate, pad, flip."""
    for d in range(len(dil)):
        ax = first_axis + d
        n = a.shape[ax]
        a = np.take(a, range(trunc_lo[d], n - trunc_hi[d]), axis=ax)
        m = a.shape[ax]
        shape = list(a.shape)
        shape[ax] = (m - 1) * dil[d] + 1 if m else 0
        z = np.zeros(shape)
        idx = [slice(None)] * a.ndim
        idx[ax] = slice(None, None, dil[d])
        z[tuple(idx)] = a
        widths = [(0, 0)] * a.ndim
        widths[ax] = (pad_lo[d], pad_hi[d])
        a = np.pad(z, widths)
        if flip[d]:
            a = np.flip(a, axis=ax)
    return a


def _conv_ref(x, w, groups, it, kt, ot):
    """poplin::convolution by its definition: x [B][G*IC][...], w [G][OC][IC][...]."""
    xt, wt = _transform(x, 2, *it), _transform(w, 3, *kt)
    B, G, OC, IC = x.shape[0], groups, w.shape[1], w.shape[2]
    xt = xt.reshape((B, G, IC) + xt.shape[2:])
    osz = [xt.shape[3 + d] - wt.shape[3 + d] + 1 for d in range(2)]
    y = np.zeros((B, G, OC, *osz))
    for k0 in range(wt.shape[3]):
        for k1 in range(wt.shape[4]):
            win = xt[:, :, :, k0:k0 + osz[0], k1:k1 + osz[1]]
            y += np.einsum("bgiyx,goi->bgoyx", win, wt[:, :, :, k0, k1])
    y = y.reshape((B, G * OC, *osz))
    tl, tu, stride, pl, pu = ot
    for d in range(2):
        ax = 2 + d
        y = np.take(y, range(tl[d], y.shape[ax] - tu[d]), axis=ax)
        y = np.take(y, range(0, y.shape[ax], stride[d]), axis=ax)
        widths = [(0, 0)] * 4
        widths[ax] = (pl[d], pu[d])
        y = np.pad(y, widths)
    return y


def test_convolution_transforms_match_numpy(built):
    out, _ = run(built, "conv")
    a = parse(out)
    x, w, dy = a["in_x"], a["in_w"], a["in_dy"]
    it = ([1, 0], [0, 1], [2, 1], [1, 2], [0, 1], [False, True])
    kt = ([0, 0], [0, 0], [1, 2], [0, 1], [1, 0], [True, False])
    ot = ([1, 0], [0, 1], [2, 1], [0, 1], [1, 0])
    conv = lambda xx, ww: _conv_ref(xx, ww, 2, it, kt, ot)  # noqa: E731
    y = conv(x, w)
    assert y.shape == a["y"].shape == (2, 6, 3, 5)
    np.testing.assert_allclose(a["y"], y, rtol=1e-5, atol=1e-5)
    # weight deltas: the gradient of sum(dy * conv(x, w)) in w (conv is linear in w)
    dw = np.zeros(w.shape)
    for j in np.ndindex(w.shape):
        e = np.zeros(w.shape)
        e[j] = 1.0
        dw[j] = (dy * conv(x, e)).sum()
    np.testing.assert_allclose(a["dw"], dw, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(a["w_updated"], w - 0.5 * dw, rtol=1e-5, atol=1e-4)
    # the input gradient (getGradientParams): the adjoint of the forward conv in x
    fw, fdy = a["in_fw"], a["in_fdy"]
    fit = ([0, 0], [0, 0], [1, 1], [1, 0], [0, 2], [False, False])
    fkt = ([0, 0], [0, 0], [2, 1], [0, 0], [0, 0], [False, False])
    fot = ([0, 0], [0, 0], [3, 2], [0, 0], [0, 0])
    fwd = lambda xx: _conv_ref(xx, fw, 1, fit, fkt, fot)  # noqa: E731
    x_shape = (2, 3, 7, 6)
    assert fwd(np.zeros(x_shape)).shape == fdy.shape
    dx = np.zeros(x_shape)
    for j in np.ndindex(x_shape):
        e = np.zeros(x_shape)
        e[j] = 1.0
        dx[j] = (fdy * fwd(e)).sum()
    np.testing.assert_allclose(a["fdx"], dx, rtol=1e-5, atol=1e-4)
    assert a["rejected_unknown_option"] == 1


def test_half_conversion_matches_numpy(built):
    """float -> half rounds to nearest even, subnormals included (they used
    to flush to zero, which changed float16 optimizer state)."""
    out, _ = run(built, "half")
    a = parse(out)
    want = a["in"].astype(np.float32).astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(a["half"], want)
    assert (np.abs(want) < 2.0 ** -14).sum() > 100 and (want != 0).sum() > 100
