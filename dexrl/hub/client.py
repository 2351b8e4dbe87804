"""Every Hugging Face hub call behind ``dexrl download``, and its errors in dexrl's words.

``huggingface_hub`` is imported inside the functions: it reads its environment at import time, and
the CLI must start fast. Design notes: docs/design/hub.md.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dexrl.catalog import did_you_mean
from dexrl.errors import DexrlError, disk_full_cause, disk_full_error, disk_full_folder
from dexrl.hub.repos import KNOWN_REPOS

_TRUE = {"1", "ON", "YES", "TRUE"}  # how huggingface_hub spells a set flag
DISK_FULL_HINT = ("free space on that disk, or download to a larger one: --local-dir (or "
                  "DEXRL_HOME) for the files, HF_HOME for the hub's own cache; then run the "
                  "command again")


def hub_endpoint() -> str:
    """The hub or mirror in use: ``$HF_ENDPOINT`` as set now, else huggingface_hub's default."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` is set (now, or when huggingface_hub was imported)."""
    from huggingface_hub import constants

    return constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").upper() in _TRUE


def use_available_downloader() -> str | None:
    """Turn off ``HF_HUB_ENABLE_HF_TRANSFER`` when hf_transfer is missing; return a note if so.

    huggingface_hub raises mid-download when the flag is set without the package; the standard
    downloader gets the same files.
    """
    from huggingface_hub import constants

    if not constants.HF_HUB_ENABLE_HF_TRANSFER or importlib.util.find_spec("hf_transfer"):
        return None
    constants.HF_HUB_ENABLE_HF_TRANSFER = False
    return ("HF_HUB_ENABLE_HF_TRANSFER is set but hf_transfer is not installed: using the "
            "standard downloader (`pip install hf_transfer` for the fast one)")


@dataclass(frozen=True)
class Snapshot:
    """One commit of a hub repository.

    Attributes:
        repo_id: ``owner/name``.
        repo_type: ``model`` or ``dataset``.
        revision: The revision asked for (``main`` when none was given).
        commit: The commit sha it resolved to.
        files: Path in the repo -> size in bytes (None where the hub gave none).
        endpoint: The hub or mirror it came from.
    """

    repo_id: str
    repo_type: str
    revision: str
    commit: str
    files: dict[str, int | None]
    endpoint: str


def resolve(repo_id: str, revision: str | None = None, *, repo_type: str = "model") -> Snapshot:
    """Ask the hub which commit ``revision`` of ``repo_id`` is and which files it holds."""
    from huggingface_hub import HfApi

    endpoint, revision = hub_endpoint(), revision or "main"
    if hub_offline():
        raise DexrlError(f"cannot look up {repo_id}: offline mode (HF_HUB_OFFLINE) is on",
                         "unset HF_HUB_OFFLINE to reach the hub", code="hub-offline")
    with hub_errors(repo_id, revision, endpoint, stage="look up"):
        info = HfApi(endpoint=endpoint).repo_info(repo_id, revision=revision, repo_type=repo_type,
                                                  files_metadata=True)
    files = {s.rfilename: (s.lfs.size if s.lfs else s.size) for s in info.siblings or []}
    return Snapshot(repo_id, repo_type, revision, str(info.sha), files, endpoint)


