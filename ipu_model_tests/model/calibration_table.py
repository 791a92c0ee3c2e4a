"""The IPU model's calibration table: every public Poplar figure the model
is checked against, with its source, the PopXL program that reproduces it
(public API only) and the tolerance.

``python scripts/ipu_model_calibration.py`` prints it (``--markdown`` for
docs/ipu_model.md); ``test_calibration_table.py`` asserts the tolerances.

Rows:

* Dense: one fp32 Keras ``Dense(4096 -> 1024)`` at batch 16 on one Mk2 IPU,
  Poplar 3.0 (shared/reference/ipu_model.md §4.3; graphcore/
  ipu_tensorflow_addons ``keras/experimental/auto_pipeline/utils/
  pva_utils_test.py``), measured as ``pva_utils.py`` measures the report
  (``test_ipu_model_calibration.modelled``). Tolerance 25% per category.
* BERT-Large SQuAD inference on one Mk2 IPU (graphcore/popliner
  ``tests/test_popart_bert_inf.py``; the program: ``bert_large.py``),
  measured as PopLiner's ``Stage`` sums it: vertex state and vertex code
  over all tiles (vertex code once per type per tile), exchange code of
  the DoExchange programs (internal exchange code), and the maximum over
  program steps of the variables live (always-live variables and
  constants plus the largest not-always-live step), and per layer as its
  ``test_layer_breakdown`` sums the operations of one layer. Tolerance 2x.
"""
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from ipuxl.profile import profile_ir

import bert_large
import test_ipu_model_calibration as dense

DENSE_SOURCE = ("graphcore/ipu_tensorflow_addons keras/experimental/auto_pipeline/utils/"
                "pva_utils_test.py (Model1Dense; ipu_model.md §4.3)")
BERT_SOURCE = "graphcore/popliner tests/test_popart_bert_inf.py::test_values"
BERT_LAYERS = "graphcore/popliner tests/test_popart_bert_inf.py::test_layer_breakdown"


@dataclass
class Row:
    program: str          # key of PROGRAMS
    figure: str           # the published quantity
    published: float
    factor: float         # model / published must lie in [1/factor, factor] ...
    rel: Optional[float]  # ... or, when set, |model / published - 1| <= rel
    source: str
    measure: Callable[[object], float]
    # A gap the model does not close yet: why (the test expects the row to
    # be outside its tolerance, and fails once it is inside).
    known_gap: str = ""

    def tolerance(self) -> str:
        return f"{self.rel:.0%}" if self.rel is not None else f"{self.factor:g}x"

    def within(self, model: float) -> bool:
        r = model / self.published
        if self.rel is not None:
            return abs(r - 1.0) <= self.rel
        return 1.0 / self.factor <= r <= self.factor


def _dense_measure(key):
    return lambda p: dense.modelled(p)[key]


def max_variable_usage(p) -> float:
    """PopLiner's max_vars_usage: the most bytes of variables live at one
    program step: always-live variables and constants plus the largest
    not-always-live step."""
    t = p.totals
    return float(t["variables"] + t["constants"] + max(p.steps["live_bytes"]))


def layer_sum(layer: int, column: str):
    """The sum of one op-table column over the ops of one encoder layer, as
    PopLiner's layer breakdown sums its operations (vertex state, exchange
    code, control code of the programs each op owns)."""
    prefix = f"Layer{layer}/"
    return lambda p: float(sum(r[column] for r in p.op_table() if r["name"].startswith(prefix)))


PROGRAMS: Dict[str, Callable] = {
    "dense": dense.dense_ir,
    "bert_large_squad": bert_large.bert_large_squad_ir,
}
PROGRAM_TEXT = {
    "dense": "ipu_model_tests/model/test_ipu_model_calibration.py:dense_ir",
    "bert_large_squad": "ipu_model_tests/model/bert_large.py:bert_large_squad_ir",
}

