"""Dotted-key views of nested configs (``a.b.c``), shared by the schema, compose's listing and
resume's diff."""

from __future__ import annotations

from typing import Any


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> leaf value of a plain container (lists are leaves)."""
    if not isinstance(node, dict):
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out
