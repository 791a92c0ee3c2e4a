"""FLOP estimates of a graph, mirroring ``popxl_addons.performance_utils``.

``evaluate_FLOPs(graph)`` returns ``{op type: {op id: FLOPs}}`` for the op
types it knows (``MatMul``, ``Add``, ``Sub``, ``Mul``, ``Div``,
``GroupNorm``: those whose OpDef's cost declares a ``flops`` rule) plus ``"TOT"``, the graph's total. An op that calls
a graph (``Call``, ``Repeat``) contributes that graph's breakdown, times the
repeat count for ``Repeat``, nested under the key
``"<op type>_<op id>(<graph name>)"``. Counting: a matmul ``(.., n, k) @
(.., k, m)`` costs ``2 k`` per output element, an element-wise binary op one
per output element.
"""
import re
from collections import defaultdict
from math import floor, log10
from typing import Dict


from ..opdef import get_opdef

from ..graph import Graph
from ..utils import table_to_string

__all__ = ["total_FLOPs", "evaluate_ir_FLOPs", "evaluate_FLOPs", "print_FLOPs",
           "format_flops_scientific"]


def _scale(v, factor):
    if isinstance(v, dict):
        return {k: _scale(x, factor) for k, x in v.items()}
    return v * factor


def _total(v) -> int:
    if isinstance(v, dict):
        return sum(_total(x) for x in v.values())
    return v


def _evaluate(graph: Graph, seen: Dict[Graph, dict]) -> dict:
    if graph in seen:
        return seen[graph]
    out = defaultdict(dict)
    tot = 0
    for op in graph.ops:
        kind = get_opdef(op.type).kind
        if kind in ("call", "repeat") and op.called_graphs:
            called = op.called_graphs[0]
            sub = _evaluate(called, seen)
            if kind == "repeat":
                sub = _scale(sub, int(op.attrs.get("repeat_count", 1)))
            tot += sub["TOT"]
            key = f"{op.type}_{op.id}({re.sub(r'_subgraph[(][0-9]+[)]', '', called.name)})"
            for k, v in sub.items():
                out[k][key] = v
        elif (d := get_opdef(op.type)).cost is not None and d.cost.flops is not None:
            f = d.cost.flops(op)
            tot += f
            out[op.type][op.id] = f
    out["TOT"] = tot
    seen[graph] = out
    return out


def evaluate_FLOPs(graph: Graph) -> Dict[str, int]:  # noqa: N802 - popxl_addons name
    """The FLOP breakdown of ``graph`` (see the module docstring)."""
    return _evaluate(graph, {})


def evaluate_ir_FLOPs(ir) -> Dict[str, int]:  # noqa: N802
    """The breakdown of ``ir``'s main graph, times the replication factor."""
    return _scale(evaluate_FLOPs(ir.main_graph), ir.replication_factor)


def total_FLOPs(ir) -> int:  # noqa: N802
    """Estimated FLOPs of one run of ``ir`` over all replicas."""
    return evaluate_ir_FLOPs(ir)["TOT"]


def format_flops_scientific(val, format: str = "nearest3") -> str:
    """``val`` as ``"<mantissa with 3 decimals>E<sign><2-digit exponent>"``:
    the exponent is the multiple of 3 nearest to ``val``'s magnitude
    ("nearest3"), or that of "K" (3), "M" (6), "G" (9), "T" (12)."""
    fixed = {"K": 3, "M": 6, "G": 9, "T": 12}
    if format == "nearest3":
        power = floor(log10(abs(val))) if val > 0 else 0
        exp = 3 * (power // 3 + (1 if power % 3 == 2 else 0))
    elif format in fixed:
        exp = fixed[format]
    else:
        raise ValueError("unknown format specified")
    sign = "-" if exp < 0 else "+"
    return f"{val * 10.0 ** (-exp):.3f}E{sign}{abs(exp):02d}"


def print_FLOPs(flops_breakdown: Dict[str, int], mode: str = "type",  # noqa: N802
                numerical_format: str = "nearest3") -> None:
    """Print a breakdown: per op type with its share of the total
    (``mode="type"``), or one row per op, nested keys joined with dots
    (``mode="flat"``); largest first."""
    if mode == "type":
        per_type = {k: _total(v) for k, v in flops_breakdown.items()}
        rows = [["Op Type", "FLOPs", "%"]]
        for k, v in sorted(per_type.items(), key=lambda kv: kv[1], reverse=True):
            share = 100 * v / per_type["TOT"] if per_type["TOT"] else 0.0
            rows.append([k, format_flops_scientific(v, numerical_format), f"{share:.1f}"])
    elif mode == "flat":
        flat = {}

        def walk(d, prefix):
            for k, v in d.items():
                key = f"{prefix}.{k}" if prefix else str(k)
                if isinstance(v, dict):
                    walk(v, key)
                else:
                    flat[key] = v

        walk(flops_breakdown, "")
        rows = [["Op Type", "FLOPs", "Op Name"]]
        for k, v in sorted(flat.items(), key=lambda kv: kv[1], reverse=True):
            rows.append([k.split(".")[0], format_flops_scientific(v, numerical_format), k])
        rows.append(["TOT", format_flops_scientific(flat["TOT"], numerical_format), ""])
    else:
        raise ValueError("Unknown mode specified. Please use `type` or `flat`.")
    print(table_to_string(rows))
