"""Build a :class:`Pi0Network` from a Dexbotic π0 checkpoint directory, key for key."""

from __future__ import annotations

from pathlib import Path

import torch

from dexrl.models.flow.loader import load_weights
from dexrl.models.pi0.config import Pi0Config
from dexrl.models.pi0.network import Pi0Network

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
    config = config or Pi0Config.from_dir(ckpt_dir)
    return load_weights(
        ckpt_dir, config, lambda: Pi0Network(config), ALLOWED_EXTRA_KEYS, device=device, dtype=dtype
    )
