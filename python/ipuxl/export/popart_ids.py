"""PopART operator identifiers ``(domain, type, version)`` of ipuxl's op types.

Each entry is the identifier PopXL's op module for that op creates (graphcore/popart
``python/popxl/python_files/ops/*.py``), so that an exported IR reads like
PopART's own ``POPART_IR_DUMP``. One table rather than a field on every
``define_op``: the names are PopART's, not a trait any of ipuxl's passes read.

In-place variants (``XInplace``, ``XLhsInplace``) are PopART's custom operators
``ai.graphcore.XInplace:1`` (PopART creates them from the out-of-place op), as
are the optimizer updates below. Any other type has no known identifier:
:func:`popart_identifier` gives ``ai.graphcore.<ipuxl type>:1`` and says so.
"""
from typing import Dict, Tuple

__all__ = ["ONNX", "GRAPHCORE", "POPART_IDS", "popart_identifier"]

ONNX = "ai.onnx"
GRAPHCORE = "ai.graphcore"

_ONNX_OPS = {
    "Abs": 6, "Add": 6, "ArgMax": 11, "ArgMin": 11, "Cast": 9, "Ceil": 1, "Clip": 6,
    "Concat": 11, "Conv": 11, "Cos": 7, "CumSum": 11, "Div": 7, "Dropout": 10, "Equal": 7,
    "Exp": 6, "Floor": 6, "Gather": 1, "Greater": 9, "Identity": 1, "IsInf": 10, "IsNaN": 9,
    "ReduceL1": 1, "ReduceL2": 1, "Log": 6, "And": 7, "Not": 1, "Or": 7, "ReduceLogSum": 1,
    "ReduceLogSumExp": 1, "MatMul": 9, "ReduceMax": 1, "Max": 6, "ReduceMean": 1,
    "ReduceMin": 1, "Mul": 7, "Neg": 6, "AveragePool": 11, "MaxPool": 11, "Pow": 7,
    "ReduceProd": 1, "RandomUniform": 1, "RandomNormal": 1, "Relu": 6, "Reshape": 5,
    "RoiAlign": 10, "Scatter": 11, "Sign": 9, "Sin": 7, "Slice": 11, "Softmax": 11,
    "Split": 2, "Sqrt": 6, "Sub": 7, "ReduceSum": 1, "ReduceSumSquare": 1, "Tanh": 6,
    "TopK": 1, "Transpose": 1, "Where": 9, "If": 11,
}
# ipuxl type -> PopART type where the names differ.
_RENAMED = {
    "Onehot": (ONNX, "OneHot", 9),
    "BatchNormInference": (ONNX, "BatchNormalization", 9),
    "GroupNorm": (GRAPHCORE, "GroupNormalization", 1),
    "Repeat": (ONNX, "Loop", 11),  # popxl.ops.repeat creates a LoopOp
    # the pow2-scaled float8 ops are PopART's Conv / MatMul ops with a scale input
    "ConvPow2Scaled": (ONNX, "Conv", 11),
    "MatMulPow2Scaled": (ONNX, "MatMul", 9),
}
_GRAPHCORE_OPS = (
    "AddLhsInplace", "Pow2ScaleThenCast", "CastThenPow2Scale", "RemoteCodeLoad", "AllReduce",
    "ReplicatedAllGather", "ReplicatedAllReduce", "ReplicatedAllReduceInplace",
    "ReplicatedReduceScatter", "Call", "Detach", "DynamicSlice", "DynamicUpdate",
    "DynamicUpdateInplace", "Fmod", "Gelu", "GeluErf", "Histogram", "HostLoad", "HostStore",
    "IncrementMod", "Init", "Resize", "IoTileCopy", "IpuCopy", "ReduceMedian", "Nll",
    "PrintTensor", "ModifyRandomSeed", "RemoteLoad", "RemoteStore", "ScaledAdd",
    "ScatterReduce", "ShapedDropout", "Subsample", "Swish", "TiedGather",
    "NlllWithSoftmaxGradDirect", "SoftmaxGrad", "GeluGrad", "TanhGrad", "ReluGrad", "GroupNormGrad",
    "MultiExchange",
    # gradient ops (PopART's GradOperators)
    "AveragePoolGrad", "ConvDataGrad", "ConvWeightsGrad", "MaxPoolGrad", "ResizeGrad",
    "RoiAlignGrad",
    # optimizer updates (popxl.ops.var_updates)
    "Accumulate", "AccumulatorScale", "SparseAccumulate", "CopyVarUpdate", "AdamUpdater",
    "AdamVarUpdate", "LambSquare",
)

#: ipuxl op type -> PopART ``(domain, type, version)``.
POPART_IDS: Dict[str, Tuple[str, str, int]] = {
    **{t: (ONNX, t, v) for t, v in _ONNX_OPS.items()},
    **{t: (GRAPHCORE, t, 1) for t in _GRAPHCORE_OPS},
    **_RENAMED,
}


def popart_identifier(op_type: str) -> Tuple[Tuple[str, str, int], bool]:
    """``((domain, type, version), known)`` for an ipuxl op type; unknown types
    get ``ai.graphcore.<op_type>:1`` and ``known`` False."""
    oid = POPART_IDS.get(op_type)
    if oid is not None:
        return oid, True
    if op_type.endswith("Inplace"):
        return (GRAPHCORE, op_type, 1), True
    return (GRAPHCORE, op_type, 1), False
