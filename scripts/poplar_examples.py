#!/usr/bin/env python3
"""Build and run Graphcore's Poplar tutorials and examples against ipuxl's Poplar.

    python3 scripts/poplar_examples.py --examples PATH [--build-dir build/dev]
        [--hardware-on-model] [--mnist-dir DIR] [--json results.json] [--keep DIR]

PATH is a checkout of graphcore/examples fetched by the user (nothing from it
is part of this project). The examples are copied to a scratch folder and
their own pytest files run unchanged there, after the environment that
``eval "$(ipuxl poplar-env)"`` would set, with ``tutorials/utils`` on
PYTHONPATH (they import ``tutorials_tests.testing_util``):

* tutorials/tutorials/poplar: tut1..tut6 (the complete versions, tut6.cpp);
* tutorials/simple_applications/poplar/mnist (regression-demo);
* tutorials/feature_examples/poplar/advanced_example and prefetch.

Their Makefiles run unchanged (g++ ... -lpoplar -lpopops ...; advanced_example
runs ``popc``, ipuxl's, and needs libboost-program-options-dev; tutorial 4's
``cpp_example`` links ``-lpva``, ipuxl's small reader of the profile.pop its
autoReport writes).

Hardware variants (``*_ipu_hardware*``, ``--device ipu``, prefetch, which
asks for an IPU only) are refused by ipuxl's DeviceManager with its
documented message: they are reported as "refused", which is what this
project promises without an IPU. ``--hardware-on-model`` sets
IPUXL_POPLAR_DEVICES=model, under which IPU requests get IPU model devices,
and then they are expected to pass too.

MNIST: the example's test downloads the data set with ``get_data.sh`` from
Graphcore's servers. Without ``--mnist-dir`` (a folder holding the four
``*-idx*-ubyte`` files), this script writes a synthetic data set of the same
format and size (ten noisy prototypes), and a pytest plugin makes the test's
``./get_data.sh`` step a no-op when the files are in place; the example's
own code reads them as it would read MNIST.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _poplar_env():
    """ipuxl.poplar_env, loaded by path: it needs nothing of ipuxl's core."""
    import importlib.util

    try:
        import ipuxl.poplar_env as mod  # an installed ipuxl
        return mod
    except ImportError:
        pass
    spec = importlib.util.spec_from_file_location("ipuxl_poplar_env", HERE.parent / "python" / "ipuxl" / "poplar_env.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

SUBTREES = [
    "tutorials/tutorials/poplar",
    "tutorials/simple_applications/poplar/mnist",
    "tutorials/feature_examples/poplar/advanced_example",
    "tutorials/feature_examples/poplar/prefetch",
    "tutorials/utils",
]

TEST_FILES = [
    "tutorials/tutorials/poplar/tut1_variables/tests/test_tut1.py",
    "tutorials/tutorials/poplar/tut2_operations/tests/test_tut2.py",
    "tutorials/tutorials/poplar/tut3_vertices/tests/test_tut3.py",
    "tutorials/tutorials/poplar/tut4_profiling/tests/test_tut4.py",
    "tutorials/tutorials/poplar/tut5_matrix_vector/tests/test_tut5_complete.py",
    "tutorials/tutorials/poplar/tut5_matrix_vector/tests/test_tut5_ipu_hardware_complete.py",
    "tutorials/tutorials/poplar/tut6_matrix_vector_opt/tests/test_tut6.py",
    "tutorials/simple_applications/poplar/mnist/tests/test_poplar_mnist.py",
    "tutorials/feature_examples/poplar/advanced_example/tests/test_example.py",
    "tutorials/feature_examples/poplar/prefetch/test_prefetch.py",
]

# Tests that need an IPU (by what they run, not by their markers, which
# upstream does not set consistently).
HARDWARE_TESTS = {
    ("test_tut1.py", "test_run_ipu_hardware"),
    ("test_tut4.py", "test_run_ipu_hardware"),
    ("test_tut5_ipu_hardware_complete.py", "test_run_complete"),
    ("test_tut6.py", "test_run_complete_ipu_hardware"),
    ("test_poplar_mnist.py", "test_ipu_hardware"),
    ("test_example.py", "test_run_ipu"),
    ("test_prefetch.py", "test_run_prefetch"),
}
# Tests that need something that is not Poplar (none: tutorial 4's
# cpp_example reads the profile with ipuxl's small libpva).
OUTSIDE = {}
REFUSAL = ("no IPU hardware device is available", "No IPU hardware available", "Error attaching to device",
           "No devices found")

PLUGIN = '''
"""ipuxl's runner: makes the MNIST test's download step a no-op when the data is in place."""
from pathlib import Path


def pytest_configure(config):
    import tutorials_tests.testing_util as tu

    original = tu.run_command

    def run_command(cmd, cwd, *args, **kwargs):
        if str(cmd).strip() == "./get_data.sh" and all(
                (Path(cwd) / "data" / f).exists() for f in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")):
            return "ipuxl: MNIST data already in place; download skipped"
        return original(cmd, cwd, *args, **kwargs)

    tu.run_command = run_command
'''


def write_synthetic_mnist(folder: Path, seed: int = 0) -> None:
    """Writes MNIST-format idx files: 60,000 + 10,000 28x28 images of ten classes."""
    import numpy as np

    rng = np.random.default_rng(seed)
    proto = rng.integers(0, 256, (10, 784)).astype(np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n in (("train", 60000), ("t10k", 10000)):
        labels = rng.integers(0, 10, n).astype(np.uint8)
        images = np.clip(proto[labels] * 0.6 + rng.normal(0, 40, (n, 784)), 0, 255).astype(np.uint8)
        (folder / f"{prefix}-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 2051, n, 28, 28) + images.tobytes())
        (folder / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2049, n) + labels.tobytes())


def classify(file: str, name: str, outcome: str, text: str, hardware_on_model: bool) -> str:
    key = (file, name.split("[")[0])
    if key in OUTSIDE:
        return "outside" if outcome != "passed" else "passed"
    if key in HARDWARE_TESTS and not hardware_on_model:
        if outcome == "passed":
            return "passed"
        return "refused" if any(r in text for r in REFUSAL) else "failed"
    return outcome


def run(args) -> int:
    environment = _poplar_env().environment
    root = Path(args.examples).resolve()
    if (root / "tutorials" / "tutorials" / "poplar").is_dir():
        pass
    elif (root / "tutorials" / "poplar").is_dir() and root.name == "tutorials":
        root = root.parent
    else:
        print(f"poplar_examples: {root} is not a graphcore/examples checkout (no tutorials/tutorials/poplar)",
              file=sys.stderr)
        return 2
    work = Path(args.keep).resolve() if args.keep else Path(tempfile.mkdtemp(prefix="ipuxl-poplar-examples-"))
    for sub in SUBTREES:
        src, dst = root / sub, work / sub
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst)
    data = work / "tutorials/simple_applications/poplar/mnist/data"
    if args.mnist_dir:
        data.mkdir(parents=True, exist_ok=True)
        for f in Path(args.mnist_dir).iterdir():
            shutil.copy(f, data / f.name)
    else:
        write_synthetic_mnist(data)
    (work / "ipuxl_poplar_plugin.py").write_text(PLUGIN)
    env = environment(args.build_dir)
    env["PYTHONPATH"] = os.pathsep.join([str(work / "tutorials/utils"), str(work)] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    if args.hardware_on_model:
        env["IPUXL_POPLAR_DEVICES"] = "model"
    results = []
    for rel in TEST_FILES:
        path = work / rel
        xml = work / (path.name + ".xml")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "ipuxl_poplar_plugin", "-p", "no:cacheprovider",
               f"--junitxml={xml}", str(path)]
        proc = subprocess.run(cmd, cwd=str(path.parent), env=env, capture_output=True, text=True,
                              timeout=args.timeout)
        if not xml.exists():
            results.append({"file": path.name, "test": "<collection>", "outcome": "failed",
                            "detail": (proc.stdout + proc.stderr)[-2000:]})
            continue
        for case in ET.parse(xml).getroot().iter("testcase"):
            outcome, text = "passed", ""
            for tag in ("failure", "error", "skipped"):
                el = case.find(tag)
                if el is not None:
                    outcome = "skipped" if tag == "skipped" else "failed"
                    text = (el.get("message") or "") + "\n" + (el.text or "")
            status = classify(path.name, case.get("name"), outcome, text, args.hardware_on_model)
            results.append({"file": path.name, "test": case.get("name"), "outcome": status,
                            "time_s": float(case.get("time") or 0), "detail": text[-1500:] if status == "failed" else ""})
    width = max(len(r["file"]) + len(r["test"]) for r in results) + 3
    for r in results:
        note = OUTSIDE.get((r["file"], r["test"].split("[")[0]), "") if r["outcome"] == "outside" else ""
        print(f"{(r['file'] + '::' + r['test']).ljust(width)} {r['outcome']:8s} {note}")
    counts = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    print("\n" + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    for r in results:
        if r["outcome"] == "failed":
            print(f"\n--- {r['file']}::{r['test']}\n{r['detail']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "counts": counts}, indent=1))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if counts.get("failed") else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", required=True, help="a graphcore/examples checkout")
    p.add_argument("--build-dir", default=None, help="ipuxl developer build (default: IPUXL_CORE_DIR or the wheel)")
    p.add_argument("--hardware-on-model", action="store_true",
                   help="run the hardware variants on the IPU model (IPUXL_POPLAR_DEVICES=model)")
    p.add_argument("--mnist-dir", default=None, help="a folder with the MNIST idx files (default: synthetic)")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--keep", default=None, help="work in this folder and keep it (default: a temporary one)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per test file")
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
