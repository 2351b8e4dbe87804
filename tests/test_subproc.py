"""Probes in child interpreters: results, one-line errors, timeouts, deaths by signal."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dexrl.subproc import ProbeError, run_probe

pytestmark = pytest.mark.spawns  # every case runs a child interpreter

TARGETS = '''
import os, time

def answer(x):
    print("noise before the result")
    return {"twice": 2 * x}

def broken():
    raise ValueError("bad\\n  value")

def slow():
    time.sleep(60)

def abort():
    os.abort()
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "targets.py").write_text(TARGETS)
    return {"PYTHONPATH": str(tmp_path)}


def test_result(env: dict[str, str]) -> None:
    assert run_probe("targets:answer", {"x": 21}, env=env) == {"twice": 42}


def test_exception_is_one_line(env: dict[str, str]) -> None:
    with pytest.raises(ProbeError, match=r"^ValueError: bad value$"):
        run_probe("targets:broken", env=env)


def test_timeout_kills_the_child(env: dict[str, str]) -> None:
    start = time.monotonic()
    with pytest.raises(ProbeError, match="no answer within 2 s"):
        run_probe("targets:slow", env=env, timeout=2)
    assert time.monotonic() - start < 20


def test_death_by_signal_is_named(env: dict[str, str]) -> None:
    with pytest.raises(ProbeError, match="killed by SIGABRT"):
        run_probe("targets:abort", env=env)


def test_empty_value_removes_a_variable(env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:
    (tmp_path / "envread.py").write_text(
        "import os\ndef read():\n    return {'v': os.environ.get('DEXRL_DOCTOR_TEST')}\n")
    monkeypatch.setenv("DEXRL_DOCTOR_TEST", "set")
    assert run_probe("envread:read", env=env) == {"v": "set"}
    assert run_probe("envread:read", env={**env, "DEXRL_DOCTOR_TEST": ""}) == {"v": None}
