"""The download transaction: fetch a checkpoint from the hub, verify it, write its manifest.

:func:`download_checkpoint` is everything ``dexrl download REPO`` does but parsing flags and
printing; :func:`known_repos` is what ``dexrl download --list`` shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from dexrl.checkpoints.verify import Verification, verify_checkpoint
from dexrl.errors import DexrlError
from dexrl.hub.client import (
    ensure_writable,
    fetch,
    file_problems,
    hub_offline,
    remove_stale_files,
    resolve,
    use_available_downloader,
)
from dexrl.hub.home import check_repo_id, checkpoint_dir
from dexrl.hub.manifest import Manifest, read_download_manifest, remove_manifest, write_manifest
from dexrl.hub.repos import KNOWN_REPOS

_NOT_DEXBOTIC_HINT = (
    "this repository is not a Dexbotic π0/DM0 checkpoint; check the id "
    "(`dexrl download --list`)"
)


@dataclass
class Downloaded:
    """A checkpoint folder that passed verification.

    Attributes:
        path: The folder.
        manifest: Its provenance (as written to ``dexrl-checkpoint.json``).
        verification: What verification found and covered.
        offline: True when an earlier download was re-verified instead of contacting the hub.
        notes: Things the user should know (e.g. a downloader fallback).
    """

    path: Path
    manifest: Manifest
    verification: Verification
    offline: bool = False
    notes: list[str] = field(default_factory=list)


def download_checkpoint(repo_id: str, *, revision: str | None = None,
                        local_dir: Path | None = None, include: list[str] | None = None,
                        exclude: list[str] | None = None, force: bool = False) -> Downloaded:
    """Download ``repo_id``, verify it as a Dexbotic checkpoint and write its manifest.

    The manifest is removed before any file changes and written only after verification passed,
    so a folder holding one is always a verified checkpoint.

    Raises:
        DexrlError: the hub refused or failed, the folder cannot be used, or the files are not a
            usable Dexbotic checkpoint (they stay on disk, unverified).
    """
    check_repo_id(repo_id)
    dest = (Path(local_dir).expanduser() if local_dir else checkpoint_dir(repo_id)).absolute()
    known = KNOWN_REPOS.get(repo_id)
    expected_type = known.model_type if known else None
    if hub_offline():
        if force:
            raise DexrlError("--force needs the hub but offline mode (HF_HUB_OFFLINE) is on",
                             "unset HF_HUB_OFFLINE, or drop --force to re-check the local copy",
                             code="hub-offline-force")
        return _offline_copy(repo_id, revision, dest, expected_type)
    notes = [n for n in (use_available_downloader(),) if n]
    snapshot = resolve(repo_id, revision)
    _check_destination(dest, repo_id, force)
    ensure_writable(dest)
    remove_manifest(dest)
    names = fetch(snapshot, dest, include=include or (), exclude=exclude or (), force=force)
    stale = remove_stale_files(dest, snapshot)
    if stale:
        notes.append(f"removed {len(stale)} file(s) of an earlier revision: {', '.join(stale)}")
    problems = file_problems(dest, {n: snapshot.files[n] for n in names})
    verification = verify_checkpoint(dest, expected_type)
    _raise_unless_usable(repo_id, dest, verification, problems)
    manifest = Manifest(
        repo_id=repo_id, repo_type="model", revision=snapshot.revision, commit=snapshot.commit,
        endpoint=snapshot.endpoint,
        downloaded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        model_type=verification.model_type, verified=True, checks=verification.checks,
        files={n: (dest / n).stat().st_size for n in names},
    )
    write_manifest(dest, manifest)
    return Downloaded(dest, manifest, verification, notes=notes)


def _offline_copy(repo_id: str, revision: str | None, dest: Path,
                  expected_type: str | None) -> Downloaded:
    """Re-verify an earlier download of ``repo_id`` at ``dest`` without the hub."""
    manifest = read_download_manifest(dest)
    if manifest is None or manifest.repo_id != repo_id:
        raise DexrlError(f"offline mode (HF_HUB_OFFLINE) is on and {dest} holds no verified "
                         f"download of {repo_id}",
                         "unset HF_HUB_OFFLINE to download it, or copy a folder made by "
                         "`dexrl download` there (--local-dir picks another folder)",
                         code="hub-offline-no-copy")
    if revision and revision != manifest.revision and not (
            len(revision) >= 7 and manifest.commit.startswith(revision)):
        raise DexrlError(f"offline: {dest} holds {repo_id}@{manifest.revision} (commit "
                         f"{manifest.commit[:12]}), not revision '{revision}'",
                         "unset HF_HUB_OFFLINE to fetch that revision, or drop --revision",
                         code="hub-offline-revision-mismatch")
    changed = manifest.changed_files(dest)
    verification = verify_checkpoint(dest, expected_type)
    if changed or not verification.ok:
        remove_manifest(dest)
    _raise_unless_usable(repo_id, dest, verification, changed,
                         hint=f"unset HF_HUB_OFFLINE and run `dexrl download {repo_id}` to "
                         "repair it")
    return Downloaded(dest, manifest, verification, offline=True)


def _check_destination(dest: Path, repo_id: str, force: bool) -> None:
    """Refuse to mix a download into a folder holding something else, unless forced."""
    if force or not dest.is_dir() or not any(dest.iterdir()):
        return
    try:
        manifest = read_download_manifest(dest)
    except DexrlError:
        manifest = None
    if manifest is not None and manifest.repo_id != repo_id:
        raise DexrlError(f"{dest} holds a download of {manifest.repo_id}",
                         "choose another folder with --local-dir, or pass --force to download "
                         f"{repo_id} into it anyway", where="--local-dir",
                         code="download-dest-other-repo")
    # huggingface_hub keeps its per-file records there: an earlier (maybe partial) download.
    if manifest is None and not (dest / ".cache" / "huggingface").is_dir():
        raise DexrlError(f"{dest} already holds files that `dexrl download` did not put there",
                         "choose an empty folder with --local-dir, or pass --force to download "
                         "into it anyway", where="--local-dir", code="download-dest-not-empty")


def _raise_unless_usable(repo_id: str, dest: Path, verification: Verification,
                         file_problems: list[str], hint: str | None = None) -> None:
    if verification.ok and not file_problems:
        return
    found = [f for f in verification.findings if f.level == "error"]
    details = [f"{p} (does not match the hub's file list)" for p in file_problems]
    details += [f"{f.where}: {f.message}" for f in found]
    no_config = any(f.code == "model-file-missing" and f.where.endswith("config.json")
                    for f in found)
    if hint is None:
        hint = _NOT_DEXBOTIC_HINT if no_config else (
            found[0].hint if found else "run the same command again with --force")
    raise DexrlError(f"{repo_id} at {dest} is not a usable Dexbotic checkpoint (its files stay, "
                     "not marked verified)", hint, details=details,
                     code="download-not-a-checkpoint")


def known_repos() -> list[dict[str, object]]:
    """The repositories dexrl has configs for, with their local state."""
    records = []
    for repo in KNOWN_REPOS.values():
        path = checkpoint_dir(repo.repo_id)
        try:
            manifest = read_download_manifest(path)
        except DexrlError:
            manifest = None
        verified = bool(manifest and manifest.verified)
        records.append({"repo_id": repo.repo_id, "policy": repo.policy,
                        "model_type": repo.model_type, "path": str(path), "verified": verified,
                        "commit": manifest.commit if verified else None,
                        "description": repo.description})
    return records
