"""dexrl's RLinf registrations, in this process and inside real Ray workers."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from dexrl.bridge import registry
from dexrl.bridge.launch.worker_probe import check_registration, first_failure
from dexrl.errors import DexrlError

pytestmark = pytest.mark.spawns  # Ray: one private instance for the module


def test_register_makes_dexrl_types_resolve_with_dexrl_builders() -> None:
    import rlinf.models
    from rlinf.config import EMBODIED_MODEL, SupportedModel

    types = registry.register()
    assert "dexbotic_pi0" in types
    for model_type in types:
        assert SupportedModel(model_type) in EMBODIED_MODEL
        assert rlinf.models._MODEL_REGISTRY[model_type].__module__ == registry.__name__
    assert registry.registered_model_types() == types


def test_dm0_builtin_is_replaced_only_when_dexrl_ships_the_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert "dexbotic_dm0" in registry.ADAPTERS
    monkeypatch.delitem(registry.ADAPTERS, "dexbotic_dm0")
    assert "dexbotic_dm0" not in registry.ADAPTERS
    assert "dexbotic_dm0" not in registry.builders()


def test_builders_import_their_adapter_only_when_called() -> None:
    build = registry._lazy_builder("dexrl_test", "dexrl.bridge.no_such_adapter")
    with pytest.raises(ModuleNotFoundError, match="no_such_adapter"):
        build({}, None)


# Round trip inside real Ray workers ---------------------------------------------------------

@pytest.fixture(scope="module")
def private_ray() -> Iterator[None]:
    """One private Ray instance for the round trips of this module (never joins another)."""
    ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level="ERROR",
             log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def ext_dir(tmp_path: Path) -> Path:
    """Extension modules that fail in the ways RLinf only logs."""
    (tmp_path / "dexrl_ext_bad_import.py").write_text(textwrap.dedent("""
        import dexrl_module_that_does_not_exist  # noqa: F401
        def register():
            pass
    """))
    (tmp_path / "dexrl_ext_bad_register.py").write_text(textwrap.dedent("""
        def register():
            raise RuntimeError("register exploded")
    """))
    return tmp_path


def test_round_trip_sees_dexrl_types_in_a_ray_worker(private_ray: None) -> None:
    (result,) = check_registration(["dexbotic_pi0"])
    assert result.ok, result.message
    assert result.model_types == ("dexbotic_pi0",)
    assert result.ext_module == registry.EXT_MODULE
    result.raise_for_failure()  # no error when ok


def test_round_trip_surfaces_an_ext_module_that_cannot_import(
    private_ray: None, ext_dir: Path
) -> None:
    results = check_registration(["dexbotic_pi0"], "dexrl_ext_bad_import",
                                 env={"PYTHONPATH": str(ext_dir)})
    failure = first_failure(results)
    assert failure is not None
    assert "dexrl_module_that_does_not_exist" in failure.message
    assert "dexrl_ext_bad_import.py" in failure.traceback
    with pytest.raises(DexrlError) as err:
        failure.raise_for_failure()
    assert "RLINF_EXT_MODULE=dexrl_ext_bad_import" in err.value.where
    assert err.value.code == "rlinf-workers-cannot-load"


@pytest.mark.slow
def test_round_trip_surfaces_a_failing_register_and_missing_types(
    private_ray: None, ext_dir: Path
) -> None:
    env = {"PYTHONPATH": str(ext_dir)}
    (raised,) = check_registration(["dexbotic_pi0"], "dexrl_ext_bad_register", env=env)
    assert not raised.ok and "register exploded" in raised.message
    (missing,) = check_registration(["dexrl_type_nobody_registers"])
    assert not missing.ok and "dexrl_type_nobody_registers" in missing.message


def test_a_worker_with_another_interpreter_or_versions_fails() -> None:
    from dexrl.bridge.launch.worker_probe import RoundTrip, compare_with_driver, interpreter_facts

    python, installed = interpreter_facts()
    same = RoundTrip(True, "ok", "m", ("dexbotic_pi0",), python=python, versions=installed)
    assert compare_with_driver(same) is same
    other = dict(installed)
    other["torch"] = "0.0.1"
    moved = RoundTrip(True, "ok", "m", python="/other/python",
                      versions=tuple(sorted(other.items())))
    result = compare_with_driver(moved)
    assert not result.ok
    assert result.details[0] == f"python: driver {python}, worker /other/python"
    assert any(d.startswith("torch: driver ") and d.endswith("worker 0.0.1")
               for d in result.details)
    with pytest.raises(DexrlError, match="different interpreter or package versions") as err:
        result.raise_for_failure()
    assert err.value.code == "rlinf-workers-cannot-load"
