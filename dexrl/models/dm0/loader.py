"""Build a :class:`Dm0Network` from a Dexbotic DM0 checkpoint directory, key for key."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import torch

from dexrl.models.dm0.config import Dm0Config
from dexrl.models.dm0.network import Dm0Network
from dexrl.models.flow.loader import load_weights

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

    Arguments and errors are those of :func:`~dexrl.models.pi0.loader.load_pi0_network`, except
    that with ``dtype`` bf16 (or fp16) the :data:`FLOAT32_KEYS` stay float32.
    """
    config = config or Dm0Config.from_dir(ckpt_dir)
    return load_weights(
        ckpt_dir,
        config,
        lambda: Dm0Network(config),
        ALLOWED_EXTRA_KEYS,
        device=device,
        dtype=dtype,
        keeps_float32=keeps_float32,
    )
