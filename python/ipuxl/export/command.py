"""``ipuxl export FORMAT script.py [args...] --out FILE``: runs a PopXL script
as ``ipuxl run`` does, captures the Sessions it creates (as ``ipuxl profile``
does) and exports the main one's Ir: ``popart-ir`` (PopART's IR JSON dump)
``onnx`` (an ONNX opset 11 model of the inference program, with the
variables' values when the script ended) or ``poplar`` (a directory with
a standalone Poplar C++ program and those values, :mod:`.poplar_emit`).
"""
import json
import sys

__all__ = ["FORMATS", "split_out", "run_export"]

FORMATS = ("popart-ir", "onnx", "poplar")


def split_out(out, args):
    """``--out FILE`` may come before the script or last, after its arguments
    (``ipuxl export onnx model.py --batch 4 --out model.onnx``): the trailing
    pair is the command's when ``--out`` was not given before the script."""
    args = list(args)
    if out is None and len(args) >= 2 and args[-2] == "--out":
        out, args = args[-1], args[:-2]
    return out, args


def _write(fmt: str, captured, path: str, no_main: bool = False) -> None:
    from . import onnx_model, popart_ir, unmapped_op_types

    ir = captured.ir
    if fmt == "poplar":
        from .poplar_emit import export_poplar

        session = captured.session
        variables = [v for v in ir.main_graph.variables]
        weights = session.get_tensors_data(variables) if variables else {}
        summary = export_poplar(ir, path, weights=weights, profile=captured.profile,
                                main=not no_main)
        print(f"ipuxl export poplar: {summary['functions']} Function(s), {summary['calls']} "
              f"call site(s), {summary['repeats']} Repeat(s); {summary['model_mapped']} tensors "
              f"mapped as the IPU model maps them, {len(summary['linear_mapped'])} linearly",
              file=sys.stderr)
        return
    if fmt == "popart-ir":
        with open(path, "w") as f:
            json.dump(popart_ir(ir), f, indent=1)
        missing = unmapped_op_types(ir)
        if missing:
            print("ipuxl export: no PopART identifier for " + ", ".join(missing)
                  + " (written as ai.graphcore.<type>:1)", file=sys.stderr)
        return
    session = captured.session
    variables = list(ir.main_graph.variables)
    weights = session.get_tensors_data(variables) if variables else {}
    model = onnx_model(ir, weights=weights)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def run_export(ns, run_script) -> int:
    """The command: ``ns`` has ``format``, ``out``, ``session``, ``script``,
    ``args``; ``run_script(script, args)`` runs the script (``ipuxl run``)."""
    from .. import profile as prof
    from .. import settings

    out, args = split_out(ns.out, ns.args)
    no_main = bool(getattr(ns, "no_main", False))
    if args and args[-1] == "--no-main" and ns.format == "poplar":
        no_main, args = True, args[:-1]
        out, args = split_out(out, args)
    if out is None:
        print("ipuxl export: give --out FILE", file=sys.stderr)
        return 2
    if ns.session is not None and ns.session < 1:
        print(f"ipuxl export: --session counts from 1, got {ns.session}", file=sys.stderr)
        return 2
    model = prof.IpuModel.from_env(prof.IpuModel(allow_out_of_memory=True))
    with settings.override(ipu_model=vars(model)), prof.capture(model) as captured:
        code = run_script(ns.script, args)
    if not captured:
        print(f"ipuxl export: {ns.script} created no Session: nothing to export",
              file=sys.stderr)
        return code or 1
    if ns.session is not None and ns.session > len(captured):
        print(f"ipuxl export: --session {ns.session}, but {ns.script} created "
              f"{len(captured)} Session(s)", file=sys.stderr)
        return 2
    if ns.session is not None:
        main = ns.session - 1
    else:  # the one that ran most (a training script's training Session), first of equals
        runs = [c.finish().runs for c in captured]
        main = runs.index(max(runs))
    try:
        _write(ns.format, captured[main], out, no_main)
    except (NotImplementedError, ImportError) as e:
        hint = ""
        if len(captured) > 1 and ns.session is None:
            hint = (f" (exported session {main + 1} of {len(captured)}, the one that ran most; "
                    "--session N picks another, such as a test Session)")
        print(f"ipuxl export {ns.format}: {e}{hint}", file=sys.stderr)
        return 1
    print(f"ipuxl export: wrote {out} ({ns.format}, session {main + 1} of {len(captured)})")
    return code
