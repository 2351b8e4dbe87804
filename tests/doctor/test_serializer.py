"""Check ``stack.serializer``: numpy judged by what breaks, with fakes at the import and Ray edges.

The two real probes (a fresh interpreter, a private Ray instance: ≈10-20 s each on 2 cores) are
slow; one of them breaks pyarrow the way pyarrow 26 does under numpy 1.x.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dexrl.doctor import serializer
from dexrl.doctor.serializer import (
    RAY,
    SerializerFacts,
    check_serializer,
    probe_serializer,
    roundtrip,
)
from dexrl.subproc import ProbeError

PYARROW_26_ON_NUMPY_1 = "pyarrow requires NumPy 2.0 or newer, found 1.26.4"


def fake_imports(monkeypatch: pytest.MonkeyPatch, failures: dict[str, Exception]) -> None:
    """``import_module`` raises ``failures[name]``; every other module "imports"."""
    def import_module(name: str) -> None:
        if name in failures:
            raise failures[name]

    monkeypatch.setattr(serializer, "import_module", import_module)


def test_a_working_stack_is_ok() -> None:
    row = check_serializer(SerializerFacts("2.4.6", {}))
    assert row.status == "ok"
    assert "numpy 2.4.6" in row.finding and "Ray round trip" in row.finding


def test_anything_broken_fails_by_name() -> None:
    row = check_serializer(SerializerFacts("1.26.4", {
        "pyarrow": f"ImportError: {PYARROW_26_ON_NUMPY_1}", RAY: "ImportError: ..."}))
    assert row.status == "fail"
    assert row.finding.startswith(f"numpy 1.26.4: pyarrow: ImportError: {PYARROW_26_ON_NUMPY_1}")
    assert f"{RAY}: ImportError" in row.finding
    assert "pyarrow<26" in row.fix


def test_the_child_names_each_failure_and_skips_what_is_not_installed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake_imports(monkeypatch, {
        "pyarrow": ImportError(PYARROW_26_ON_NUMPY_1),
        "numba": ImportError("Numba needs NumPy 2.5 or less. Got NumPy 2.6."),
        "cv2": ModuleNotFoundError("No module named 'numpy._core'", name="numpy._core"),
        "h5py": ModuleNotFoundError("No module named 'h5py'", name="h5py"),  # not installed
    })

    def ray_fails(_payload: dict[str, Any]) -> dict[str, Any]:
        raise ImportError(PYARROW_26_ON_NUMPY_1)  # what Ray's serializer raises at ray.put

    monkeypatch.setattr(serializer, "_ray_roundtrip", ray_fails)
    errors = roundtrip()["errors"]
    assert errors == {"pyarrow": f"ImportError: {PYARROW_26_ON_NUMPY_1}",
                      "numba": "ImportError: Numba needs NumPy 2.5 or less. Got NumPy 2.6.",
                      "cv2": "ModuleNotFoundError: No module named 'numpy._core'",
                      RAY: f"ImportError: {PYARROW_26_ON_NUMPY_1}"}


def test_values_changed_by_the_round_trip_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_imports(monkeypatch, {})

    def ray_corrupts(payload: dict[str, Any]) -> dict[str, Any]:
        return {**payload, "tensor": payload["tensor"] + 1}

    monkeypatch.setattr(serializer, "_ray_roundtrip", ray_corrupts)
    assert roundtrip()["errors"] == {RAY: "ValueError: values changed on the way"}


def test_a_working_round_trip_reports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_imports(monkeypatch, {})
    monkeypatch.setattr(serializer, "_ray_roundtrip", lambda payload: payload)
    found = roundtrip()
    assert found["errors"] == {}
    assert found["numpy"] == __import__("numpy").__version__


def test_a_probe_that_dies_is_a_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    def killed(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
        raise ProbeError("no answer within 120 s (killed)")

    monkeypatch.setattr(serializer, "run_probe", killed)
    row = check_serializer(probe_serializer(timeout=120))
    assert row.status == "fail"
    assert row.finding == "numpy (unknown): probe: no answer within 120 s (killed)"


@pytest.mark.slow
def test_real_probe_on_this_install_is_ok() -> None:
    row = check_serializer(probe_serializer(timeout=180))
    assert row.status == "ok", row.finding


@pytest.mark.slow
def test_real_probe_fails_when_pyarrow_breaks_under_ray(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pyarrow that raises on import, as pyarrow 26 does under numpy 1.x: Ray's put fails."""
    fake = tmp_path / "pyarrow"
    fake.mkdir()
    (fake / "__init__.py").write_text(f"raise ImportError({PYARROW_26_ON_NUMPY_1!r})\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the child and its Ray workers see it
    facts = probe_serializer(timeout=180)
    assert facts.errors["pyarrow"] == f"ImportError: {PYARROW_26_ON_NUMPY_1}"
    assert PYARROW_26_ON_NUMPY_1 in facts.errors[RAY]
    assert check_serializer(facts).status == "fail"
