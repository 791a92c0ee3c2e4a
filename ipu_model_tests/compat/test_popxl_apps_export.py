"""scripts/popxl_apps_export.py's summary of the programs the apps' tests
exported (the run itself needs a graphcore/examples checkout; see
docs/export.md)."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _module():
    import sys

    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    spec = importlib.util.spec_from_file_location(
        "popxl_apps_export", os.path.join(ROOT, "scripts", "popxl_apps_export.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_summary_counts_exports_and_groups_refusals_per_app():
    mod = _module()
    recs = [
        {"cwd": "/tmp/x/examples/nlp/gpt_j/popxl", "result": "exported"},
        {"cwd": "/tmp/x/examples/nlp/gpt_j/popxl", "result": "refused: Poplar export: op Foo ('f')"},
        {"cwd": "/tmp/x/examples/nlp/gpt_j/popxl", "result": "refused: Poplar export: op Foo ('f')"},
        {"cwd": "/tmp/x/examples/nlp/bert/popxl", "result": "exported"},
    ]
    text = mod.summarise(recs)
    assert "gpt_j: 1 of 3 programs exported" in text
    assert "  2  refused: Poplar export: op Foo ('f')" in text
    assert "bert: 1 of 1 programs exported" in text


def test_the_hook_records_each_session_without_raising(tmp_path, monkeypatch):
    """The sitecustomize hook exports every Session's program after it is
    built and records the result; a refused program is recorded, never
    raised into the app's test."""
    import json

    import numpy as np

    import ipuxl as popxl
    import ipuxl.ops as ops
    import ipuxl.session as session_mod
    from ipuxl.addons.ops.static_sparse_ops import dense_const_sparse_matmul

    sparse = pytest.importorskip("scipy.sparse")

    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("POPXL_APPS_EXPORT_LOG", str(log))
    monkeypatch.setattr(session_mod.Session, "__init__", session_mod.Session.__init__)  # restored after
    exec(compile(_module()._HOOK, "<sitecustomize hook>", "exec"), {})
    for refused in (False, True):
        ir = popxl.Ir()
        with ir.main_graph:
            x = popxl.variable(np.ones((2, 3), np.float32), name="x")
            # popxl-addons' static sparse matmul: refused (no popsparse in ipuxl's Poplar)
            y = dense_const_sparse_matmul(x, sparse.csr_matrix(np.eye(3, 2, dtype=np.float32)), 2) \
                if refused else x * 2.0
            ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
        popxl.Session(ir, "ipu_model")  # no exception either way
    results = [json.loads(line)["result"] for line in log.read_text().splitlines()]
    assert results[0] == "exported"
    assert results[1].startswith("refused: Poplar export: op SparseMatMul (")