def fetch(snapshot: Snapshot, local_dir: Path, *, include: Sequence[str] = (),
          exclude: Sequence[str] = (), force: bool = False) -> list[str]:
    """Download the files of ``snapshot`` (filtered by glob patterns) into ``local_dir``.

    Files already there from the same commit are kept; partial files resume. A full disk keeps
    nothing partial: unfinished files are removed, and so is everything of a first download
    (``local_dir`` was empty).

    Returns:
        The repo paths that were asked for.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import filter_repo_objects

    allow, ignore = list(include) or None, list(exclude) or None
    wanted = sorted(filter_repo_objects(snapshot.files, allow_patterns=allow,
                                        ignore_patterns=ignore))
    if not wanted:
        raise DexrlError(f"no file of {snapshot.repo_id} matches --include/--exclude",
                         f"the repo holds: {', '.join(sorted(snapshot.files)) or 'no files'}",
                         code="download-no-matching-files")
    first = not any(Path(local_dir).iterdir())
    with hub_errors(snapshot.repo_id, snapshot.revision, snapshot.endpoint, stage="download",
                    dest=local_dir):
        try:
            with warnings.catch_warnings():  # a full disk is one error line, below
                warnings.filterwarnings("ignore", "Not enough free disk space", UserWarning)
                snapshot_download(snapshot.repo_id, repo_type=snapshot.repo_type,
                                  revision=snapshot.commit, local_dir=str(local_dir),
                                  allow_patterns=allow, ignore_patterns=ignore,
                                  force_download=force, endpoint=snapshot.endpoint)
        except Exception as exc:
            full = as_disk_full(exc)
            if full is None:
                raise
            kept = _drop_partial_files(Path(local_dir), everything=first)
            folder = Path(disk_full_folder(full, local_dir))  # the hub's cache, or local_dir:
            if folder.is_relative_to(local_dir):  # not its hidden .cache/huggingface
                folder = Path(local_dir)
            raise disk_full_error(folder, facts=[kept], hint=DISK_FULL_HINT) from None
    return wanted


def _drop_partial_files(local_dir: Path, *, everything: bool) -> str:
    """Remove what a download cut short by a full disk left: huggingface_hub's unfinished
    ``*.incomplete`` files, or the whole folder when it was empty before; says which."""
    if everything:
        shutil.rmtree(local_dir, ignore_errors=True)
        return "nothing of the download was kept"
    records = local_dir / ".cache" / "huggingface"
    for part in records.rglob("*.incomplete") if records.is_dir() else ():
        part.unlink(missing_ok=True)
    return "its unfinished files were removed (the finished ones stay for the next try)"


def as_disk_full(exc: BaseException) -> OSError | None:
    """The full disk (ENOSPC, EDQUOT) ``exc`` is or was raised from, else None; hf_xet and
    hf_transfer report one as a RuntimeError carrying Rust's "(os error 28)", which counts too
    (:func:`dexrl.errors.disk_full_cause`)."""
    return disk_full_cause(exc)


def remove_stale_files(local_dir: Path, snapshot: Snapshot) -> list[str]:
    """Delete files an earlier download of another commit left that ``snapshot`` does not have.

    Only files huggingface_hub put there are touched (it records each one under
    ``.cache/huggingface/download/<path>.metadata``); a shard layout that changed between
    revisions would otherwise leave an old index pointing at old shards.

    Returns:
        The repo paths removed.
    """
    records = Path(local_dir) / ".cache" / "huggingface" / "download"
    if not records.is_dir():
        return []
    removed = []
    for record in sorted(records.rglob("*.metadata")):
        name = record.relative_to(records).as_posix().removesuffix(".metadata")
        if name in snapshot.files:
            continue
        try:
            (Path(local_dir) / name).unlink(missing_ok=True)
            record.unlink()
        except OSError as exc:
            raise disk_error(exc, Path(local_dir) / name) from None
        removed.append(name)
    return removed


def file_problems(directory: Path, sizes: dict[str, int | None]) -> list[str]:
    """Files of ``sizes`` that are missing from ``directory`` or have another size."""
    problems = []
    for name, size in sorted(sizes.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif size is not None and path.stat().st_size != size:
            problems.append(f"{name}: {path.stat().st_size} bytes, expected {size}")
    return problems


def ensure_writable(path: Path) -> None:
    """Create ``path`` if needed and prove a file can be written there."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise disk_error(exc, path) from None


