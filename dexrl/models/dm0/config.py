"""The DM0 part of a Dexbotic ``config.json``, turned into typed sub-configs.

Dexbotic hard-codes the PE tower's sizes for ``mm_vision_tower: pe_lang_l14_728`` (config.json
does not describe them), so they default to PE-Lang-L/14 @ 728; an optional ``vision_config``
object (a dexrl extension, used by tiny test checkpoints) overrides them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import PretrainedConfig

from dexrl.errors import DexrlError
from dexrl.models.checkpoint import read_json
from dexrl.models.dm0.vision import PeVisionConfig
from dexrl.models.pi0.config import check_towers_match, positive_int, sub_config

MODEL_TYPE = "dexbotic_dm0"
VISION_TOWER = "pe_lang_l14_728"  # the only tower Dexbotic's DM0 accepts
# The tower emits 4×width features, so linear4x (one Linear 4W -> H) is the only Dexbotic
# projector whose input width fits.
PROJECTOR_TYPE = "linear4x"


@dataclass
class Dm0Config:
    """What the DM0 network needs from ``config.json``.

    Attributes:
        llm: Qwen3 config of the prefix LLM (``vocab_size`` = the merged top-level value).
        expert: Qwen3 config of the action expert.
        vision: Sizes of the PE tower.
        projector_type: Always ``linear4x``.
        projector_bias: Whether the projector Linear has a bias (``projector_bias``, default off).
        action_dim: Width of model actions (32).
        chunk_size: Actions per chunk (50).
        source: The file this came from, for error messages.
        raw: The parsed ``config.json``.
    """

    llm: PretrainedConfig
    expert: PretrainedConfig
    vision: PeVisionConfig
    projector_type: str
    projector_bias: bool
    action_dim: int
    chunk_size: int
    source: str
    raw: dict[str, Any]

    @classmethod
    def from_dir(cls, ckpt_dir: str | Path) -> Dm0Config:
        """Read ``<ckpt_dir>/config.json``."""
        path = Path(ckpt_dir) / "config.json"
        return cls.from_dict(read_json(path, what="model config"), source=str(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config.json") -> Dm0Config:
        """Validate a parsed ``config.json`` of a Dexbotic DM0 checkpoint."""
        if data.get("model_type") != MODEL_TYPE:
            raise DexrlError(
                f"model_type is {data.get('model_type')!r}, expected {MODEL_TYPE!r}",
                hint="point at a Dexbotic DM0 checkpoint (config.json model_type dexbotic_dm0)",
                where=source,
            )
        llm = sub_config(data, "llm_config", "qwen3", source)
        expert = sub_config(data, "action_config", "qwen3", source)
        if "vocab_size" in data:  # Dexbotic resizes the LLM embeddings to the merged value
            llm.vocab_size = int(data["vocab_size"])
        check_towers_match(llm, expert, source)
        projector = data.get("mm_projector_type")
        if projector != PROJECTOR_TYPE:
            raise DexrlError(
                f"mm_projector_type is {projector!r}; DM0 needs {PROJECTOR_TYPE!r}",
                hint="the PE tower emits 4×width features, which only linear4x takes; set "
                '"mm_projector_type": "linear4x" (as Dexbotic\'s DM0 checkpoints do)',
                where=source,
            )
        return cls(
            llm=llm,
            expert=expert,
            vision=_vision_config(data, source),
            projector_type=projector,
            projector_bias=bool(data.get("projector_bias", False)),
            action_dim=positive_int(data, "action_dim", 32, source),
            chunk_size=positive_int(data, "chunk_size", 50, source),
            source=source,
            raw=data,
        )


def _vision_config(data: dict[str, Any], source: str) -> PeVisionConfig:
    tower = data.get("mm_vision_tower")
    if tower != VISION_TOWER:
        raise DexrlError(
            f"mm_vision_tower is {tower!r}; DM0 supports only {VISION_TOWER!r}",
            hint=f'set "mm_vision_tower": "{VISION_TOWER}" (Dexbotic\'s DM0 vision tower)',
            where=source,
        )
    value = data.get("vision_config")
    if value is None:
        return PeVisionConfig()
    if not isinstance(value, dict):
        raise DexrlError(
            f"'vision_config' must be an object with the PE tower's sizes, found "
            f"{type(value).__name__}",
            hint="remove vision_config to use PE-Lang-L/14 @ 728, or give image_size, "
            "patch_size, width, layers, heads, mlp_ratio",
            where=source,
        )
    try:
        return PeVisionConfig.from_dict(value)
    except (TypeError, ValueError) as exc:
        raise DexrlError(
            f"invalid 'vision_config': {exc}",
            hint="fix vision_config in config.json, or remove it to use PE-Lang-L/14 @ 728",
            where=source,
        ) from exc
