"""What π0 and DM0 networks share: the batch inputs, the cached prefix, denoising and sampling.

:class:`MoTFlowNetwork` runs a prefix LLM and an action expert that share attention per layer
(:mod:`dexrl.models.flow.mot`); subclasses add their towers and suffix tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from dexrl.models.flow.mot import PrefixCache, Segment, run_towers
from dexrl.models.flow.sampling import sincos_time_embedding, time_grid

TIME_MIN_PERIOD = 4e-3
TIME_MAX_PERIOD = 4.0


@dataclass
class ModelInputs:
    """Model-ready inputs of one batch.

    Attributes:
        images: float [B, V, 3, S, S] in [-1, 1] (views: main, wrist, zero pad).
        image_masks: bool [B, V]; False for views that hold no image.
        tokens: long [B, L] prompt ids, right-padded with 0.
        token_mask: bool [B, L].
        state: float [B, action_dim], padded and normalized.
        view_present: Per view, False where it is masked in every sample (known on the host);
            None reads ``image_masks`` on the device (a device-to-host sync per call).
    """

    images: torch.Tensor
    image_masks: torch.Tensor
    tokens: torch.Tensor
    token_mask: torch.Tensor
    state: torch.Tensor
    view_present: tuple[bool, ...] | None = field(default=None, compare=False)

    def to(self, device: torch.device | str) -> ModelInputs:
        """Move every tensor to ``device``."""
        moved = {f.name: getattr(self, f.name).to(device) for f in fields(self)
                 if f.name != "view_present"}
        return ModelInputs(**moved, view_present=self.view_present)


class SuffixOutput(NamedTuple):
    """Result of one denoising evaluation.

    Attributes:
        velocity: [B, chunk, action_dim], the predicted noise - data direction.
        action_hidden: [B, chunk, expert width], the expert's final-normed outputs at the action
            tokens (the state token is excluded); a value head reads their mean.
    """

    velocity: torch.Tensor
    action_hidden: torch.Tensor

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
    # The shared attention's implementation (mot.ATTENTION); the RL adapter may set "sdpa".
    attention: str = "eager"

    @property
    def towers(self) -> tuple[nn.Module, nn.Module]:
        """The MoT towers in sequence order: prefix LLM, action expert."""
        raise NotImplementedError

    def embed_prefix(self, obs: ModelInputs, *, skip_masked_views: bool = True) -> Segment:
        """Image tokens (projected vision features, unscaled) then text tokens.

        Text embeddings are multiplied by sqrt(LLM width) when :attr:`scale_text_embeddings`;
        the prefix is bidirectional among valid tokens, or causal when :attr:`causal_prefix`.

        Args:
            obs: The batch.
            skip_masked_views: Leave out views masked in every sample (the zero-pad slot). Their
                keys would get exactly zero attention weight and they do not advance positions,
                so outputs are unchanged; it saves a third of the vision compute. Decided from
                ``obs.view_present`` where set, so the pass has no device-to-host sync.
        """
        batch, num_views = obs.image_masks.shape
        views = list(range(num_views))
        if skip_masked_views:
            present = obs.view_present
            views = [v for v in views if (present[v] if present is not None
                                          else bool(obs.image_masks[:, v].any()))]
        parts, valid = [], []
        if views:
            pixels = _select_views(obs.images, views).flatten(0, 1)
            features = self.model.mm_projector(self.model.mm_vision_tower(pixels))
            tokens_per_view = features.shape[1]
            parts.append(features.reshape(batch, len(views) * tokens_per_view, -1))
            masks = _select_views(obs.image_masks, views)[..., None]
            valid.append(masks.expand(batch, len(views), tokens_per_view).reshape(batch, -1))
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

    def encode_prefix(self, obs: ModelInputs, *, skip_masked_views: bool = True) -> PrefixCache:
        """Run the prefix through the LLM once; returns the per-layer K/V the suffix attends to."""
        segment = self.embed_prefix(obs, skip_masked_views=skip_masked_views)
        _, cache = run_towers(
            self.towers, self.model.llm.rotary_emb, [segment, None], keep_cache=True,
            attention=self.attention,
        )
        return cache

    def denoise_step(
        self, cache: PrefixCache, state: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor
    ) -> SuffixOutput:
        """Velocity and action-token hidden states at x_t [B, chunk, 32], t [B] after the prefix."""
        segment = self.embed_suffix(state, x_t, t)
        (_, hidden), _ = run_towers(
            self.towers, self.model.llm.rotary_emb, [None, segment], cache=cache,
            attention=self.attention,
        )
        return self._suffix_output(hidden, x_t.shape[1])

    def forward(
        self,
        obs: ModelInputs,
        x_t: torch.Tensor,
        t: torch.Tensor,
        *,
        skip_masked_views: bool = True,
    ) -> SuffixOutput:
        """One joint pass over prefix and suffix (no cache); same result as the cached path."""
        prefix = self.embed_prefix(obs, skip_masked_views=skip_masked_views)
        suffix = self.embed_suffix(obs.state, x_t, t)
        (_, hidden), _ = run_towers(self.towers, self.model.llm.rotary_emb, [prefix, suffix],
                                    attention=self.attention)
        return self._suffix_output(hidden, x_t.shape[1])

    @torch.no_grad()
    def sample_actions(
        self, obs: ModelInputs, noise: torch.Tensor, num_steps: int = 10
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


def _select_views(tensor: torch.Tensor, views: list[int]) -> torch.Tensor:
    """``tensor[:, views]`` by slicing where the views are consecutive: a list index would copy
    the list to the device (no host copy may run inside a CUDA graph)."""
    if views == list(range(views[0], views[-1] + 1)):
        return tensor[:, views[0]:views[-1] + 1]
    return torch.stack([tensor[:, v] for v in views], dim=1)
