"""The op registry (ipuxl.opdef) is complete and is the one source of traits."""
import ast
import os
import re

import pytest

import ipuxl
from ipuxl import grad
from ipuxl._core_loader import core
from ipuxl.opdef import KINDS, registered_ops

PKG = os.path.dirname(ipuxl.__file__)


def _created_op_types():
    """Op types the builders pass to ``create_op``, directly or through a
    helper whose first parameter (``kind``) it forwards to ``create_op``."""
    types, forwarders, calls = set(), {"create_op"}, []
    for root, _, files in os.walk(os.path.join(PKG, "ops")):
        for f in files:
            if not f.endswith(".py"):
                continue
            tree = ast.parse(open(os.path.join(root, f)).read())
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.args.args \
                        and node.args.args[0].arg == "kind":
                    forwarders.add(node.name)
                if isinstance(node, ast.Call):
                    calls.append(node)
    for node in calls:
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        if name in forwarders and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            types.add(node.args[0].value)
    return types


def test_every_op_type_a_builder_creates_is_registered():
    created = _created_op_types()
    assert len(created) > 60  # the scan found the builders
    assert not created - set(registered_ops()), created - set(registered_ops())


@pytest.mark.parametrize("op_type", sorted(registered_ops()))
def test_every_registered_op_is_complete(op_type):
    d = registered_ops()[op_type]
    assert d.kind in KINDS
    assert callable(d.shape)
    if d.kind == "kernel":
        assert d.kernel in core.kernel_names(), f"{op_type}: no C++ kernel {d.kernel!r}"
    else:
        assert d.kernel is None
    rules = grad.registered_op_types()
    assert op_type in rules or d.no_grad, \
        f"{op_type} has no gradient rule, no decomposition and no declared reason"


def test_no_trait_is_read_from_an_op_type_string():
    """Traits come from the OpDef. Pattern-matching passes (host passes match
    the ops they fuse; decompose_sum rewrites Sum ops) may name op types."""
    allowed = {os.path.join("transforms", "decompose_sum.py")}
    pattern = re.compile(r"\.type\s*(==|!=|in\b|not in\b)\s*[\"'(\[{]|_NO_RECOMPUTE|SIDE_EFFECTS|"
                         r"STASH_OUTPUTS")
    offenders = []
    for root, _, files in os.walk(PKG):
        if os.sep + "host_passes" in root:
            continue
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), PKG)
            if f.endswith(".py") and rel not in allowed:
                for i, line in enumerate(open(os.path.join(root, f)), 1):
                    if pattern.search(line):
                        offenders.append(f"{rel}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_declaring_a_type_twice_is_an_error():
    from ipuxl.opdef import define_op
    from ipuxl.ops.rules import like_input
    with pytest.raises(ValueError, match="already declared"):
        define_op("Add", like_input(0))


def test_an_undeclared_op_type_is_refused_at_creation():
    import numpy as np

    import ipuxl as popxl
    from ipuxl.op import create_op
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros(2, np.float32))
        with pytest.raises(NotImplementedError, match="'NoSuchOp' is not declared"):
            create_op("NoSuchOp", [x], ["y"])


def test_traits_match_popart():
    ops = registered_ops()
    assert ops["HostLoad"].side_effects and not ops["HostLoad"].recomputable
    assert ops["PrintTensor"].side_effects
    assert {t for t, d in ops.items() if d.stash_outputs} == {"Mul", "Div", "Pow", "Fmod"}
    assert not ops["RandomUniform"].recomputable and not ops["Dropout"].recomputable
    assert ops["AddLhsInplace"].modifies([None, None], {}) == (0,)
    assert ops["Call"].kind == "call" and ops["If"].kind == "if"
