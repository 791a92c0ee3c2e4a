"""Float format definitions (``popxl_addons.ops.fp8_utils``): exponent and
mantissa bits, exponent bias, subnormals, reserved NaN codes, and the largest
value and the exponent range of each format."""
from collections import namedtuple

__all__ = ["FpDef", "ieee_fp32_no_denorms", "ieee_fp16_denorms", "float8_152_def",
           "float8_143_def"]

FpDef = namedtuple("FpDef", ["num_exp_bits", "num_mantissa_bits", "fix_exponent_bias",
                             "include_denorm", "has_nans", "max_value", "max_exp", "min_exp"])

ieee_fp32_no_denorms = FpDef(8, 23, 127, False, True, 3.4028235e38, 127, -126)
ieee_fp16_denorms = FpDef(5, 10, 15, True, True, 65504, 15, -14)
float8_152_def = FpDef(5, 2, 16, True, False, 57344, 15, -17)
float8_143_def = FpDef(4, 3, 8, True, False, 240, 7, -10)
