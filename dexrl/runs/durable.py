"""Durable writes: a file or folder a later command trusts is there whole, or not at all.

What is published gets the permissions of the user's umask, as any tool's new files do (0644 and
0755 under umask 022), whatever mode the writer created it with: safetensors and ``mkstemp``
create files 0600.

Design notes: docs/design/run-folders.md.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# Filesystems that cannot fsync a folder (some network and FUSE mounts) say so with these.
_NO_DIR_SYNC = (errno.EINVAL, errno.ENOTSUP)


def sync_dir(folder: Path) -> None:
    """Make the entries of ``folder`` (created, renamed, removed files) durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _NO_DIR_SYNC:
            raise
    finally:
        os.close(fd)


def sync_file(path: Path) -> None:
    """Make the content of the file at ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_tree(folder: Path) -> None:
    """Make every file and folder below ``folder``, and ``folder``'s own entry, durable."""
    folder = Path(folder)
    for root, _dirs, files in os.walk(folder, topdown=False):
        for name in files:
            path = Path(root) / name
            if not path.is_symlink():
                sync_file(path)
        sync_dir(Path(root))
    sync_dir(folder.parent)


def umask() -> int:
    """The process's umask, read where the kernel shows it (Linux), else by setting and restoring
    it (``os.umask`` can only be read by changing it, for the whole process)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def as_new(path: Path, mask: int | None = None) -> None:
    """Give the file or folder at ``path`` the mode a new one gets under the umask (``mask``,
    default the process's), whatever its writer created it with; a file keeps being executable
    if it was. A symlink is left alone."""
    mask = umask() if mask is None else mask
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return
    full = 0o777 if stat.S_ISDIR(st.st_mode) or st.st_mode & 0o111 else 0o666
    if stat.S_IMODE(st.st_mode) != full & ~mask:
        os.chmod(path, full & ~mask)


def as_new_tree(folder: Path) -> None:
    """:func:`as_new` for ``folder`` and everything below it."""
    mask = umask()
    for root, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            as_new(Path(root) / name, mask)
    as_new(Path(folder), mask)


def _hidden(path: Path, kind: str) -> Path:
    """A fresh hidden name beside ``path`` (same folder, so the rename stays on one filesystem);
    it keeps the suffix for writers that pick a format by it (ffmpeg)."""
    return path.with_name(f".{path.stem}.{uuid.uuid4().hex[:8]}.{kind}{path.suffix}")


def publish(tmp: Path, path: Path) -> Path:
    """Make the finished file ``tmp`` durable and rename it to ``path`` (same folder), with the
    mode a new file gets under the umask (:func:`as_new`)."""
    tmp, path = Path(tmp), Path(path)
    as_new(tmp)
    sync_file(tmp)
    os.replace(tmp, path)
    sync_dir(path.parent)
    return path


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path to write the new ``path`` to; published when the block ends cleanly.

    For writers that want a file name (matplotlib, safetensors, ffmpeg). The temporary file is
    removed when the block raises.
    """
    path = Path(path)
    tmp = _hidden(path, "tmp")
    try:
        yield tmp
        publish(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: Path, data: bytes) -> Path:
    """Replace ``path`` with ``data`` durably (readers see the old file or the whole new one)."""
    with replacing(path) as tmp, open(tmp, "xb") as handle:
        handle.write(data)
    return Path(path)


def write_text(path: Path, text: str) -> Path:
    """:func:`write_bytes` of ``text`` in UTF-8."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, data: Any) -> Path:
    """:func:`write_text` of ``data`` as indented JSON (``str()`` for other types), one newline."""
    return write_text(path, json.dumps(data, indent=2, default=str) + "\n")


@contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """An empty folder beside ``out`` to build it in; published as ``out`` when the block ends.

    Publishing syncs the staged tree, moves an earlier ``out`` aside, renames the staged folder
    to ``out``, syncs the parent and then deletes the earlier one: a crash leaves either folder
    at ``out``, never a part. Everything in it gets the modes new files and folders get under
    the umask (:func:`as_new_tree`). The staged folder is removed when the block raises.
    """
    out = Path(out)
    staging, old = _hidden(out, "partial"), _hidden(out, "old")
    staging.mkdir()
    try:
        yield staging
        as_new_tree(staging)
        sync_tree(staging)
        if out.exists():
            os.replace(out, old)
        os.replace(staging, out)
        sync_dir(out.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
