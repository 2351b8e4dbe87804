"""The test suite's own rules: a default-suite test that starts Python or Ray is declared
(``slow``, or ``spawns`` for the documented quick cases), and no test skips on a missing
declared dependency (a broken install must fail, not skip)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

PROBE = '''
import subprocess
import sys

import pytest


def test_starts_python_undeclared():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.spawns
def test_starts_python_declared():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_runs_a_tool_that_is_not_python():
    subprocess.run(["true"], check=True)
'''


@pytest.mark.spawns
def test_the_guard_fails_an_undeclared_process_start_and_only_that(tmp_path: Path) -> None:
    """A control for tests/conftest.py's guard, run on a probe module in a fresh pytest."""
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_probe.py").write_text(PROBE)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-o", "markers=spawns", "-rf", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert "1 failed, 2 passed" in done.stdout, done.stdout + done.stderr
    assert "test_starts_python_undeclared starts a process" in done.stdout


def importorskips(path: Path) -> list[str]:
    """``file:line`` of every ``pytest.importorskip(...)`` call in a test file."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.name}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "importorskip"]


def test_no_test_skips_on_a_missing_dependency() -> None:
    assert [hit for p in sorted(TESTS.rglob("*.py")) for hit in importorskips(p)] == []


def test_the_importorskip_check_sees_a_call(tmp_path: Path) -> None:
    """A control: the same walk finds an importorskip hidden in a function."""
    probe = tmp_path / "probe.py"
    probe.write_text("import pytest\n\n\ndef f():\n    pytest.importorskip('rlinf')\n")
    assert importorskips(probe) == ["probe.py:5"]
