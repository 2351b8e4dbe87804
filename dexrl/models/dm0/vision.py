"""Perception-Encoder vision tower of DM0 (PE-Lang-L/14 @ 728 px with two downsampling convs).

Design notes: docs/design/models.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

LAYER_NORM_EPS = 1e-5


@dataclass(frozen=True)
class PeVisionConfig:
    """Sizes of the PE tower; the defaults are Dexbotic's ``pe_lang_l14_728``.

    Attributes:
        image_size: Input side in pixels (also the grid the position embedding was trained on).
        patch_size: Patch side of the conv stem.
        width: Transformer width W (the output has 4W channels).
        layers: Number of residual blocks.
        heads: Attention heads (W / heads must be divisible by 4 for the 2-D RoPE).
        mlp_ratio: MLP hidden width / W.
        rope_theta: RoPE base.
    """

    image_size: int = 728
    patch_size: int = 14
    width: int = 1024
    layers: int = 23
    heads: int = 16
    mlp_ratio: float = 4.0
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        for name in ("image_size", "patch_size", "width", "layers", "heads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} is not a multiple of patch_size "
                             f"{self.patch_size}")
        if self.width % self.heads or (self.width // self.heads) % 4:
            raise ValueError(f"width {self.width} / heads {self.heads} must be a multiple of 4")
        if not self.mlp_ratio > 0 or not self.rope_theta > 0:
            raise ValueError("mlp_ratio and rope_theta must be positive")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PeVisionConfig:
        """Build from a ``vision_config`` object; unknown keys raise ValueError."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown keys {unknown}; allowed: {sorted(known)}")
        return cls(**data)

    @property
    def grid(self) -> int:
        """Patches per side at ``image_size``."""
        return self.image_size // self.patch_size

    @property
    def out_width(self) -> int:
        """Channels of the output tokens (after both downsampling convs)."""
        return 4 * self.width


def rope_2d_angles(grid_h: int, grid_w: int, head_dim: int, theta: float,
                   device: torch.device | str | None = None) -> torch.Tensor:
    """Rotation angles float32 [1 + grid_h·grid_w, head_dim / 2], one per (even, odd) dim pair.

    Row 0 is the CLS token (all zeros). Patch (r, c), row-major, uses positions c + 1 for the
    first half of the pairs and r + 1 for the second; within each half, pair j has frequency
    theta^(-4j / head_dim). Computed on ``device`` (no host copy in the forward pass, which a
    CUDA graph could not contain).
    """
    quarter = head_dim // 4
    f32 = {"dtype": torch.float32, "device": device}
    inv_freq = theta ** (-torch.arange(quarter, **f32) * 4.0 / head_dim)
    rows = torch.arange(1, grid_h + 1, **f32)
    cols = torch.arange(1, grid_w + 1, **f32)
    by_col = (cols[:, None] * inv_freq)[None, :, :].expand(grid_h, grid_w, quarter)
    by_row = (rows[:, None] * inv_freq)[:, None, :].expand(grid_h, grid_w, quarter)
    angles = torch.cat([by_col, by_row], dim=-1).reshape(grid_h * grid_w, 2 * quarter)
    return torch.cat([torch.zeros(1, 2 * quarter, **f32), angles], dim=0)


