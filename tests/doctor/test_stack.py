"""Check 1: versions against the ranges read back from dexrl's own packaging metadata."""

from __future__ import annotations

from importlib import metadata

import pytest

import dexrl
from dexrl.doctor import stack
from dexrl.doctor.context import Budget, Context
from dexrl.doctor.serializer import RAY, SerializerFacts
from dexrl.doctor.stack import StackFacts, check_mujoco, check_versions, supported_ranges
from dexrl.versions import installed_versions

RANGES = {"python": ">=3.10,<3.13", "transformers": ">=4.53,<=4.57.6",
          "huggingface-hub": "<1.0,>=0.30", "mujoco": "<3.4,>=3.3", "numpy": "<2.6,>=1.24",
          "pyarrow": "<26"}


def versions(**changes: str | None) -> dict[str, str | None]:
    base = {"python": "3.11.7", "torch": "2.13.0", "rlinf": "0.3.0", "ray": "2.60.0",
            "transformers": "4.57.6", "huggingface-hub": "0.36.2", "mujoco": "3.3.2",
            "numpy": "1.26.4", "pyarrow": "25.0.1"}
    base.update(changes)
    return base


def test_ranges_come_from_the_installed_distribution() -> None:
    ranges = supported_ranges()
    declared = {line.split(";")[0] for line in metadata.requires("dexrl") or []}
    # Every range doctor enforces is one dexrl's metadata declares (no second table).
    assert any(d.startswith("transformers") and "<=4.57.6" in d for d in declared)
    assert "<=4.57.6" in ranges["transformers"]
    assert "<1.0" in ranges["huggingface-hub"]
    assert ranges["python"] == str(metadata.metadata("dexrl")["Requires-Python"]).replace(" ", "")
    assert "ray" not in ranges  # dexrl does not pin ray itself (rlinf does)


def test_extras_are_not_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stack.metadata, "requires", lambda _d: [
        "torch<2.14,>=2.6", 'mujoco==3.3.2; extra == "exact"', "numpy"])
    monkeypatch.setattr(stack.metadata, "metadata", lambda _d: {"Requires-Python": ">=3.10"})
    assert supported_ranges() == {"python": ">=3.10", "torch": "<2.14,>=2.6"}


def test_versions_ok() -> None:
    result = check_versions(StackFacts(versions(), RANGES))
    assert result.status == "ok"
    assert "within dexrl's ranges" in result.finding


@pytest.mark.parametrize(("change", "expected"), [
    ({"transformers": "5.0.0"}, "transformers 5.0.0 is outside"),
    ({"huggingface-hub": "1.0.1"}, "huggingface-hub 1.0.1 is outside"),
    ({"python": "3.13.1"}, "python 3.13.1 is outside"),
    ({"mujoco": None}, "mujoco is not installed (needs"),
    ({"ray": None}, "ray is not installed"),
])
def test_versions_fail(change: dict[str, str | None], expected: str) -> None:
    result = check_versions(StackFacts(versions(**change), RANGES))
    assert result.status == "fail"
    assert expected in result.finding
    assert "make install" in result.fix


@pytest.mark.parametrize("numpy", ["2.4.6", "2.5.2"])
def test_a_numpy_2_stack_is_within_the_declared_ranges(numpy: str) -> None:
    """GPU images ship numpy 2 (the pipeline ran on 2.4.6 here and 2.5.2 on an H100)."""
    found = {**installed_versions(), "numpy": numpy, "pyarrow": "26.0.1"}
    result = check_versions(StackFacts(found, supported_ranges()))
    assert result.status != "fail", result.finding
    assert "numpy" not in result.finding


@pytest.mark.parametrize(("change", "outside"), [
    ({"numpy": "2.6.0"}, "numpy 2.6.0 is outside <2.6,>=1.24"),
    ({"numpy": "2.4.6", "pyarrow": "26.0.1"}, "pyarrow 26.0.1 is outside <26"),
])
def test_numpy_or_pyarrow_outside_the_tested_range_only_warns(
        change: dict[str, str], outside: str) -> None:
    result = check_versions(StackFacts(versions(**change), RANGES))
    assert result.status == "warn"
    assert outside in result.finding and "stack.serializer" in result.finding


def test_a_real_problem_still_fails_and_lists_the_untested_too() -> None:
    result = check_versions(StackFacts(versions(transformers="5.0.0", numpy="2.6.0"), RANGES))
    assert result.status == "fail"
    assert "transformers 5.0.0 is outside" in result.finding
    assert "numpy 2.6.0 is outside" in result.finding


def test_the_area_ends_with_the_serializer_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    timeouts: list[float] = []

    def broken(timeout: float) -> SerializerFacts:
        timeouts.append(timeout)
        return SerializerFacts("1.26.4", {RAY: "ImportError: pyarrow requires NumPy 2.0"})

    monkeypatch.setattr(stack, "probe_serializer", broken)
    rows = list(stack.run(Context(Budget(60.0))))
    assert [r.id for r in rows] == ["stack.versions", "stack.mujoco", "stack.serializer"]
    assert rows[2].status == "fail" and "pyarrow requires NumPy 2.0" in rows[2].finding
    assert rows[2].seconds is not None
    assert 0 < timeouts[0] <= 60.0  # bounded by the budget


@pytest.mark.parametrize(("version", "status"), [("3.3.2", "ok"), ("3.3.7", "warn"),
                                                 (None, "fail")])
def test_mujoco(version: str | None, status: str) -> None:
    result = check_mujoco(StackFacts(versions(mujoco=version), RANGES))
    assert result.status == status
    if status == "warn":
        assert "3.3.2" in result.fix


def test_this_install_is_within_its_own_ranges() -> None:
    """`make install` applies dexrl's pins, so the real probe finds every package in range."""
    facts = stack.probe_stack()
    assert facts.versions["dexrl"] == dexrl.__version__  # packaging metadata = the module
    assert set(facts.ranges) >= {"python", "torch", "rlinf", "transformers", "mujoco", "numpy",
                                 "pyarrow"}
    assert check_versions(facts).status == "ok"


def test_a_package_that_is_not_installed_is_a_finding_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = metadata.version

    def version(dist: str) -> str:
        if dist in ("robosuite", "rlinf"):
            raise metadata.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(metadata, "version", version)
    facts = stack.probe_stack()
    assert facts.versions["robosuite"] is None and facts.versions["rlinf"] is None
    result = check_versions(facts)
    assert result.status == "fail"
    assert "rlinf is not installed (needs ==0.3.0)" in result.finding
    assert "robosuite is not installed" in result.finding
