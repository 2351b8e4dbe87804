"""What a checkpoint folder's completion marker proves: every file of the step, its size and its
xxh3_64 checksum, recorded when the step was marked and checked again before it is used.

Sizes are checked always (a stat per file); checksums read every byte, so they are checked where
that is cheap (:data:`CHEAP_CHECKSUM_BYTES`) and by ``dexrl verify``. Why xxh3_64 and what it
costs: docs/design/run-folders.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from dexrl.runs.layout import MARKER

HASH = "xxh3_64"  # the marker's "hash" field: the checksum its "files" entries carry
CHUNK_BYTES = 8 << 20
CHEAP_CHECKSUM_BYTES = 2 << 30  # a step this size or smaller is read whole before it is used


@dataclass(frozen=True)
class Damage:
    """A file of a marked step that is not what its marker recorded.

    Attributes:
        file: The file's path inside the step folder (``actor/model_state_dict/full_weights.pt``).
        problem: What is wrong with it, in words.
    """

    file: str
    problem: str


def checksum(path: Path) -> str:
    """The xxh3_64 checksum of the file at ``path``, as 16 hex digits."""
    digest = xxhash.xxh3_64()
    buffer = bytearray(CHUNK_BYTES)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            digest.update(view[:n])
    return digest.hexdigest()


def step_files(checkpoint: Path) -> list[str]:
    """Every file below ``checkpoint`` but the marker, as sorted POSIX paths relative to it."""
    root = Path(checkpoint)
    found = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            rel = (Path(folder) / name).relative_to(root).as_posix()
            if rel != MARKER:
                found.append(rel)
    return sorted(found)


def inventory(checkpoint: Path) -> dict[str, dict[str, Any]]:
    """The marker's ``files``: each file of ``checkpoint`` with its size and checksum."""
    root = Path(checkpoint)
    return {rel: {"size": (root / rel).stat().st_size, HASH: checksum(root / rel)}
            for rel in step_files(root)}


def files_problem(files: Any) -> str | None:
    """Why a marker's ``files`` entry is malformed (None when it is a valid file list)."""
    if not isinstance(files, Mapping):
        return "its file list is not an object"
    for rel, entry in files.items():
        size = entry.get("size") if isinstance(entry, Mapping) else None
        if not isinstance(size, int) or isinstance(size, bool) or size < 0 \
                or not isinstance(entry.get(HASH), str) or Path(rel).is_absolute() \
                or ".." in Path(rel).parts:
            return f"its entry for {rel!r} lacks a size or an {HASH} checksum"
    return None


def total_bytes(files: Mapping[str, Mapping[str, Any]]) -> int:
    """What the files of a marker's list add up to."""
    return sum(int(entry["size"]) for entry in files.values())


def find_damage(checkpoint: Path, files: Mapping[str, Mapping[str, Any]], *,
                checksums: bool) -> Damage | None:
    """The first file of ``checkpoint`` that differs from the marker's list: missing, another
    size, or (``checksums``) another checksum. None when all match."""
    root = Path(checkpoint)
    for rel, entry in sorted(files.items()):
        try:
            size = (root / rel).stat().st_size
        except OSError as exc:
            return Damage(rel, "is missing" if isinstance(exc, FileNotFoundError)
                          else f"cannot be read ({exc.strerror or exc})")
        if size != entry["size"]:
            return Damage(rel, f"is {size} bytes; the marker recorded {entry['size']}")
    for rel, entry in sorted(files.items()) if checksums else ():
        try:
            found = checksum(root / rel)
        except OSError as exc:
            return Damage(rel, f"cannot be read ({exc.strerror or exc})")
        if found != entry[HASH]:
            return Damage(rel, f"has {HASH} {found}; the marker recorded {entry[HASH]}")
    return None