def apply_rope_pairs(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate adjacent dim pairs of x [..., L, D] by ``angles`` [L, D/2], in float32."""
    pairs = x.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    cos, sin = angles.cos(), angles.sin()
    rotated = torch.stack([even * cos - odd * sin, odd * cos + even * sin], dim=-1)
    return rotated.flatten(-2).to(x.dtype)


class LayerScale(nn.Module):
    """Per-channel residual scale ``gamma``."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class PeAttention(nn.Module):
    """Bidirectional multi-head attention with packed q/k/v and 2-D RoPE on q and k."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * width, width))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * width))
        self.out_proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)
        # Packed as [q | k | v], each split into heads of contiguous channels.
        q, k, v = qkv.view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        q, k = apply_rope_pairs(q, angles), apply_rope_pairs(k, angles)
        out = F.scaled_dot_product_attention(q, k, v)  # default scale head_dim^-0.5
        return self.out_proj(out.transpose(1, 2).reshape(batch, length, width))


class PeResidualBlock(nn.Module):
    """Pre-norm block: x + ls_1(attn(ln_1 x)), then x + ls_2(mlp(ln_2 x)) with exact GELU."""

    def __init__(self, width: int, heads: int, mlp_width: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, eps=LAYER_NORM_EPS)
        self.attn = PeAttention(width, heads)
        self.ls_1 = LayerScale(width)
        self.ln_2 = nn.LayerNorm(width, eps=LAYER_NORM_EPS)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(width, mlp_width))
        self.mlp.add_module("gelu", nn.GELU())
        self.mlp.add_module("c_proj", nn.Linear(mlp_width, width))
        self.ls_2 = LayerScale(width)

    def forward(self, x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
        x = x + self.ls_1(self.attn(self.ln_1(x), angles))
        return x + self.ls_2(self.mlp(self.ln_2(x)))


class PeTransformer(nn.Module):
    """The stack of residual blocks (``transformer.resblocks``)."""

    def __init__(self, config: PeVisionConfig) -> None:
        super().__init__()
        mlp_width = int(config.width * config.mlp_ratio)
        self.resblocks = nn.ModuleList(
            PeResidualBlock(config.width, config.heads, mlp_width) for _ in range(config.layers)
        )


class PerceptionEncoder(nn.Module):
    """PE tower: pixels [N, 3, S, S] -> tokens [N, ceil(ceil(g/2)/2)², 4W] with g = S / patch.

    Mixed precision: ``conv1`` and ``positional_embedding`` may be kept in float32 while the rest
    is bf16; the stem then runs in float32 and its output is cast to the blocks' dtype.
    """

    def __init__(self, config: PeVisionConfig) -> None:
        super().__init__()
        self.config = config
        width = config.width
        self.conv1 = nn.Conv2d(3, width, config.patch_size, stride=config.patch_size, bias=False)
        self.class_embedding = nn.Parameter(torch.zeros(width))
        self.positional_embedding = nn.Parameter(torch.zeros(1 + config.grid**2, width))
        self.ln_pre = nn.LayerNorm(width, eps=LAYER_NORM_EPS)
        self.transformer = PeTransformer(config)
        self.vit_downsampler1 = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1)
        self.vit_downsampler2 = nn.Conv2d(2 * width, 4 * width, 3, stride=2, padding=1)

    def position_embedding(self, grid_h: int, grid_w: int) -> torch.Tensor:
        """[1 + grid_h·grid_w, W]: the CLS row, then the patch rows bilinearly resized to the
        grid (align_corners=False) when it differs from the trained one."""
        table = self.positional_embedding
        trained = self.config.grid
        if (grid_h, grid_w) == (trained, trained):
            return table
        patches = table[1:].reshape(1, trained, trained, -1).permute(0, 3, 1, 2).float()
        resized = F.interpolate(patches, size=(grid_h, grid_w), mode="bilinear",
                                align_corners=False)
        resized = resized.permute(0, 2, 3, 1).reshape(grid_h * grid_w, -1).to(table.dtype)
        return torch.cat([table[:1], resized], dim=0)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        stem_dtype = self.conv1.weight.dtype
        x = self.conv1(pixels.to(stem_dtype))  # [N, W, gh, gw]
        batch, width, grid_h, grid_w = x.shape
        x = x.flatten(2).transpose(1, 2)
        cls = self.class_embedding.to(x.dtype).expand(batch, 1, width)
        x = torch.cat([cls, x], dim=1) + self.position_embedding(grid_h, grid_w).to(x.dtype)
        x = self.ln_pre(x.to(self.ln_pre.weight.dtype))
        angles = rope_2d_angles(grid_h, grid_w, width // self.config.heads,
                                self.config.rope_theta, device=x.device)
        for block in self.transformer.resblocks:
            x = block(x, angles)
        grid = x[:, 1:].transpose(1, 2).reshape(batch, width, grid_h, grid_w)
        grid = self.vit_downsampler2(self.vit_downsampler1(grid))
        return grid.flatten(2).transpose(1, 2)
