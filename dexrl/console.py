"""Consoles for command output: tables that survive pipes, and ``--json`` documents.

On a terminal Rich fits a table to the window and elides long cells (``Dexmal/libero-d…``). A
pipe or file has no window, so there the width is unbounded: every id, path and number is
printed whole, whatever ``$COLUMNS`` says.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console

UNBOUNDED = 100_000  # columns; Rich sizes a table to its content, not to this width


def console(*, stderr: bool = False, soft_wrap: bool = True, file: TextIO | None = None) -> Console:
    """A console for stdout, stderr or ``file`` that never truncates when it is not a terminal."""
    from rich.console import Console

    out = Console(stderr=stderr, file=file, highlight=False, soft_wrap=soft_wrap)
    if out.is_terminal:
        return out
    return Console(stderr=stderr, file=file, highlight=False, soft_wrap=soft_wrap,
                   width=UNBOUNDED)


def print_json(schema: str, **content: Any) -> None:
    """Print ``{"schema": schema, **content}`` as JSON on stdout (one document, nothing else)."""
    sys.stdout.write(json.dumps({"schema": schema, **content}, indent=2, default=str) + "\n")
    sys.stdout.flush()
