"""Build a :class:`Pi0Network` from a Dexbotic π0 checkpoint directory, key for key."""

from __future__ import annotations

from pathlib import Path

import torch

from dexrl.models.checkpoint import (
    build_and_load,
    checkpoint_dtype,
    read_state_dict,
    weight_files,
)
from dexrl.models.pi0.config import Pi0Config
from dexrl.models.pi0.network import Pi0Network
from dexrl.models.pi0.projector import check_projector

# Checkpoint entries Dexbotic saves but never uses: the expert's token embeddings (it only sees
# embeddings) and SigLIP's attention-pooling head (features are the last hidden state).
ALLOWED_EXTRA_KEYS = (
    "model.action_expert.embed_tokens.*",
    "model.mm_vision_tower.vision_tower.vision_model.head.*",
)


def load_pi0_network(
    ckpt_dir: str | Path,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    config: Pi0Config | None = None,
) -> Pi0Network:
    """Load the π0 network of ``ckpt_dir`` in eval mode.

    Args:
        ckpt_dir: Dexbotic checkpoint directory (config.json + safetensors).
        device: Where the weights go (read there directly).
        dtype: Floating dtype of every weight; None keeps the checkpoint's (that of the first
            LLM layer when the file mixes dtypes).
        config: Already parsed ``config.json`` (read from ``ckpt_dir`` when None).

    Raises:
        DexrlError: missing/corrupt files, a config that disagrees with the weights, missing,
            unexpected or mis-shaped weights.
    """
    ckpt_dir = Path(ckpt_dir)
    config = config or Pi0Config.from_dir(ckpt_dir)
    files = weight_files(ckpt_dir)
    state, _ = read_state_dict(files, device=device)
    check_projector(
        config.projector_type,
        config.projector_bias,
        state,
        source=config.source,
        given=bool(config.raw.get("mm_projector_type")),
    )
    target = dtype or checkpoint_dtype(state)
    state = {k: v.to(target) if v.is_floating_point() else v for k, v in state.items()}
    return build_and_load(
        lambda: Pi0Network(config),
        state,
        files,
        allowed_extra=ALLOWED_EXTRA_KEYS,
        device=device,
    )
