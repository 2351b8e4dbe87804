"""PE vision tower: Dexbotic parameter names and sizes, 2-D RoPE, position embedding, and the
whole tower against a plain reference written from the architecture facts."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from dexrl.models.dm0.vision import (
    PerceptionEncoder,
    PeVisionConfig,
    apply_rope_pairs,
    rope_2d_angles,
)
from dexrl.models.pi0.tiny import random_state

TINY = PeVisionConfig(image_size=28, patch_size=7, width=16, layers=2, heads=2)


def _tower(config: PeVisionConfig = TINY, seed: int = 0) -> PerceptionEncoder:
    tower = PerceptionEncoder(config)
    tower.load_state_dict(random_state(tower, seed))
    return tower.eval()


def test_parameter_names_and_pe_lang_l14_728_shapes() -> None:
    with torch.device("meta"):
        tower = PerceptionEncoder(PeVisionConfig())
    shapes = {k: tuple(v.shape) for k, v in tower.state_dict().items()}
    block = {
        "ln_1.weight": (1024,), "ln_1.bias": (1024,),
        "attn.in_proj_weight": (3072, 1024), "attn.in_proj_bias": (3072,),
        "attn.out_proj.weight": (1024, 1024), "attn.out_proj.bias": (1024,),
        "ls_1.gamma": (1024,), "ln_2.weight": (1024,), "ln_2.bias": (1024,),
        "mlp.c_fc.weight": (4096, 1024), "mlp.c_fc.bias": (4096,),
        "mlp.c_proj.weight": (1024, 4096), "mlp.c_proj.bias": (1024,), "ls_2.gamma": (1024,),
    }
    expected = {
        "conv1.weight": (1024, 3, 14, 14),
        "class_embedding": (1024,),
        "positional_embedding": (1 + 52**2, 1024),
        "ln_pre.weight": (1024,), "ln_pre.bias": (1024,),
        "vit_downsampler1.weight": (2048, 1024, 3, 3), "vit_downsampler1.bias": (2048,),
        "vit_downsampler2.weight": (4096, 2048, 3, 3), "vit_downsampler2.bias": (4096,),
        **{f"transformer.resblocks.{i}.{k}": s for i in range(23) for k, s in block.items()},
    }
    assert shapes == expected
    # ≈ 0.39 B parameters with the downsamplers (the dexbotic-models doc's estimate).
    assert 0.38e9 < sum(math.prod(s) for s in shapes.values()) < 0.39e9
    out = tower(torch.empty(2, 3, 728, 728, device="meta"))
    assert tuple(out.shape) == (2, 169, 4096)


def test_rope_angles_reference_and_zero_for_cls() -> None:
    grid_h, grid_w, head_dim, theta = 3, 4, 8, 100.0
    angles = rope_2d_angles(grid_h, grid_w, head_dim, theta)
    assert angles.shape == (1 + grid_h * grid_w, head_dim // 2)
    assert torch.equal(angles[0], torch.zeros(head_dim // 2))
    quarter = head_dim // 4
    for r in range(grid_h):
        for c in range(grid_w):
            row = angles[1 + r * grid_w + c]
            for j in range(quarter):
                freq = theta ** (-4.0 * j / head_dim)
                assert row[j].item() == pytest.approx((c + 1) * freq, rel=1e-6)
                assert row[quarter + j].item() == pytest.approx((r + 1) * freq, rel=1e-6)


def test_rope_rotates_adjacent_pairs_and_leaves_cls() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 1 + 6, 8, generator=gen)
    angles = rope_2d_angles(2, 3, 8, 10000.0)
    out = apply_rope_pairs(x, angles)
    as_complex = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())
    expected = torch.view_as_real(as_complex * torch.polar(torch.ones_like(angles), angles))
    torch.testing.assert_close(out, expected.flatten(-2))
    assert torch.equal(out[:, :, 0], x[:, :, 0])  # CLS: angle 0
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))


def test_position_embedding_identity_at_trained_grid_and_resized_otherwise() -> None:
    tower = _tower()
    assert tower.position_embedding(4, 4) is tower.positional_embedding
    resized = tower.position_embedding(6, 6)
    assert resized.shape == (1 + 36, 16)
    assert torch.equal(resized[0], tower.positional_embedding[0])  # CLS row is not resized
    with torch.no_grad():
        tower.positional_embedding[1:] = torch.arange(16.0)  # constant over the grid
    constant = torch.arange(16.0).expand(36, 16)
    torch.testing.assert_close(tower.position_embedding(6, 6)[1:], constant)


def _reference(tower: PerceptionEncoder, pixels: torch.Tensor) -> torch.Tensor:
    """The tower written out with plain tensor ops (unfold stem, complex RoPE, manual softmax)."""
    cfg = tower.config
    width, heads = cfg.width, cfg.heads
    head_dim = width // heads
    batch, grid = pixels.shape[0], pixels.shape[-1] // cfg.patch_size
    patches = F.unfold(pixels, kernel_size=cfg.patch_size, stride=cfg.patch_size)
    x = patches.transpose(1, 2) @ tower.conv1.weight.reshape(width, -1).T
    x = torch.cat([tower.class_embedding.expand(batch, 1, width), x], dim=1)
    x = x + tower.position_embedding(grid, grid)
    x = F.layer_norm(x, (width,), tower.ln_pre.weight, tower.ln_pre.bias, 1e-5)
    angles = torch.zeros(1 + grid * grid, head_dim // 2)
    for index in range(grid * grid):
        row, col = divmod(index, grid)
        for j in range(head_dim // 4):
            freq = cfg.rope_theta ** (-4.0 * j / head_dim)
            angles[1 + index, j] = (col + 1) * freq
            angles[1 + index, head_dim // 4 + j] = (row + 1) * freq
    rotation = torch.polar(torch.ones_like(angles), angles)[None, :, None]

    def rope(t: torch.Tensor) -> torch.Tensor:
        pairs = torch.view_as_complex(t.reshape(*t.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(pairs * rotation).flatten(-2)

    for block in tower.transformer.resblocks:
        h = F.layer_norm(x, (width,), block.ln_1.weight, block.ln_1.bias, 1e-5)
        qkv = h @ block.attn.in_proj_weight.T + block.attn.in_proj_bias
        q, k, v = (part.reshape(batch, -1, heads, head_dim) for part in qkv.split(width, dim=-1))
        scores = torch.einsum("bqhd,bkhd->bhqk", rope(q), rope(k)) / math.sqrt(head_dim)
        out = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v).reshape(batch, -1, width)
        x = x + block.ls_1.gamma * (out @ block.attn.out_proj.weight.T + block.attn.out_proj.bias)
        h = F.layer_norm(x, (width,), block.ln_2.weight, block.ln_2.bias, 1e-5)
        hidden = F.gelu(h @ block.mlp.c_fc.weight.T + block.mlp.c_fc.bias)
        x = x + block.ls_2.gamma * (hidden @ block.mlp.c_proj.weight.T + block.mlp.c_proj.bias)
    maps = x[:, 1:].reshape(batch, grid, grid, width).permute(0, 3, 1, 2)
    for conv in (tower.vit_downsampler1, tower.vit_downsampler2):
        maps = F.conv2d(maps, conv.weight, conv.bias, stride=2, padding=1)
    return maps.permute(0, 2, 3, 1).reshape(batch, -1, 4 * width)


@pytest.mark.parametrize("image_size", [28, 42])  # trained grid 4, and an interpolated grid 6
def test_tower_matches_plain_reference(image_size: int) -> None:
    tower = _tower()
    pixels = torch.rand(2, 3, image_size, image_size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = tower(pixels * 2 - 1)
        ref = _reference(tower, pixels * 2 - 1)
    grid = math.ceil(math.ceil(image_size // 7 / 2) / 2)
    assert out.shape == (2, grid * grid, 64)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_bf16_tower_keeps_float32_stem() -> None:
    tower = _tower().to(torch.bfloat16)
    tower.conv1.float()
    tower.positional_embedding.data = tower.positional_embedding.data.float()
    reference = _tower()
    pixels = torch.rand(1, 3, 28, 28, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out = tower(pixels)
        full = reference(pixels)
    assert out.dtype == torch.bfloat16
    assert (out.float() - full).abs().max() < 0.05 * full.abs().max()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"image_size": 30}, "not a multiple of patch_size"),
        ({"heads": 3}, "multiple of 4"),
        ({"layers": 0}, "positive integer"),
    ],
)
def test_invalid_sizes(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PeVisionConfig(**{**TINY.__dict__, **fields})
    with pytest.raises(ValueError, match="unknown keys"):
        PeVisionConfig.from_dict({"width": 16, "depth": 2})
