"""The grammar of ``cluster.component_placement`` values: ``"all"``, ``"a,b,c-d"`` or a device
id, shared by the checks, the modes' checks, the dry-run plan and doctor."""

from __future__ import annotations

import re
from typing import Any

_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_placement(spec: Any, num_devices: int) -> list[int]:
    """Expand ``"all"`` / ``"a,b,c-d"`` / an int into device ids.

    Raises:
        ValueError: on bad grammar, with the reason.
    """
    if isinstance(spec, int) and not isinstance(spec, bool):
        return [spec]
    if not isinstance(spec, str):
        raise ValueError(f"expected a string like 'all' or '0-3,5', got {spec!r}")
    if spec.strip() == "all":
        return list(range(num_devices))
    ids: list[int] = []
    for part in spec.split(","):
        m = _RANGE.match(part)
        if not m:
            raise ValueError(f"'{part.strip()}' is not a device id or a range like 0-3")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ValueError(f"range '{part.strip()}' runs backwards")
        ids.extend(range(lo, hi + 1))
    return ids
