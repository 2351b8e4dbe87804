"""Dexbotic π0 network: SigLIP + projector + Gemma prefix LLM + Gemma action expert (MoT).

Parameter names equal Dexbotic's checkpoint keys (``model.llm.*``, ``model.action_expert.*``,
``model.mm_vision_tower.vision_tower.vision_model.*``, ``model.mm_projector.*``,
``model.state_proj`` and the action/time projections). The HF modules are parameter containers
and sub-layers only; the layer loop and the prefix KV cache live in :mod:`dexrl.models.mot`.
:class:`MoTFlowNetwork` holds what π0 and DM0 share (cached prefix, denoising, sampling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GemmaModel, SiglipVisionModel

from dexrl.models.flow import sincos_time_embedding, time_grid
from dexrl.models.mot import PrefixCache, Segment, run_towers
from dexrl.models.pi0.config import Pi0Config
from dexrl.models.pi0.projector import build_projector

TIME_MIN_PERIOD = 4e-3
TIME_MAX_PERIOD = 4.0


@dataclass
class Pi0Observation:
    """Model-ready inputs of one batch.

    Attributes:
        images: float [B, V, 3, S, S] in [-1, 1] (views: main, wrist, zero pad).
        image_masks: bool [B, V]; False for views that hold no image.
        tokens: long [B, L] prompt ids, right-padded with 0.
        token_mask: bool [B, L].
        state: float [B, action_dim], padded and normalized.
    """

    images: torch.Tensor
    image_masks: torch.Tensor
    tokens: torch.Tensor
    token_mask: torch.Tensor
    state: torch.Tensor

    def to(self, device: torch.device | str) -> Pi0Observation:
        """Move every tensor to ``device``."""
        return Pi0Observation(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


class SuffixOutput(NamedTuple):
    """Result of one denoising evaluation.

    Attributes:
        velocity: [B, chunk, action_dim], the predicted noise - data direction.
        action_hidden: [B, chunk, expert width], the expert's final-normed outputs at the action
            tokens (the state token is excluded); a value head reads their mean.
    """

    velocity: torch.Tensor
    action_hidden: torch.Tensor


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


class MoTFlowNetwork(nn.Module):
    """A flow-matching VLA whose prefix LLM ``model.llm`` and action expert share attention.

    Subclasses define :attr:`towers`, :meth:`embed_suffix`, the prefix conventions below, and a
    ``model`` with ``llm`` (its ``embed_tokens`` embeds the prompt, its ``rotary_emb`` gives
    RoPE to both towers), ``mm_vision_tower`` + ``mm_projector`` (pixels -> image tokens) and
    the action projections ``action_in_proj``, ``action_time_mlp_in``, ``action_time_mlp_out``,
    ``action_out_proj``.

    Typical use: ``cache = net.encode_prefix(obs)``, then ``net.denoise_step(cache, obs.state,
    x_t, t)`` per step (or :meth:`sample_actions`). :meth:`forward` is the same computation as one
    joint pass over prefix and suffix, without a cache.
    """

    config: Any
    model: nn.Module
    # Prefix conventions (π0: scaled text, bidirectional prefix; DM0: neither).
    scale_text_embeddings: bool
    causal_prefix: bool

    @property
    def towers(self) -> tuple[nn.Module, nn.Module]:
        """The MoT towers in sequence order: prefix LLM, action expert."""
        raise NotImplementedError

    def embed_prefix(self, obs: Pi0Observation, *, skip_masked_views: bool = True) -> Segment:
        """Image tokens (projected vision features, unscaled) then text tokens.

        Text embeddings are multiplied by sqrt(LLM width) when :attr:`scale_text_embeddings`;
        the prefix is bidirectional among valid tokens, or causal when :attr:`causal_prefix`.

        Args:
            obs: The batch.
            skip_masked_views: Leave out views masked in every sample (the zero-pad slot). Their
                keys would get exactly zero attention weight and they do not advance positions,
                so outputs are unchanged; it saves a third of the vision compute.
        """
        batch, num_views = obs.image_masks.shape
        views = list(range(num_views))
        if skip_masked_views:
            views = [v for v in views if bool(obs.image_masks[:, v].any())]
        parts, valid = [], []
        if views:
            pixels = obs.images[:, views].flatten(0, 1)
            features = self.model.mm_projector(self.model.mm_vision_tower(pixels))
            tokens_per_view = features.shape[1]
            parts.append(features.reshape(batch, len(views) * tokens_per_view, -1))
            masks = obs.image_masks[:, views, None].expand(batch, len(views), tokens_per_view)
            valid.append(masks.reshape(batch, -1))
        text = self.model.llm.embed_tokens(obs.tokens)
        if self.scale_text_embeddings:
            text = text * math.sqrt(self.config.llm.hidden_size)
        parts.append(text)
        valid.append(obs.token_mask.bool())
        embeds = torch.cat([p.to(text.dtype) for p in parts], dim=1)
        valid_all = torch.cat(valid, dim=1)
        ar = torch.full_like(valid_all, self.causal_prefix)
        return Segment(embeds, valid_all, ar)

    def embed_suffix(self, state: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor) -> Segment:
        """Suffix tokens for noisy actions ``x_t`` at times ``t`` [B]; the action tokens last."""
        raise NotImplementedError

    def init_buffers(self, device: torch.device) -> None:
        """(Re)create the towers' RoPE frequencies (non-persistent, float32) on ``device``;
        needed after building on the meta device."""
        for tower in self.towers:
            tower.rotary_emb = type(tower.rotary_emb)(config=tower.config, device=device)

    def embed_actions(self, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """One token per action: x_t [B, chunk, D] mixed with the sine-cosine embedding of t [B]."""
        dtype = self.model.action_in_proj.weight.dtype
        actions = self.model.action_in_proj(x_t.to(dtype))
        time_emb = sincos_time_embedding(
            t, actions.shape[-1], TIME_MIN_PERIOD, TIME_MAX_PERIOD, dtype=dtype
        )
        mixed = torch.cat([actions, time_emb[:, None].expand_as(actions)], dim=-1)
        return self.model.action_time_mlp_out(F.silu(self.model.action_time_mlp_in(mixed)))

    def encode_prefix(self, obs: Pi0Observation, *, skip_masked_views: bool = True) -> PrefixCache:
        """Run the prefix through the LLM once; returns the per-layer K/V the suffix attends to."""
        segment = self.embed_prefix(obs, skip_masked_views=skip_masked_views)
        _, cache = run_towers(
            self.towers, self.model.llm.rotary_emb, [segment, None], keep_cache=True
        )
        return cache

    def denoise_step(
        self, cache: PrefixCache, state: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor
    ) -> SuffixOutput:
        """Velocity and action-token hidden states at x_t [B, chunk, 32], t [B] after the prefix."""
        segment = self.embed_suffix(state, x_t, t)
        (_, hidden), _ = run_towers(
            self.towers, self.model.llm.rotary_emb, [None, segment], cache=cache
        )
        return self._suffix_output(hidden, x_t.shape[1])

    def forward(
        self,
        obs: Pi0Observation,
        x_t: torch.Tensor,
        t: torch.Tensor,
        *,
        skip_masked_views: bool = True,
    ) -> SuffixOutput:
        """One joint pass over prefix and suffix (no cache); same result as the cached path."""
        prefix = self.embed_prefix(obs, skip_masked_views=skip_masked_views)
        suffix = self.embed_suffix(obs.state, x_t, t)
        (_, hidden), _ = run_towers(self.towers, self.model.llm.rotary_emb, [prefix, suffix])
        return self._suffix_output(hidden, x_t.shape[1])

    @torch.no_grad()
    def sample_actions(
        self, obs: Pi0Observation, noise: torch.Tensor, num_steps: int = 10
    ) -> torch.Tensor:
        """Deterministic Euler ODE from ``noise`` (x at t = 1) to t ≈ 0; returns float32 actions."""
        cache = self.encode_prefix(obs)
        times = time_grid(num_steps).to(noise.device)
        dt = torch.tensor(-1.0 / num_steps, dtype=torch.float32, device=noise.device)
        x = noise.to(torch.float32)
        for step in range(num_steps):
            t = times[step].expand(x.shape[0])
            velocity = self.denoise_step(cache, obs.state, x, t).velocity
            x = x + velocity.float() * dt
        return x

    def _suffix_output(self, hidden: torch.Tensor, chunk: int) -> SuffixOutput:
        action_hidden = hidden[:, -chunk:]
        out_proj = self.model.action_out_proj
        return SuffixOutput(out_proj(action_hidden.to(out_proj.weight.dtype)), action_hidden)


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
