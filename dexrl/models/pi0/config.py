"""The π0 part of a Dexbotic ``config.json``, turned into typed HF sub-configs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from transformers import PretrainedConfig

from dexrl.errors import DexrlError
from dexrl.models.flow.config import FlowConfig, check_model_type, check_towers_match, sub_config

MODEL_TYPE = "dexbotic_pi0"
DEFAULT_PROJECTOR = "mlp2x_gelu"  # Dexbotic's default when config.json names none
_PROJECTOR_PATTERN = re.compile(r"linear|linear\d+x|mlp\d+x_gelu")
_SUB_CONFIGS = {
    "llm_config": "gemma",
    "action_config": "gemma",
    "vision_config": "siglip_vision_model",
}

# Checkpoint entries Dexbotic saves but never uses: the expert's token embeddings (it only sees
# embeddings) and SigLIP's attention-pooling head (features are the last hidden state).
ALLOWED_EXTRA_KEYS = (
    "model.action_expert.embed_tokens.*",
    "model.mm_vision_tower.vision_tower.vision_model.head.*",
)



@dataclass
class Pi0Config(FlowConfig):
    """What the π0 network needs from ``config.json``: Gemma towers and a SigLIP vision config
    (``vision_use_head`` forced off: the head is never used).

    ``projector_type`` is ``linear``, ``linear<N>x`` or ``mlp<N>x_gelu``; ``projector_bias`` is the
    bias of a ``linear<N>x`` projector (``linear``/``mlp`` always have one).
    """

    vision: PretrainedConfig

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config.json") -> Pi0Config:
        """Validate a parsed ``config.json`` of a Dexbotic π0 checkpoint."""
        check_model_type(data, MODEL_TYPE, "π0", source)
        subs = {key: sub_config(data, key, kind, source) for key, kind in _SUB_CONFIGS.items()}
        llm, expert, vision = subs["llm_config"], subs["action_config"], subs["vision_config"]
        vision.vision_use_head = False
        projector = data.get("mm_projector_type") or DEFAULT_PROJECTOR
        if not isinstance(projector, str) or not _PROJECTOR_PATTERN.fullmatch(projector):
            raise DexrlError(
                f"unsupported mm_projector_type {projector!r}",
                hint="use linear, linear<N>x or mlp<N>x_gelu (Dexbotic π0 uses mlp2x_gelu)",
                where=source,
                code="model-projector-unsupported",
            )
        check_towers_match(llm, expert, source)
        return cls.from_parts(
            data, source, llm=llm, expert=expert, vision=vision, projector_type=projector
        )
