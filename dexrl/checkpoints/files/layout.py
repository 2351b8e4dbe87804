"""The files of a Dexbotic checkpoint folder: its JSON files and which safetensors files hold the
weights. No torch here, so the config and checkpoint checks use it too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dexrl.errors import DexrlError

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
# What ``train_expert_only`` freezes (vision tower, projector, prefix LLM), by checkpoint key.
FROZEN_PREFIXES = ("model.mm_vision_tower.", "model.mm_projector.", "model.llm.")
_SHOWN_KEYS = 5  # how many offending names an error message lists before the count


def read_json(path: Path, *, what: str) -> dict[str, Any]:
    """Read a JSON object from ``path``; ``what`` names the file's role in error hints."""
    if not path.is_file():
        raise DexrlError(
            f"missing {what}",
            hint=f"the checkpoint directory must contain {path.name}; copy it from the original "
            "checkpoint or point --model at the right directory",
            where=str(path),
            code="model-file-missing",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DexrlError(
            f"cannot parse {what}: {exc}",
            hint="the file is corrupt; restore it from the original checkpoint",
            where=str(path),
            code="model-json-unreadable",
        ) from exc
    if not isinstance(data, dict):
        raise DexrlError(
            f"{what} must hold a JSON object, found {type(data).__name__}",
            hint="restore the file from the original checkpoint",
            where=str(path),
            code="model-json-not-object",
        )
    return data


def weight_files(ckpt_dir: Path) -> list[Path]:
    """Return a checkpoint's safetensors files: the shards the index names, or the single file."""
    index = ckpt_dir / INDEX_FILE
    if index.is_file():
        weight_map = read_json(index, what="safetensors index").get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise DexrlError(
                "safetensors index has no 'weight_map'",
                hint="restore model.safetensors.index.json from the original checkpoint",
                where=str(index),
                code="model-weights-index-invalid",
            )
        files = [ckpt_dir / name for name in sorted(set(weight_map.values()))]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise DexrlError(
                f"shards named by the index are missing: {preview(missing)}",
                hint="download the missing shard files into the checkpoint directory",
                where=str(index),
                code="model-weights-shards-missing",
            )
        return files
    if (ckpt_dir / SINGLE_FILE).is_file():
        return [ckpt_dir / SINGLE_FILE]
    found = sorted(ckpt_dir.glob("*.safetensors"))
    if found:
        return found
    raise DexrlError(
        "no weights found: no *.safetensors weights in the folder (neither model.safetensors nor "
        "model.safetensors.index.json)",
        hint="point at a directory holding the Dexbotic checkpoint's safetensors files",
        where=str(ckpt_dir),
        code="model-weights-missing",
    )


def preview(keys: Sequence[str]) -> str:
    """The first few names, then how many more."""
    shown = ", ".join(keys[:_SHOWN_KEYS])
    more = len(keys) - _SHOWN_KEYS
    return f"{shown}, ... and {more} more" if more > 0 else shown
