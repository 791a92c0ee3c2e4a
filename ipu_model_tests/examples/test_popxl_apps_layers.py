"""A CI-sized subset of Graphcore's PopXL applications' own tests: the layer
tests of GPT-J (``nlp/gpt_j/popxl/tests/integration/layers``, each layer
against the Hugging Face PyTorch model at a tiny size, tensor-parallel over
replicas), run unchanged through the ``popxl`` -> ipuxl alias by
``scripts/popxl_apps.py``.

It needs a checkout of graphcore/examples (``IPUXL_EXAMPLES_DIR``) and the
application's packages in the runner's cache (``IPUXL_APPS_CACHE``,
default ``~/.cache/ipuxl/popxl_apps``, filled by one run of
``scripts/popxl_apps.py --apps gpt_j`` with ``--examples-utils``; the
checkout of graphcore/examples-utils goes in ``IPUXL_EXAMPLES_UTILS_DIR``).
Without them it skips and says which is missing. No network is used.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ipuxl import settings

pytestmark = pytest.mark.slow  # test processes of their own, about a minute

ROOT = Path(__file__).resolve().parents[2]
APP = "gpt_j"
LAYERS = "tests/integration/layers"

sys.path.insert(0, str(ROOT / "scripts"))
import popxl_apps  # noqa: E402


def _located():
    where = settings.apps_checkout()
    if not where["examples"]:
        pytest.skip("IPUXL_EXAMPLES_DIR is not set: no graphcore/examples checkout for the "
                    "PopXL applications' layer tests")
    examples = Path(where["examples"])
    if not examples.exists():
        pytest.skip(f"IPUXL_EXAMPLES_DIR={examples} does not exist")
    if not where["examples_utils"] or not Path(where["examples_utils"]).exists():
        pytest.skip("IPUXL_EXAMPLES_UTILS_DIR is not set (or missing): the apps' argument "
                    "parsing needs graphcore/examples-utils")
    return examples, Path(where["examples_utils"]), Path(where["cache"])


def test_gpt_j_layer_tests_pass_unchanged(tmp_path):
    examples, eutils, cache = _located()
    popxl_apps.export(examples, [f"nlp/{APP}/popxl"], tmp_path / "probe")
    if popxl_apps.cached_packages(tmp_path / "probe" / f"nlp/{APP}/popxl", cache) is None:
        pytest.skip(f"the {APP} app's packages are not in {cache}: fill it once with "
                    f"`python3 scripts/popxl_apps.py --apps {APP} --examples {examples} "
                    f"--examples-utils {eutils} --cache {cache}`")
    out = tmp_path / "apps.json"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "popxl_apps.py"),
                        "--examples", str(examples), "--examples-utils", str(eutils),
                        "--cache", str(cache), "--apps", APP, "-k", LAYERS,
                        "--timeout", "300", "--json", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    tests = json.loads(out.read_text())["tests"]
    assert len(tests) >= 5, r.stdout[-3000:]
    failed = [f"{t['nodeid']}: {t['outcome']} {t.get('exc_type')}: {(t.get('message') or '')[:300]}"
              for t in tests if t["outcome"] != "passed"]
    assert not failed, "\n".join(failed)
