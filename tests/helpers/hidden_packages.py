"""Run a subprocess as if some packages were not installed, to test what must work without them.

A folder put first on ``PYTHONPATH`` holds one stub per name that raises ``ModuleNotFoundError`` on
import, exactly as an uninstalled package does; Ray workers inherit the variable from the driver.
"""

from __future__ import annotations

import os
from pathlib import Path

RENDER_STACK = ("libero", "liberopro", "liberoplus", "robosuite", "mujoco")


def env_without(folder: Path, names: tuple[str, ...] = RENDER_STACK) -> dict[str, str]:
    """``os.environ`` with ``names`` hidden from Python (stubs written into ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}' (hidden by a test)\", "
            f"name={name!r})\n")
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}
