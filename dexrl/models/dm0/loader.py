"""Build a :class:`Dm0Network` from a Dexbotic DM0 checkpoint directory, key for key."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import torch

from dexrl.models.checkpoint import (
    build_and_load,
    checkpoint_dtype,
    read_state_dict,
    weight_files,
)
from dexrl.models.dm0.config import Dm0Config
from dexrl.models.dm0.network import Dm0Network
from dexrl.models.pi0.projector import check_projector

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
_LOW_PRECISION = (torch.bfloat16, torch.float16)


def keeps_float32(key: str) -> bool:
    """Whether ``key`` stays float32 when the model runs in bf16."""
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in FLOAT32_KEYS)


def load_dm0_network(
    ckpt_dir: str | Path,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    config: Dm0Config | None = None,
) -> Dm0Network:
    """Load the DM0 network of ``ckpt_dir`` in eval mode.

    Args:
        ckpt_dir: Dexbotic checkpoint directory (config.json + safetensors).
        device: Where the weights go (read there directly).
        dtype: Floating dtype of the weights; None keeps the checkpoint's (that of the first LLM
            layer when the file mixes dtypes). In bf16 the :data:`FLOAT32_KEYS` stay float32.
        config: Already parsed ``config.json`` (read from ``ckpt_dir`` when None).

    Raises:
        DexrlError: missing/corrupt files, a config that disagrees with the weights, missing,
            unexpected or mis-shaped weights.
    """
    ckpt_dir = Path(ckpt_dir)
    config = config or Dm0Config.from_dir(ckpt_dir)
    files = weight_files(ckpt_dir)
    state, _ = read_state_dict(files, device=device)
    check_projector(config.projector_type, config.projector_bias, state, source=config.source)
    target = dtype or checkpoint_dtype(state)
    state = {
        key: value.to(_dtype_for(key, target)) if value.is_floating_point() else value
        for key, value in state.items()
    }
    return build_and_load(
        lambda: Dm0Network(config),
        state,
        files,
        allowed_extra=ALLOWED_EXTRA_KEYS,
        device=device,
    )


def _dtype_for(key: str, target: torch.dtype) -> torch.dtype:
    return torch.float32 if target in _LOW_PRECISION and keeps_float32(key) else target
