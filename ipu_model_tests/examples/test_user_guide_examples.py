"""Run each user-guide example (examples/user_guide/*.py) as a subprocess.

Each example asserts its own results against NumPy; here we check that it
exits with status 0 and prints the values it is expected to print. The
environment is passed through so IPUXL_CORE_DIR / PYTHONPATH select a
developer build.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # trains whole examples

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "user_guide"

# name -> substrings its stdout must contain (besides "<name>: OK").
EXPECTED_OUTPUT = {
    "simple_addition": ["run: sum = [", "run_with_outputs: sum = ["],
    "tensor_addition": ["sum = 4 (int8)"],
    "basic_graph": ["graph name: add_one_subgraph(0)",
                    "y = [[1.0, 1.25], [1.5, 1.75]]"],
    "call_with_info": ["x after the call = 2"],
    "create_multi_graphs_from_same_func": [
        "graphs: matmul_fn_subgraph(0), matmul_fn_subgraph(1)", "y = [-1.5, -5.5]"],
    "multi_call_graph_input": ["y = [[3.25, 2.0], [6.0, 13.0]]"],
    "multi_callsites_of_a_graph": ["y = [[-2.5, -1.5], [-0.5, 0.5]]"],
    "repeat_graph_0": ["y = [[3.0, 3.0], [3.0, 3.0]]"],
    "repeat_graph_1": ["graph name: Linear_subgraph(0)", "y = [[7.0, 7.0], [7.0, 7.0]]"],
    "repeat_graph_2": ["output shape = (8, 2, 2)"],
    "in_sequence": ["stored x = 5.0"],
    "tensor_get_write": ["a + b = 4", "a = 3, b = 1", "a + b after the write = 6"],
    "tensor_get_write_adv": ["after the context: a = 7, b = 1, runs = 2"],
    "nested_session_contexts": ["a after two runs = 5"],
    "float8_inference": ["result shape = (2, 20, 3, 3), dtype = float16"],
    "remote_variable": ["stored = 3, remote variable = 3"],
    "code_loading": ["graph expensive_id_subgraph(0): code loaded"],
    "code_loading_nested": ["code loads inside graphs: 3"],
}


def test_every_example_is_listed():
    on_disk = {p.stem for p in EXAMPLES.glob("*.py")}
    assert on_disk == set(EXPECTED_OUTPUT)


def _child_env():
    """The environment, with relative PYTHONPATH entries and IPUXL_CORE_DIR made
    absolute so that they still work in the example's directory."""
    env = dict(os.environ)
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) if p else p for p in env["PYTHONPATH"].split(os.pathsep))
    if env.get("IPUXL_CORE_DIR"):
        env["IPUXL_CORE_DIR"] = os.path.abspath(env["IPUXL_CORE_DIR"])
    return env


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUT))
def test_user_guide_example(name):
    script = EXAMPLES / f"{name}.py"
    proc = subprocess.run([sys.executable, str(script)], env=_child_env(),
                          cwd=str(EXAMPLES), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (
        f"{name}.py exited with {proc.returncode}\nstdout:\n{proc.stdout}\n"
        f"stderr:\n{proc.stderr}")
    assert f"{name}: OK" in proc.stdout
    for expected in EXPECTED_OUTPUT[name]:
        assert expected in proc.stdout, (
            f"{name}.py did not print {expected!r}\nstdout:\n{proc.stdout}")
