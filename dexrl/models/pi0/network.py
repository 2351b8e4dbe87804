"""Dexbotic π0 network: SigLIP + projector + Gemma prefix LLM + Gemma action expert (MoT).

Parameter names equal Dexbotic's checkpoint keys (``model.llm.*``, ``model.action_expert.*``,
``model.mm_vision_tower.vision_tower.vision_model.*``, ``model.mm_projector.*``,
``model.state_proj`` and the action/time projections). The HF modules are parameter containers
and sub-layers only; the layer loop and the prefix KV cache live in :mod:`dexrl.models.flow.mot`.
:class:`~dexrl.models.flow.network.MoTFlowNetwork` holds what π0 and DM0 share.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import GemmaModel, SiglipVisionModel

from dexrl.models.flow.mot import Segment
from dexrl.models.flow.network import MoTFlowNetwork
from dexrl.models.flow.projector import build_projector
from dexrl.models.pi0.config import Pi0Config


class SiglipTower(nn.Module):
    """Holds the HF SigLIP model as ``vision_tower`` (Dexbotic's nesting of parameter names)."""

    def __init__(self, config) -> None:
        super().__init__()
        config._attn_implementation = "sdpa"
        self.vision_tower = SiglipVisionModel(config)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """[N, 3, S, S] -> [N, tokens, width]: the last hidden state after ``post_layernorm``."""
        model = self.vision_tower.vision_model
        pixel_values = pixel_values.to(model.embeddings.patch_embedding.weight.dtype)
        return model(pixel_values=pixel_values).last_hidden_state


class Pi0Model(nn.Module):
    """The ``model.*`` module tree of a Dexbotic π0 checkpoint."""

    def __init__(self, config: Pi0Config) -> None:
        super().__init__()
        width = config.expert.hidden_size
        self.llm = GemmaModel(config.llm)
        self.action_expert = GemmaModel(config.expert)
        self.action_expert.embed_tokens = None  # the expert only ever sees embeddings
        self.mm_vision_tower = SiglipTower(config.vision)
        self.mm_projector = build_projector(
            config.projector_type,
            config.vision.hidden_size,
            config.llm.hidden_size,
            config.projector_bias,
        )
        self.state_proj = nn.Linear(config.action_dim, width)
        self.action_in_proj = nn.Linear(config.action_dim, width)
        self.action_time_mlp_in = nn.Linear(2 * width, width)
        self.action_time_mlp_out = nn.Linear(width, width)
        self.action_out_proj = nn.Linear(width, config.action_dim)


class Pi0Network(MoTFlowNetwork):
    """Dexbotic π0 with a prefix KV cache reused by every denoising step."""

    # FSDP wraps these layer classes as units (they exist in the tree, as FSDP requires).
    # FSDP units: dexrl runs its own layer loop and never calls a decoder layer's forward, so
    # a unit must be a sub-module that is called (the MLP), or its weights would not be gathered.
    _no_split_modules = ["GemmaMLP", "SiglipEncoderLayer"]
    scale_text_embeddings = True
    causal_prefix = False

    def __init__(self, config: Pi0Config) -> None:
        super().__init__()
        self.config = config
        self.model = Pi0Model(config)

    def init_buffers(self, device: torch.device) -> None:
        """(Re)create the non-persistent buffers (RoPE frequencies, SigLIP position ids) on
        ``device``; needed after building on the meta device. RoPE frequencies stay float32."""
        super().init_buffers(device)
        embeddings = self.model.mm_vision_tower.vision_tower.vision_model.embeddings
        ids = torch.arange(embeddings.num_positions, device=device).expand((1, -1))
        embeddings.register_buffer("position_ids", ids, persistent=False)

    @property
    def towers(self) -> tuple[nn.Module, nn.Module]:
        """The MoT towers in sequence order: prefix LLM, action expert."""
        return self.model.llm, self.model.action_expert

    def embed_suffix(self, state: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor) -> Segment:
        """State token, then one token per action mixing x_t with the embedding of ``t`` [B]."""
        dtype = self.model.action_in_proj.weight.dtype
        state_token = self.model.state_proj(state.to(dtype))[:, None]
        embeds = torch.cat([state_token, self.embed_actions(x_t, t)], dim=1)
        batch, length = embeds.shape[:2]
        valid = torch.ones(batch, length, dtype=torch.bool, device=embeds.device)
        # The state token and the first action token each open a causal block: the state sees
        # only the prefix and itself, the actions see everything before and each other.
        ar = torch.zeros_like(valid)
        ar[:, :2] = True
        return Segment(embeds, valid, ar)
