"""File modes under a chosen umask: what dexrl writes gets the umask's modes, as any tool's
files do (0644/0755 under 022, 0664/0775 under 002)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dexrl.runs import durable

UMASKS = (0o022, 0o002)


@contextmanager
def umask(mask: int) -> Iterator[int]:
    """Run the block under ``mask`` (process-wide), then restore the previous umask."""
    old = os.umask(mask)
    try:
        yield mask
    finally:
        os.umask(old)


def modes(folder: Path) -> dict[str, int]:
    """Relative path -> permission bits of ``folder`` (as ``.``) and everything below it."""
    folder = Path(folder)
    found = {".": stat.S_IMODE(folder.stat().st_mode)}
    for path in folder.rglob("*"):
        found[str(path.relative_to(folder))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def expected(folder: Path, mask: int) -> dict[str, int]:
    """What :func:`modes` should give: folders 0777, files 0666, less the umask."""
    folder = Path(folder)
    found = {".": 0o777 & ~mask}
    for path in folder.rglob("*"):
        found[str(path.relative_to(folder))] = (0o777 if path.is_dir() else 0o666) & ~mask
    return found


def new_file_mode(executable: bool = False) -> int:
    """The mode a new file gets under the process's umask (:func:`dexrl.runs.durable.umask`):
    0644 (0755 ``executable``) under umask 022."""
    return (0o777 if executable else 0o666) & ~durable.umask()