_DENSE = dict(dense.RECORDED, totalMemory=dense.TOTAL_MEMORY, cycleEst=dense.CYCLES)
ROWS: List[Row] = [
    Row("dense", k, float(v), 0, 0.25, DENSE_SOURCE, _dense_measure(k))
    for k, v in _DENSE.items()
] + [
    Row("bert_large_squad", "vertexInstanceState", 25_460_686, 2.0, None, BERT_SOURCE,
        lambda p: float(p.totals["vertexInstanceState"])),
    Row("bert_large_squad", "vertexCode", 9_887_022, 2.0, None, BERT_SOURCE,
        lambda p: float(p.totals["vertexCode"])),
    Row("bert_large_squad", "exchangeCode", 27_805_164, 2.0, None, BERT_SOURCE,
        lambda p: float(p.totals["internalExchangeCode"])),
    Row("bert_large_squad", "maxVariableUsage", 718_514_294, 2.0, None, BERT_SOURCE,
        max_variable_usage),
    # test_layer_breakdown: a middle layer (5) and the first one.
    Row("bert_large_squad", "Layer5 vertexInstanceState", 1_050_044, 2.0, None, BERT_LAYERS,
        layer_sum(5, "state_bytes")),
    Row("bert_large_squad", "Layer5 controlCode", 1_354_392, 2.0, None, BERT_LAYERS,
        layer_sum(5, "control_code_bytes")),
    Row("bert_large_squad", "Layer5 exchangeCode", 1_019_844, 2.0, None, BERT_LAYERS,
        layer_sum(5, "exchange_code_bytes"),
        known_gap="a layer's exchange code is half the published figure: the per-program "
                  "and per-region sizes are fitted to the dense layer of ipu_model.md 4.3 "
                  "[assumption]; 0.51 before the half partials of this program were "
                  "modelled, 0.4999 with the plans they give"),
    Row("bert_large_squad", "Layer0 exchangeCode", 3_657_184, 2.0, None, BERT_LAYERS,
        layer_sum(0, "exchange_code_bytes")),
]


def profiles(names=None) -> Dict[str, object]:
    """The model's profile of each program (Mk2, 1472 tiles)."""
    names = names or list(PROGRAMS)
    return {n: profile_ir(PROGRAMS[n](), "ipu2") for n in names}


def table(profs=None) -> List[dict]:
    profs = profs or profiles()
    out = []
    for r in ROWS:
        if r.program not in profs:
            continue
        m = r.measure(profs[r.program])
        out.append(dict(program=r.program, figure=r.figure, model=m, published=r.published,
                        ratio=m / r.published, tolerance=r.tolerance(), within=r.within(m),
                        known_gap=r.known_gap, source=r.source,
                        builder=PROGRAM_TEXT[r.program]))
    return out


def format_table(rows: List[dict], markdown: bool = False) -> str:
    if markdown:
        lines = ["| program | figure | model | published | model / published | tolerance | "
                 "within |", "|---|---|---:|---:|---:|---:|---|"]
        for r in rows:
            lines.append(f"| {r['program']} | {r['figure']} | {r['model']:,.0f} | "
                         f"{r['published']:,.0f} | {r['ratio']:.2f} | {r['tolerance']} | "
                         f"{'yes' if r['within'] else 'no'} |")
        return "\n".join(lines)
    lines = [f"{'program':<18}{'figure':<28}{'model':>15}{'published':>15}{'ratio':>7}"
             f"{'tol':>6}  within"]
    for r in rows:
        lines.append(f"{r['program']:<18}{r['figure']:<28}{r['model']:>15,.0f}"
                     f"{r['published']:>15,.0f}{r['ratio']:>7.2f}{r['tolerance']:>6}  "
                     f"{'yes' if r['within'] else 'NO: ' + (r['known_gap'] or 'outside')}")
    srcs = sorted({(r["program"], r["builder"], r["source"]) for r in rows})
    lines += [""] + [f"{p}: program {b}; source {s}" for p, b, s in srcs]
    return "\n".join(lines)
