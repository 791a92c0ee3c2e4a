#!/usr/bin/env python3
"""Prints the IPU model's calibration table: each public Poplar figure,
the model's value for the PopXL program that reproduces it, their ratio
and the tolerance (ipu_model_tests/model/calibration_table.py).

    python scripts/ipu_model_calibration.py [--markdown] [--only dense|bert_large_squad]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ipu_model_tests", "model"))

import calibration_table as ct  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--markdown", action="store_true", help="a table for docs/ipu_model.md")
    ap.add_argument("--only", choices=sorted(ct.PROGRAMS), action="append")
    args = ap.parse_args(argv)
    rows = ct.table(ct.profiles(args.only))
    print(ct.format_table(rows, markdown=args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
