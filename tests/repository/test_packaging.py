"""The wheel ships every dexrl package and the whole Hydra tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

from dexrl.config.compose import conf_dir, list_configs

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_is_listed_in_pyproject() -> None:
    """Every package of dexrl/, conf/ as dexrl.conf and each config group of conf/ (a folder of
    yaml files) as its subpackage: setuptools warns about a group left out."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "dexrl").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    groups = {"dexrl.conf." + ".".join(p.parent.relative_to(ROOT / "conf").parts)
              for p in (ROOT / "conf").rglob("*.yaml") if p.parent != ROOT / "conf"}
    assert found | {"dexrl.conf"} | groups == listed


def test_the_license_is_an_spdx_expression() -> None:
    """A TOML table is deprecated by setuptools (a warning per build); 77 reads the string."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]


@pytest.mark.spawns
def test_the_wheel_holds_every_module_and_config_and_nothing_else(tmp_path: Path) -> None:
    """Built as `make install` builds it (setuptools, no deprecation warning), from a copy of
    what the wheel is made of."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("dexrl", "conf"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps",
                           "--no-build-isolation", "--no-index", "-w", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "deprecat" not in (done.stdout + done.stderr).lower(), done.stdout + done.stderr
    (wheel,) = (tmp_path / "out").glob("dexrl-*.whl")
    names = {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}
    expected = {str(p.relative_to(ROOT)) for p in (ROOT / "dexrl").rglob("*.py")
                if "__pycache__" not in p.parts}
    expected |= {"dexrl/conf/" + str(p.relative_to(ROOT / "conf"))
                 for p in (ROOT / "conf").rglob("*") if p.suffix in (".yaml", ".py")}
    assert names == expected


def test_no_namespace_packages() -> None:
    """A folder of modules without __init__.py would be left out of the wheel."""
    folders = {p.parent for p in (ROOT / "dexrl").rglob("*.py") if "__pycache__" not in p.parts}
    assert [str(f) for f in folders if not (f / "__init__.py").is_file()] == []


def test_conf_is_the_repository_tree() -> None:
    assert conf_dir().resolve() == (ROOT / "conf").resolve()
    assert len(list_configs()) == 14  # (5 LIBERO suites + reach + reach_cued) × π0, DM0
    groups = {p.parent.name for p in conf_dir().glob("*/*.yaml")}
    assert {"env", "model", "training_backend", "weight_syncer"} <= groups
