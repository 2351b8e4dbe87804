"""Mixture-of-Transformers: decoder towers that share one attention per layer.

Each tower (a HF ``GemmaModel``/``Qwen3Model``-shaped module with ``layers`` and ``norm``) keeps its
own norms, projections and MLP; per layer the towers' queries/keys/values are concatenated along
the sequence and attend together. Only sub-layers of the HF modules are called, never
``DecoderLayer.forward`` or a HF cache, so the math does not depend on the transformers version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# Additive mask value for blocked positions (exp() of it underflows to exactly 0 in fp32 and bf16).
MASK_VALUE = -2.3819763e38


def make_attn_mask(valid: torch.Tensor, ar: torch.Tensor) -> torch.Tensor:
    """Boolean [B, L, L] mask: query i sees key j iff cumsum(ar)[j] <= cumsum(ar)[i], both valid.

    Args:
        valid: [B, L] bool, False for padding.
        ar: [B, L] bool; True starts a new causal block (tokens see earlier blocks and their own).
    """
    blocks = torch.cumsum(ar.long(), dim=1)
    sees = blocks[:, None, :] <= blocks[:, :, None]
    return sees & valid[:, None, :] & valid[:, :, None]


def additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Turn a boolean [B, Q, K] mask into the additive [B, 1, Q, K] form used by attention."""
    zero = torch.zeros((), dtype=dtype, device=mask.device)
    blocked = torch.full((), MASK_VALUE, dtype=dtype, device=mask.device)
    return torch.where(mask[:, None], zero, blocked)


def positions(valid: torch.Tensor) -> torch.Tensor:
    """RoPE positions ``cumsum(valid) - 1``: padding does not advance them."""
    return torch.cumsum(valid.long(), dim=1) - 1


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE on [B, H, L, D] with cos/sin [B, L, D] (HF Llama/Gemma convention)."""
    cos, sin = cos[:, None], sin[:, None]
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


@dataclass
class Segment:
    """One tower's input for a pass: embeddings [B, L, W], valid [B, L] bool, ar [B, L] bool."""

    embeds: torch.Tensor
    valid: torch.Tensor
    ar: torch.Tensor


@dataclass
class PrefixCache:
    """Keys/values [B, kv_heads, L, head_dim] per layer (after RoPE) of an earlier pass.

    ``valid``/``ar`` describe the cached tokens, so a later pass can build its mask and positions.
    """

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    valid: torch.Tensor
    ar: torch.Tensor


def run_towers(
    towers: Sequence[nn.Module],
    rotary: nn.Module,
    inputs: Sequence[Segment | None],
    *,
    cache: PrefixCache | None = None,
    keep_cache: bool = False,
    attention: str = "eager",
) -> tuple[list[torch.Tensor | None], PrefixCache | None]:
    """One pass over the towers' active segments (in tower order), optionally after a cache.

    Builds the attention mask with :func:`make_attn_mask` and the RoPE positions with
    :func:`positions` over the cached tokens followed by this pass's tokens, so running a prefix
    with ``keep_cache`` and then a suffix with ``cache`` equals one joint pass over both.

    Args:
        towers: Decoder towers, see :func:`mot_forward`.
        rotary: HF rotary embedding module (``rotary(x, position_ids) -> (cos, sin)``).
        inputs: One segment per tower, None for towers that sit this pass out.
        cache: Keys/values of earlier tokens every query of this pass may attend to (per mask).
        keep_cache: Return this pass's keys/values as a cache (only without ``cache``).
        attention: One of :data:`dexrl.models.choices.ATTENTION`.

    Returns:
        Per tower its final-normed output (or None), and the new cache when ``keep_cache``.
    """
    if cache is not None and keep_cache:
        raise ValueError("keep_cache extends no existing cache; run the prefix without `cache`")
    active = [segment for segment in inputs if segment is not None]
    valid = torch.cat([s.valid for s in active], dim=1)
    ar = torch.cat([s.ar for s in active], dim=1)
    if cache is not None:
        valid = torch.cat((cache.valid, valid), dim=1)
        ar = torch.cat((cache.ar, ar), dim=1)
    length = sum(s.embeds.shape[1] for s in active)
    first = active[0].embeds
    mask = additive_mask(make_attn_mask(valid, ar)[:, -length:], first.dtype)
    rope = rotary(first, positions(valid)[:, -length:])
    hidden = [None if s is None else s.embeds for s in inputs]
    outputs, (keys, values) = mot_forward(towers, hidden, mask, rope, past=cache,
                                          attention=attention)
    return outputs, (PrefixCache(keys, values, valid, ar) if keep_cache else None)


