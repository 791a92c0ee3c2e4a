"""Exporting an ipuxl Ir for other tools to read.

* :func:`popart_ir`: the IR as PopART's JSON dump (``POPART_IR_DUMP``), with
  PopART operator identifiers (:mod:`.popart_ids`); :func:`unmapped_op_types`
  lists the op types that have none.
* :func:`onnx_model`: the inference program as ONNX opset 11 (needs the
  ``export`` extra: onnx; onnxruntime to run it).
"""
from .onnx_export import OPSET, onnx_model
from .popart_ir import popart_ir, unmapped_op_types

__all__ = ["popart_ir", "unmapped_op_types", "onnx_model", "OPSET"]
