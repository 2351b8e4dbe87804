"""Check 6 as a row: RoundTrip results (fakes) become ok or fail with train's message."""

from __future__ import annotations

from omegaconf import OmegaConf

from dexrl.bridge.launch.worker_probe import RoundTrip
from dexrl.doctor.extension import check_roundtrip, model_types

TYPES = ["dexbotic_dm0", "dexbotic_pi0"]


def test_all_nodes_ok() -> None:
    results = [RoundTrip(True, "ok", "dexrl.bridge.registry", tuple(TYPES), "10.0.0.1"),
               RoundTrip(True, "ok", "dexrl.bridge.registry", tuple(TYPES), "10.0.0.2")]
    row = check_roundtrip(results, TYPES)
    assert row.status == "ok"
    assert "2 node(s): a Ray worker loaded dexrl.bridge.registry" in row.finding


def test_import_failure_in_a_worker_fails_not_warns() -> None:
    results = [RoundTrip(True, "ok", "mod", tuple(TYPES), "10.0.0.1"),
               RoundTrip(False, "Failed to import extension module 'mod': No module named 'mod'",
                         "mod", node="10.0.0.2", traceback="ModuleNotFoundError: ...")]
    row = check_roundtrip(results, TYPES)
    assert row.status == "fail"
    assert row.finding.startswith("RLINF_EXT_MODULE=mod on 10.0.0.2: RLinf workers cannot use")
    assert "(1 of 2 nodes failed)" in row.finding
    assert "import mod" in row.fix
    assert row.details["traceback"] == "ModuleNotFoundError: ..."


def test_no_node_answered() -> None:
    assert check_roundtrip([], TYPES).status == "fail"


def test_model_types_follow_the_config() -> None:
    assert model_types(None) == TYPES
    cfg = OmegaConf.create({"actor": {"model": {"model_type": "dexbotic_pi0"}}})
    assert model_types(cfg) == ["dexbotic_pi0"]


def test_a_broken_plugin_fails_the_check_by_name() -> None:
    from dexrl.plugins import PluginProblem

    results = [RoundTrip(True, "ok", "dexrl.bridge.registry", tuple(TYPES), "10.0.0.1")]
    problem = PluginProblem(("mine",), ("my-dist",), "policy plugin 'mine' from my-dist failed",
                            "fix my-dist")
    row = check_roundtrip(results, TYPES, [problem, problem])
    assert row.status == "fail"
    assert row.finding == "policy plugin 'mine' from my-dist failed (+1 more)"
    assert row.fix == "fix my-dist"
    assert check_roundtrip(results, TYPES, []).status == "ok"