def mot_forward(
    towers: Sequence[nn.Module],
    hidden: Sequence[torch.Tensor | None],
    attn_mask: torch.Tensor,
    rope: tuple[torch.Tensor, torch.Tensor],
    *,
    past: PrefixCache | None = None,
    attention: str = "eager",
) -> tuple[list[torch.Tensor | None], tuple[list[torch.Tensor], list[torch.Tensor]]]:
    """Run all decoder layers of ``towers`` with one shared attention per layer.

    Args:
        towers: Modules with ``layers`` (each: ``input_layernorm``, ``self_attn.{q,k,v,o}_proj``,
            optional ``self_attn.{q,k}_norm``, ``post_attention_layernorm``, ``mlp``) and ``norm``.
            All towers must have the same depth, head_dim and number of heads.
        hidden: One [B, L_i, W_i] input per tower, or None for a tower that sits this pass out.
        attn_mask: Additive [B, 1, Q, K] mask, Q = sum of L_i, K = cached length + Q.
        rope: cos, sin [B, Q, head_dim] for the concatenated active sequence.
        past: Keys/values of earlier tokens, placed before this pass's keys.
        attention: ``eager`` (:func:`_attention`) or ``sdpa`` (:func:`_sdpa_attention`).

    Returns:
        Per tower its final-normed output (None where the input was None; in the final norm's
        dtype, which may be wider than the stream's), and this pass's own per-layer keys (after
        RoPE) and values.
    """
    active = [(tower, x) for tower, x in zip(towers, hidden, strict=True) if x is not None]
    lengths = [x.shape[1] for _, x in active]
    states = [x for _, x in active]
    cos, sin = rope
    attend = _sdpa_attention if attention == "sdpa" else _attention
    own_keys: list[torch.Tensor] = []
    own_values: list[torch.Tensor] = []
    for index in range(len(active[0][0].layers)):
        layers = [tower.layers[index] for tower, _ in active]
        q, k, v = _project_qkv(layers, states, cos, sin)
        own_keys.append(k)
        own_values.append(v)
        if past is not None:
            k = torch.cat((past.keys[index].to(k.dtype), k), dim=2)
            v = torch.cat((past.values[index].to(v.dtype), v), dim=2)
        scaling = getattr(layers[0].self_attn, "scaling", q.shape[-1] ** -0.5)
        chunks = torch.split(attend(q, k, v, attn_mask, scaling), lengths, dim=1)
        states = [
            _finish_layer(layer, x, c) for layer, x, c in zip(layers, states, chunks, strict=True)
        ]
    normed = iter([tower.norm(x) for (tower, _), x in zip(active, states, strict=True)])
    return [None if x is None else next(normed) for x in hidden], (own_keys, own_values)


def _project_qkv(
    layers: Sequence[nn.Module],
    states: Sequence[torch.Tensor],
    cos: torch.Tensor,
    sin: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per tower: own input norm and q/k/v (+ optional q/k norm); concatenate, then RoPE."""
    qs, ks, vs = [], [], []
    dtype = states[0].dtype
    for layer, x in zip(layers, states, strict=True):
        attn = layer.self_attn
        head_dim = attn.head_dim
        # Norms may be kept in fp32 in a bf16 model; their outputs go back to the stream's dtype.
        h = layer.input_layernorm(x).to(x.dtype)
        shape = (x.shape[0], x.shape[1], -1, head_dim)
        q = attn.q_proj(h).view(shape).transpose(1, 2)
        k = attn.k_proj(h).view(shape).transpose(1, 2)
        v = attn.v_proj(h).view(shape).transpose(1, 2)
        if getattr(attn, "q_norm", None) is not None:
            q, k = attn.q_norm(q), attn.k_norm(k)
        qs.append(q.to(dtype))
        ks.append(k.to(dtype))
        vs.append(v.to(dtype))
    q, k, v = torch.cat(qs, dim=2), torch.cat(ks, dim=2), torch.cat(vs, dim=2)
    cos, sin = cos.to(dtype), sin.to(dtype)
    return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


def _attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scaling: float
) -> torch.Tensor:
    """Eager attention with GQA: [B, H, Q, D] x [B, Hkv, K, D] -> [B, Q, H*D]; softmax in fp32.

    Query head h reads key/value head h // (H / Hkv). The heads sharing a key/value head are
    stacked along the query axis, so each key/value head is multiplied once, never copied per
    query head (the same dot products as repeating it).
    """
    batch, heads, length, head_dim = q.shape
    kv_heads = k.shape[1]
    q = q.reshape(batch, kv_heads, heads // kv_heads * length, head_dim)
    scores = torch.matmul(q, k.transpose(2, 3)) * scaling
    scores = scores.unflatten(2, (heads // kv_heads, length)) + mask[:, :, None].to(q.dtype)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    out = torch.matmul(probs.flatten(2, 3), v).view(batch, heads, length, head_dim)
    return out.transpose(1, 2).reshape(batch, length, heads * head_dim)


def _sdpa_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scaling: float
) -> torch.Tensor:
    """:func:`_attention` through ``scaled_dot_product_attention`` with ``enable_gqa`` (no copy
    of the key/value heads; on CUDA a fused kernel accumulating the softmax in float32)."""
    batch, heads, length, head_dim = q.shape
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype), scale=scaling,
                                         enable_gqa=k.shape[1] != heads)
    return out.transpose(1, 2).reshape(batch, length, heads * head_dim)


def _finish_layer(layer: nn.Module, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
    """Own o_proj + residual, then post-attention norm + MLP + residual."""
    x = x + layer.self_attn.o_proj(attended.to(x.dtype))
    return x + layer.mlp(layer.post_attention_layernorm(x).to(x.dtype))
