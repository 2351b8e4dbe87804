"""What a folder holds, to prove a command wrote nothing."""

from __future__ import annotations

from pathlib import Path


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path below ``root`` with its bytes (None for folders)."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}
