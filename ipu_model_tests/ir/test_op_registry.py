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


#: A trait read from an op type: comparing it, testing its membership in a
#: collection, or looking it up in a constant table (``_FLOPS[op.type]``).
_TYPE_TEST = re.compile(r"\.type\s*(==|!=)|(?<!dtype)\.type\s+(not\s+)?in\b|"
                        r"\b_?[A-Z][A-Z0-9_]*(\[|\.get\()\s*\w+\.type\b|"
                        r"_NO_RECOMPUTE|SIDE_EFFECTS|STASH_OUTPUTS")


def test_no_trait_is_read_from_an_op_type_string():
    """Traits come from the OpDef. Pattern-matching passes (host passes match
    the ops they fuse; decompose_sum rewrites Sum ops) may name op types."""
    allowed = {os.path.join("transforms", "decompose_sum.py"), "opdef.py"}
    offenders = []
    for root, _, files in os.walk(PKG):
        if os.sep + "host_passes" in root:
            continue
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), PKG)
            if f.endswith(".py") and rel not in allowed:
                for i, line in enumerate(open(os.path.join(root, f)), 1):
                    if _TYPE_TEST.search(line):
                        offenders.append(f"{rel}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_guard_catches_membership_tests_and_tables():
    for line in ('if op.type in _CALLERS:', 'if op.type not in ("Call", "Repeat"):',
                 'f = _FLOPS[op.type](op)', 'if e.type == "Exp":', '_COSTS.get(op.type)'):
        assert _TYPE_TEST.search(line), line
    for line in ('d = get_opdef(op.type)', 'out[op.type][op.id] = f',
                 'np.asarray(a).dtype.type in _FLOAT_NP'):
        assert not _TYPE_TEST.search(line), line


def _cpp_sources():
    cpp = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "cpp"))
    if not os.path.isdir(cpp):
        pytest.skip("the C++ sources are not beside this checkout")
    for root, _, files in os.walk(cpp):
        for f in files:
            if f.endswith((".cpp", ".hpp", ".h")):
                yield os.path.join(root, f)


def test_the_core_reads_no_trait_from_an_op_type_string():
    """The C++ core reads typed fields of each op record (kind, cost class,
    traits): the IPU model names no op type at all, and no file of the core
    compares an op's type string."""
    types = set(registered_ops())
    literal = re.compile(r'"((?:[^"\\]|\\.)*)"')
    offenders = []
    for path in _cpp_sources():
        in_model = os.sep + "model" + os.sep in path
        for i, line in enumerate(open(path, encoding="utf-8"), 1):
            code = line.split("//")[0]
            if re.search(r"\.type\s*(==|!=)|\btype\s*(==|!=)\s*\"", code):
                offenders.append(f"{path}:{i}: {line.strip()}")
            if in_model:
                for m in literal.finditer(code):
                    s = m.group(1)
                    if s in types or s.endswith("Inplace"):
                        offenders.append(f"{path}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_every_registered_op_declares_a_cost_class():
    """The IPU model prices each kernel op by the cost class its OpDef
    declares; an op without one would be refused when profiled."""
    import importlib
    import pkgutil

    import ipuxl.addons.ops as addon_ops
    from ipuxl.opdef import COST_CLASSES

    for m in pkgutil.iter_modules(addon_ops.__path__):  # the addons' ops register too
        importlib.import_module(f"{addon_ops.__name__}.{m.name}")

    missing = [t for t, d in registered_ops().items() if d.cost is None]
    assert not missing, f"ops without a cost class (define_op(..., cost=...)): {missing}"
    for t, d in registered_ops().items():
        assert d.cost.cls in COST_CLASSES
        assert (d.cost.cls == "program") == (d.kind != "kernel"), t


def test_an_op_without_a_cost_class_is_refused_by_the_ipu_model():
    import numpy as np

    import ipuxl as popxl
    from ipuxl.lowering import lower
    from ipuxl.lowering.program import to_desc
    from ipuxl.opdef import _REGISTRY, define_op
    from ipuxl.op import create_op
    from ipuxl.ops.rules import like_input
    from ipuxl.profile import IpuModel
    from ipuxl.profile.report import profile_program

    d = define_op("UncostedRelu", like_input(0), kernel="Relu")
    try:
        assert d.cost is None
        ir = popxl.Ir()
        with ir.main_graph:
            x = popxl.variable(np.zeros((4, 4), np.float32))
            create_op("UncostedRelu", [x], ["y"])
        prog = lower(ir)
        desc = to_desc(prog, with_data=False)[0]
        with pytest.raises(ValueError, match="UncostedRelu.*declare its cost class"):
            profile_program(prog, desc, IpuModel())
    finally:
        del _REGISTRY["UncostedRelu"]


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
