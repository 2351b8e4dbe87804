"""Reading back the progress file ``dexrl eval`` writes
(:class:`dexrl.evaluation.results.ProgressLog`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_progress(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and finished episodes of a progress file (a torn last line is skipped)."""
    header: dict[str, Any] = {}
    episodes = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        header = record.get("header", header)
        if "episode" in record:
            episodes.append(record["episode"])
    return header, episodes
