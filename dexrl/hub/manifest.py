"""``dexrl-checkpoint.json``: the record of a verified download. A folder counts as verified only
while it holds one; it is removed before anything in the folder changes."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dexrl.errors import DexrlError
from dexrl.hub.client import disk_error, file_problems
from dexrl.runs import durable

MANIFEST_NAME = "dexrl-checkpoint.json"


_MANIFEST_FORMAT = 1


@dataclass(frozen=True)
class Manifest:
    """Where a verified checkpoint folder came from (``dexrl-checkpoint.json``).

    Attributes:
        repo_id: Hub repository.
        repo_type: ``model`` or ``dataset``.
        revision: The revision asked for.
        commit: The commit sha downloaded.
        endpoint: The hub or mirror it came from.
        downloaded_at: UTC time of the download, ISO 8601.
        model_type: ``config.json`` model_type (None for non-checkpoint downloads).
        verified: Whether verification passed (the writer only writes True).
        checks: What verification covered.
        files: Path in the folder -> size in bytes.
    """

    repo_id: str
    repo_type: str
    revision: str
    commit: str
    endpoint: str
    downloaded_at: str
    model_type: str | None
    verified: bool
    checks: list[str]
    files: dict[str, int]

    def changed_files(self, directory: Path) -> list[str]:
        """Files that are gone or have another size than when they were verified."""
        return file_problems(Path(directory), dict(self.files))

    def describe(self) -> str:
        """One line of provenance, e.g. for ``train`` and ``doctor``."""
        state = "verified" if self.verified else "not verified"
        return (f"{self.repo_id}@{self.revision} (commit {self.commit[:12]}), "
                f"downloaded {self.downloaded_at} from {self.endpoint}, {state}")


def write_manifest(directory: Path, manifest: Manifest, name: str = MANIFEST_NAME) -> Path:
    """Vouch for ``directory``: make its files durable, then write ``manifest`` durably.

    After a power loss the manifest never survives the files it vouches for
    (:mod:`dexrl.runs.durable`).
    """
    path = Path(directory) / name
    try:
        durable.sync_tree(directory)
        durable.write_json(path, {"format": _MANIFEST_FORMAT, **asdict(manifest)})
    except OSError as exc:
        raise disk_error(exc, path) from None
    return path


def read_download_manifest(directory: Path, name: str = MANIFEST_NAME) -> Manifest | None:
    """The manifest of ``directory``, or None when it has none.

    Raises:
        DexrlError: the file exists but is not a manifest this version can read.
    """
    path = Path(directory) / name
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        data.pop("format")
        return Manifest(**data)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        raise DexrlError("unreadable download manifest",
                         "run `dexrl download` for this checkpoint again to rewrite it",
                         where=str(path), code="download-manifest-unreadable") from None


def remove_manifest(directory: Path, name: str = MANIFEST_NAME) -> None:
    """Mark ``directory`` unverified (before its files change, or when they no longer match)."""
    try:
        (Path(directory) / name).unlink()
        durable.sync_dir(Path(directory))  # gone for good before the files change
    except FileNotFoundError:
        return
    except OSError as exc:
        raise disk_error(exc, Path(directory)) from None


def checkpoint_provenance(model_path: str | None) -> dict[str, Any] | None:
    """The ``dexrl download`` manifest of the checkpoint, when there is one."""
    if not model_path:
        return None
    path = Path(model_path) / MANIFEST_NAME
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"path": str(model_path), "manifest": None}