@contextmanager
def hub_errors(repo_id: str, revision: str, endpoint: str, *, stage: str,
               dest: Path | None = None) -> Iterator[None]:
    """Turn what huggingface_hub raises into one DexrlError with the next step as its hint."""
    import requests
    from huggingface_hub import errors as hf

    page = f"{endpoint}/{repo_id}"
    login = "log in with `huggingface-cli login` or set HF_TOKEN"
    try:
        yield
    except hf.GatedRepoError:  # before RepositoryNotFoundError, its base class
        raise DexrlError(f"{repo_id} is gated and this account has no access to it",
                         f"accept its conditions at {page}, then {login}",
                         code="hub-repo-gated") from None
    except hf.RevisionNotFoundError:
        raise DexrlError(f"revision '{revision}' does not exist in {repo_id}",
                         f"pass --revision with a branch, tag or commit listed at {page}, "
                         "or leave it out for main", code="hub-revision-not-found") from None
    except hf.RepositoryNotFoundError:
        raise DexrlError(
            f"repository {repo_id} was not found on {endpoint} (or it is private)",
            f"check the id{did_you_mean(repo_id, list(KNOWN_REPOS))} (`dexrl download --list` "
            f"shows the known ones); if it is private, {login}",
            code="hub-repo-not-found") from None
    except hf.OfflineModeIsEnabled:
        raise DexrlError(f"cannot {stage} {repo_id}: offline mode (HF_HUB_OFFLINE) is on",
                         "unset HF_HUB_OFFLINE to reach the hub", code="hub-offline") from None
    except (hf.LocalEntryNotFoundError, requests.ConnectionError, requests.Timeout,
            requests.exceptions.ChunkedEncodingError) as exc:
        # LocalEntryNotFoundError: the hub could not be asked about a file (its cause says why).
        raise _network_error(exc, repo_id, endpoint, stage) from None
    except hf.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            raise DexrlError(f"the hub refused the request for {repo_id} (HTTP {status})",
                             f"check your token: {login} again, or unset a stale HF_TOKEN",
                             code="hub-auth-refused",
                             ) from None
        raise DexrlError(f"the hub failed to {stage} {repo_id} ({_first_line(exc)})",
                         "try again later, or set HF_ENDPOINT to a mirror",
                         code="hub-server-error") from None
    except requests.RequestException as exc:
        raise _network_error(exc, repo_id, endpoint, stage) from None
    except OSError as exc:
        raise disk_error(exc, dest) from None
    except RuntimeError as exc:  # hf_xet's and hf_transfer's own errors
        if as_disk_full(exc) is None:
            raise
        raise disk_error(exc, dest) from None


def _network_error(exc: BaseException, repo_id: str, endpoint: str, stage: str) -> DexrlError:
    reason = _first_line(exc.__cause__ or exc)
    if stage == "download":
        return DexrlError(f"the download of {repo_id} from {endpoint} broke off ({reason})",
                          "run the same command again: finished files are kept and partial ones "
                          "resume", code="hub-download-interrupted")
    return DexrlError(f"cannot reach the hub at {endpoint} to {stage} {repo_id} ({reason})",
                      "check the network or proxy, set HF_ENDPOINT to a mirror, or set "
                      "HF_HUB_OFFLINE=1 to use a copy downloaded before", code="hub-unreachable")


def disk_error(exc: OSError | RuntimeError, path: Path | None) -> DexrlError:
    """A download's failed write or read at ``path`` (a folder, or a file in it) in dexrl's
    words (disk full, not writable)."""
    where = str(path) if path else None
    full = as_disk_full(exc)
    if full is not None:
        folder = os.getcwd() if path is None else path if Path(path).is_dir() else path.parent
        return disk_full_error(disk_full_folder(full, folder), hint=DISK_FULL_HINT)
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS,
                                                  errno.ENOTDIR, errno.EEXIST):
        return DexrlError(f"cannot write there ({exc.strerror})",
                          "choose a writable folder with --local-dir (or set DEXRL_HOME), or fix "
                          "its permissions", where=where, code="download-not-writable")
    return DexrlError(f"download failed: {_first_line(exc)}",
                      "run the same command again; add --force to start the download over",
                      where=where, code="download-os-error")


def _first_line(exc: BaseException) -> str:
    arg = exc.args[0] if exc.args else None
    # requests wraps urllib3's (message, cause) pair as one argument; its message is enough.
    raw = arg[0] if isinstance(arg, tuple) and arg and isinstance(arg[0], str) else str(exc)
    text = raw.strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= 160 else line[:157] + "..."
