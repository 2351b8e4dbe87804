"""Human-readable sizes, shared by the commands and the launch plan."""

from __future__ import annotations


def size(n_bytes: float) -> str:
    """Bytes in GB, MB or kB with one decimal (below a kB: bytes)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes:.0f} B"
