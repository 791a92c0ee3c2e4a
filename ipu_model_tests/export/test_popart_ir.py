"""ipuxl.export.popart_ir / ``ipuxl export popart-ir``: the IR as PopART's
JSON dump. The expected ops are what PopXL's op modules create for the same
user-guide programs (graphcore/popart python/popxl/python_files/ops/*.py:
host_load creates an Init ("undef") then a HostLoad reading it, add an
ai.onnx Add:6, repeat an ai.onnx Loop:11 over a ``__loop_wrapper`` graph
holding one ai.graphcore Call:1, copy_var_update_ a CopyVarUpdate)."""
import json
import os

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.cli import main
from ipuxl.export import popart_ir, unmapped_op_types
from ipuxl.export.command import split_out
from ipuxl.ops.sum_n import sum_n  # not public in popxl.ops: an op PopXL has no module for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, "examples", "user_guide")

GC, ONNX = "ai.graphcore", "ai.onnx"
INIT, HOST_LOAD, HOST_STORE = (GC, "Init", "1"), (GC, "HostLoad", "1"), (GC, "HostStore", "1")
ADD, CALL, LOOP = (ONNX, "Add", "6"), (GC, "Call", "1"), (ONNX, "Loop", "11")


def _export(tmp_path, script):
    out = tmp_path / "ir.json"
    assert main(["export", "popart-ir", os.path.join(GUIDE, script), "--out", str(out)]) == 0
    return json.loads(out.read_text())


def _ids(ops_):
    return [(o["domain"], o["type"], o["version"]) for o in ops_]


def test_simple_addition(tmp_path):
    d = _export(tmp_path, "simple_addition.py")
    assert list(d) == ["maingraph"]
    main_ops = d["maingraph"]
    assert _ids(main_ops) == [INIT, HOST_LOAD, INIT, HOST_LOAD, ADD, HOST_STORE]
    init, load = main_ops[0], main_ops[1]
    # HostLoad overwrites the Init's tensor, as PopART's HostLoadOp.
    assert load["inputs"][0]["name"] == init["outputs"][0]["name"]
    add = main_ops[4]
    assert [i["name"] for i in add["inputs"]] == [main_ops[1]["outputs"][0]["name"],
                                                  main_ops[3]["outputs"][0]["name"]]
    assert add["inputs"][0] == {"name": add["inputs"][0]["name"], "shape": "[1]",
                                "type": "FLOAT", "index": "0"}
    assert main_ops[5]["inputs"][0]["name"] == add["outputs"][0]["name"]
    # PopART writes every value as a string, the execution context by its name.
    assert {op["attributes"]["executionContext"] for op in main_ops} == {"Normal"}
    for op in main_ops:
        assert all(isinstance(v, str) for v in op["attributes"].values())


def test_repeat_has_popxl_loop_wrapper(tmp_path):
    d = _export(tmp_path, "repeat_graph_0.py")
    assert list(d) == ["maingraph", "add_subgraph(0)", "add_subgraph(0)__loop_wrapper"]
    assert _ids(d["maingraph"]) == [LOOP, HOST_STORE]
    assert d["maingraph"][0]["attributes"]["callee"] == "add_subgraph(0)__loop_wrapper"
    assert _ids(d["add_subgraph(0)__loop_wrapper"]) == [CALL]
    assert d["add_subgraph(0)__loop_wrapper"][0]["attributes"]["callee"] == "add_subgraph(0)"
    assert _ids(d["add_subgraph(0)"]) == [ADD]


def test_call_with_info_and_var_update(tmp_path):
    d = _export(tmp_path, "call_with_info.py")
    assert _ids(d["maingraph"]) == [CALL, HOST_STORE]
    (body,) = [g for g in d if g != "maingraph"]
    assert _ids(d[body]) == [ADD, (GC, "CopyVarUpdate", "1")]


def test_multi_callsites_one_graph(tmp_path):
    d = _export(tmp_path, "multi_callsites_of_a_graph.py")
    assert _ids(d["maingraph"]) == [INIT, HOST_LOAD, CALL, CALL, HOST_STORE]
    assert len(d) == 2
    callees = {o["attributes"]["callee"] for o in d["maingraph"] if o["type"] == "Call"}
    assert callees == {"add_subgraph(0)"}
    # As PopART's outlining tests read a dump: op types over all graphs.
    assert sorted(j["type"] for g in d.values() for j in g) == \
        sorted(["Init", "HostLoad", "Call", "Call", "HostStore", "Add"])


def test_forward_identifiers_and_tensors():
    ir = popxl.Ir()
    with ir.main_graph:
        s = popxl.h2d_stream((2, 6), popxl.float32, name="x")
        x = ops.host_load(s, "x")
        w = popxl.variable(np.ones((6, 3), np.float32), name="w")
        y = ops.softmax(ops.gelu(x @ w), axis=-1)
        y = ops.reshape(y, (3, 2))
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    d = popart_ir(ir)
    assert _ids(d["maingraph"]) == [INIT, HOST_LOAD, (ONNX, "MatMul", "9"), (GC, "Gelu", "1"),
                                    (ONNX, "Softmax", "11"), (ONNX, "Reshape", "5"), HOST_STORE]
    mm = d["maingraph"][2]
    assert [(i["name"], i["shape"]) for i in mm["inputs"]] == [("x_hostload", "[2 6]"),
                                                               ("w", "[6 3]")]
    assert mm["outputs"][0]["shape"] == "[2 3]"
    assert unmapped_op_types(ir) == []


def test_unknown_op_listed():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.ones(3, np.float32), name="a")
        sum_n([a, a, a])
    d = popart_ir(ir)
    assert _ids(d["maingraph"]) == [(GC, "Sum", "1")]
    assert unmapped_op_types(ir) == ["Sum"]


def test_out_after_script_args():
    assert split_out(None, ["--batch", "4", "--out", "f.json"]) == ("f.json", ["--batch", "4"])
    assert split_out("g.json", ["--out", "f.json"]) == ("g.json", ["--out", "f.json"])


def test_no_out_is_an_error(capsys):
    assert main(["export", "popart-ir", os.path.join(GUIDE, "simple_addition.py")]) == 2
    assert "--out" in capsys.readouterr().err
