"""The wheel ships every dexrl package and the whole Hydra tree."""

from __future__ import annotations

from pathlib import Path

import tomllib

from dexrl.config.compose import conf_dir, list_configs

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "dexrl").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found | {"dexrl.conf"} == listed


def test_no_namespace_packages() -> None:
    """A folder of modules without __init__.py would be left out of the wheel."""
    folders = {p.parent for p in (ROOT / "dexrl").rglob("*.py") if "__pycache__" not in p.parts}
    assert [str(f) for f in folders if not (f / "__init__.py").is_file()] == []


def test_conf_is_the_repository_tree() -> None:
    assert conf_dir().resolve() == (ROOT / "conf").resolve()
    assert len(list_configs()) == 14  # (5 LIBERO suites + reach + reach_cued) × π0, DM0
    groups = {p.parent.name for p in conf_dir().glob("*/*.yaml")}
    assert {"env", "model", "training_backend", "weight_syncer"} <= groups
