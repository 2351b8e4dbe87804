"""Random inputs of a flow network (π0's or DM0's) for the network tests."""

from __future__ import annotations

import torch

from dexrl.models.flow.network import ModelInputs

TOKENS = 16  # prompt length of the inputs


def model_inputs(net: torch.nn.Module, batch: int = 3, seed: int = 0,
                 first_token: int = 0) -> ModelInputs:
    """Random inputs with ragged prompts (16, 5, 9, 12 tokens, ids from ``first_token`` up); the
    third view is the masked zero pad."""
    gen = torch.Generator().manual_seed(seed)
    size = net.config.vision.image_size
    images = torch.rand(batch, 3, 3, size, size, generator=gen) * 2 - 1
    images[:, 2] = 0
    lengths = torch.tensor([16, 5, 9, 12][:batch])
    token_mask = torch.arange(TOKENS)[None] < lengths[:, None]
    tokens = torch.randint(first_token, net.config.llm.vocab_size, (batch, TOKENS), generator=gen)
    masks = torch.tensor([True, True, False]).expand(batch, 3)
    state = torch.randn(batch, 32, generator=gen)
    return ModelInputs(images, masks, tokens * token_mask, token_mask, state)


def noisy_actions(net: torch.nn.Module, batch: int,
                  seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Noisy action chunks x_t [B, chunk, 32] and their times t [B]."""
    gen = torch.Generator().manual_seed(seed)
    x_t = torch.randn(batch, net.config.chunk_size, 32, generator=gen)
    return x_t, torch.rand(batch, generator=gen)
