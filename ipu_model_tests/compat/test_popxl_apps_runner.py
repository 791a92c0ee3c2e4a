"""scripts/popxl_apps.py's pure parts: how a requirements.txt is planned and
how a failure is classified (ipuxl's or the environment's)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
popxl_apps = pytest.importorskip("popxl_apps")


def test_plan_requirements(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text(
        "--find-links https://example.invalid\n\n"
        "pyyaml==5.4.1\n"
        "dataclasses==0.8; python_version < '3.7'\n"
        "transformers==4.18.0\n"
        "datasets==2.1.0\n"
        "wandb==0.12.8\n"
        "sklearn==0.0\n"
        "examples-utils[common] @ git+https://github.com/graphcore/examples-utils.git@7cd37a8e\n"
        "git+ssh://git@github.com/graphcore/popxl-addons-internal.git@3dfc51e2#egg=popxl-addons\n")
    specs, notes, github = popxl_apps.plan_requirements(req)
    assert specs == ["transformers==4.23.1", "datasets==2.1.0", "wandb==0.17.9", "scikit-learn"]
    assert any(n.startswith("pyyaml==5.4.1 -> pyyaml") for n in notes)
    assert not any("dataclasses" in n for n in notes)          # marker false: skipped
    assert [(g["name"], g["ref"], g["extras"]) for g in github] == [
        ("examples-utils", "7cd37a8e", "[common]"), ("popxl-addons", "3dfc51e2", "")]


SCRIPT_FAILED = ("The following command failed: python3 finetuning.py\nWorking path: /x\n"
                 "Output of failed command:\nTraceback (most recent call last):\n"
                 "  File \"finetuning.py\", line 1\n{}\n")


@pytest.mark.parametrize("exc_type,message,kind,cause", [
    ("ModuleNotFoundError", "No module named 'popart._internal'; 'popart' is not a package",
     "environment", "PopART internals"),
    ("ModuleNotFoundError", "No module named 'popart'", "ipuxl", "import popart"),
    ("ModuleNotFoundError", "No module named 'examples_utils'", "environment", "GitHub-only"),
    ("AssertionError", SCRIPT_FAILED.format("ModuleNotFoundError: No module named 'wandb'"),
     "environment", "in a script the test runs: module wandb is not installed"),
    ("AssertionError", SCRIPT_FAILED.format("ValueError: bad shape (2, 3)"),
     "ipuxl", "in a script the test runs: ValueError: bad shape"),
    ("OSError", "We couldn't connect to 'https://huggingface.co' to load this file",
     "environment", "Hugging Face Hub"),
    ("AttributeError", "'Session' object has no attribute '_pb_session'", "environment",
     "PopART internals"),
    ("NotCollected", "nothing collected (rc=4): ...\nE   ImportError: cannot import name 'x' "
     "from 'ipuxl.addons'\n", "ipuxl", "ImportError: cannot import name 'x'"),
])
def test_classify(exc_type, message, kind, cause):
    got_kind, got_cause = popxl_apps.classify(exc_type, message)
    assert got_kind == kind and cause in got_cause, got_cause
