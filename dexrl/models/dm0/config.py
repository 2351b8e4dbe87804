"""The DM0 part of a Dexbotic ``config.json``, turned into typed sub-configs.

Dexbotic hard-codes the PE tower's sizes for ``mm_vision_tower: pe_lang_l14_728`` (config.json
does not describe them), so they default to PE-Lang-L/14 @ 728; an optional ``vision_config``
object (a dexrl extension, used by tiny test checkpoints) overrides them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dexrl.errors import DexrlError
from dexrl.models.dm0.vision import PeVisionConfig
from dexrl.models.flow.config import FlowConfig, check_model_type, check_towers_match, sub_config

MODEL_TYPE = "dexbotic_dm0"
VISION_TOWER = "pe_lang_l14_728"  # the only tower Dexbotic's DM0 accepts
# The tower emits 4×width features, so linear4x (one Linear 4W -> H) is the only Dexbotic
# projector whose input width fits.
PROJECTOR_TYPE = "linear4x"

# Checkpoint entries Dexbotic saves but never uses: the LM heads of the LLM (top level) and of the
# expert (a Qwen3 causal LM whose logits nothing reads), and the expert's token embeddings should
# a checkpoint hold them (Dexbotic removes that module; the expert only ever sees embeddings).
ALLOWED_EXTRA_KEYS = (
    "lm_head.*",
    "model.action_expert.lm_head.*",
    "model.action_expert.model.embed_tokens.*",
)
# The mixed-precision rule DM0 states for bf16: the vision stem and position embedding and every
# RMSNorm (decoder norms, q/k norms, final norms) stay float32. (Dexbotic's own name selectors
# miss some of these, e.g. they name `vision_model.conv1`; the difference is bf16 rounding.)
FLOAT32_KEYS = (
    "model.mm_vision_tower.vision_tower.conv1.weight",
    "model.mm_vision_tower.vision_tower.positional_embedding",
    "model.llm.*layernorm.weight",
    "model.llm.*_norm.weight",
    "model.llm.norm.weight",
    "model.action_expert.model.*layernorm.weight",
    "model.action_expert.model.*_norm.weight",
    "model.action_expert.model.norm.weight",
)


@dataclass
class Dm0Config(FlowConfig):
    """What the DM0 network needs from ``config.json``: Qwen3 towers, the PE tower's sizes
    (``vision``) and the ``linear4x`` projector (``projector_bias`` default off)."""

    vision: PeVisionConfig

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config.json") -> Dm0Config:
        """Validate a parsed ``config.json`` of a Dexbotic DM0 checkpoint."""
        check_model_type(data, MODEL_TYPE, "DM0", source)
        llm = sub_config(data, "llm_config", "qwen3", source)
        expert = sub_config(data, "action_config", "qwen3", source)
        check_towers_match(llm, expert, source)
        projector = data.get("mm_projector_type")
        if projector != PROJECTOR_TYPE:
            raise DexrlError(
                f"mm_projector_type is {projector!r}; DM0 needs {PROJECTOR_TYPE!r}",
                hint="the PE tower emits 4×width features, which only linear4x takes; set "
                '"mm_projector_type": "linear4x" (as Dexbotic\'s DM0 checkpoints do)',
                where=source,
                code="model-projector-unsupported",
            )
        vision = _vision_config(data, source)
        return cls.from_parts(
            data, source, llm=llm, expert=expert, vision=vision, projector_type=projector
        )


def _vision_config(data: dict[str, Any], source: str) -> PeVisionConfig:
    tower = data.get("mm_vision_tower")
    if tower != VISION_TOWER:
        raise DexrlError(
            f"mm_vision_tower is {tower!r}; DM0 supports only {VISION_TOWER!r}",
            hint=f'set "mm_vision_tower": "{VISION_TOWER}" (Dexbotic\'s DM0 vision tower)',
            where=source,
            code="model-vision-tower-unsupported",
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
            code="model-config-invalid",
        )
    try:
        return PeVisionConfig.from_dict(value)
    except (TypeError, ValueError) as exc:
        raise DexrlError(
            f"invalid 'vision_config': {exc}",
            hint="fix vision_config in config.json, or remove it to use PE-Lang-L/14 @ 728",
            where=source,
            code="model-config-invalid",
        ) from exc
