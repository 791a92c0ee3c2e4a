"""Exporting an ipuxl Ir for other tools to read.

* :func:`popart_ir`: the IR as PopART's JSON dump (``POPART_IR_DUMP``), with
  PopART operator identifiers (:mod:`.popart_ids`); :func:`unmapped_op_types`
  lists the op types that have none.
* :func:`onnx_model`: the inference program as ONNX opset 11 (needs the
  ``export`` extra: onnx; onnxruntime to run it).
* :func:`export_poplar`: the program as a standalone Poplar C++ program
  (``program.cpp``, ``Makefile``, ``weights.npz``...) in a directory.
"""
from .onnx_export import OPSET, onnx_model
from .poplar_emit import export_poplar
from .popart_ir import popart_ir, unmapped_op_types

__all__ = ["popart_ir", "unmapped_op_types", "onnx_model", "OPSET", "export_poplar"]
