"""Checks 5 and 6 against a real private Ray instance on this machine.

One Ray instance for the module (≈5-10 s to start on 2 cores); the successful round trip imports
rlinf in a worker and is marked slow, the failure where the worker cannot import the extension
module stays in the default run.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dexrl.cluster import check_address
from dexrl.doctor.cluster import (
    RayFacts,
    check_nodes,
    check_shm,
    probe_nodes,
    start_ray,
)
from dexrl.doctor.extension import check_roundtrip, probe_roundtrip

pytestmark = pytest.mark.spawns  # Ray: one private instance for the module


@pytest.fixture(scope="module")
def private_ray() -> Iterator[tuple[str, float]]:
    import ray

    if ray.is_initialized():
        pytest.skip("this test process is already connected to Ray")
    started = start_ray(None)
    try:
        yield started
    finally:
        ray.shutdown()


def test_private_instance_and_node_facts(private_ray: tuple[str, float]) -> None:
    mode, seconds = private_ray
    assert mode == "private"
    nodes = probe_nodes(timeout=120)
    assert len(nodes) == 1
    here = nodes[0]
    assert here.error is None
    assert here.executable == sys.executable
    assert here.mem_total and here.mem_total > 0 and here.shm_total is not None
    facts = RayFacts(mode, "local", seconds, tuple(nodes))
    assert check_nodes(facts, None, None).status == "ok"
    assert check_shm(facts).status in ("ok", "warn")


def test_the_running_instance_is_a_valid_address(private_ray: tuple[str, float]) -> None:
    import ray

    check_address(ray.get_runtime_context().gcs_address, timeout=5, connect_timeout=120)


def test_module_importable_only_in_the_driver_fails_in_the_worker(
        private_ray: tuple[str, float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The classic silent failure: RLinf only logs a warning; doctor must say fail."""
    (tmp_path / "driver_only_ext.py").write_text("def register():\n    return []\n")
    # Added after ray.init, so Ray's workers do not inherit this path: importable here only.
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("driver_only_ext")
    results = probe_roundtrip(["dexbotic_pi0"], timeout=180, ext_module="driver_only_ext")
    row = check_roundtrip(results, ["dexbotic_pi0"])
    assert row.status == "fail"
    assert "driver_only_ext" in row.finding
    assert "No module named 'driver_only_ext'" in row.finding


@pytest.mark.slow
def test_dexrl_extension_round_trip_succeeds(private_ray: tuple[str, float]) -> None:
    results = probe_roundtrip(["dexbotic_pi0"], timeout=300)
    row = check_roundtrip(results, ["dexbotic_pi0"])
    assert row.status == "ok", row.finding
