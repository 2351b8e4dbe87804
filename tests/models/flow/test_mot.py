"""The shared-attention layer loop (:mod:`dexrl.models.flow.mot`) against transformers' own decoder
forward and hand masks; its ``sdpa`` implementation (a GPU speed lever, off by default) against
the eager reference on the tiny π0 and DM0: equal to float noise in fp32 on the CPU, bf16 on CUDA
under the ``gpu`` marker."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import CONFIG_MAPPING, GemmaModel, Qwen3Model

from dexrl.checkpoints.policy import load_policy
from dexrl.models.flow.mot import Segment, make_attn_mask, positions, run_towers

MODELS = {"gemma": GemmaModel, "qwen3": Qwen3Model}
TINY = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    rope_theta=1e4,
)


def _tower(kind: str, seed: int, **overrides) -> torch.nn.Module:
    config = CONFIG_MAPPING[kind](**{**TINY, **overrides})
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = MODELS[kind](config).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # non-trivial norms (HF initializes Gemma's at 0 and Qwen3's at 1)
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) / param.shape[-1] ** 0.5)
    return model


def _inputs(batch: int, length: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    embeds = torch.randn(batch, length, width, generator=gen)
    valid = torch.ones(batch, length, dtype=torch.bool)
    valid[0, -3:] = False  # right padding in one row
    return embeds, valid


@pytest.mark.parametrize("kind", ["gemma", "qwen3"])
def test_single_tower_matches_transformers_forward(kind: str) -> None:
    """One tower with a causal mask equals HF's own model forward (Gemma; Qwen3 has q/k norms)."""
    model = _tower(kind, seed=0)
    embeds, valid = _inputs(2, 10, 32, seed=1)
    pos = positions(valid)
    with torch.no_grad():
        ref = model(
            inputs_embeds=embeds, attention_mask=valid.long(), position_ids=pos, use_cache=False
        ).last_hidden_state
        # HF Gemma scales inputs_embeds by sqrt(width) inside forward; our callers do it first.
        scale = torch.tensor(32**0.5) if kind == "gemma" else torch.tensor(1.0)
        (ours,), cache = run_towers(
            [model],
            model.rotary_emb,
            [Segment(embeds * scale, valid, torch.ones_like(valid))],
            keep_cache=True,
        )
    torch.testing.assert_close(ours[valid], ref[valid], rtol=1e-5, atol=1e-5)
    assert len(cache.keys) == 2 and cache.keys[0].shape == (2, 2, 10, 16)


def test_two_identical_towers_equal_one_tower_on_the_concatenation() -> None:
    """Concatenating per layer and splitting back is invisible when both towers are the same."""
    first, second = _tower("gemma", seed=0), _tower("gemma", seed=0)
    a, valid_a = _inputs(2, 7, 32, seed=2)
    b, valid_b = _inputs(2, 5, 32, seed=3)
    ar_a = torch.zeros_like(valid_a)
    ar_b = torch.zeros_like(valid_b)
    ar_b[:, 0] = True
    with torch.no_grad():
        (out_a, out_b), _ = run_towers(
            [first, second],
            first.rotary_emb,
            [Segment(a, valid_a, ar_a), Segment(b, valid_b, ar_b)],
        )
        (whole,), _ = run_towers(
            [first],
            first.rotary_emb,
            [
                Segment(
                    torch.cat([a, b], 1),
                    torch.cat([valid_a, valid_b], 1),
                    torch.cat([ar_a, ar_b], 1),
                )
            ],
        )
    torch.testing.assert_close(torch.cat([out_a, out_b], 1), whole, rtol=1e-6, atol=1e-6)


def test_cache_then_suffix_equals_joint_for_two_towers() -> None:
    llm, expert = (
        _tower("gemma", seed=0),
        _tower("gemma", seed=4, hidden_size=24, intermediate_size=40),
    )
    prefix, valid_p = _inputs(2, 9, 32, seed=5)
    suffix, valid_s = _inputs(2, 4, 24, seed=6)
    ar_p = torch.zeros_like(valid_p)
    ar_s = torch.tensor([[True, True, False, False]] * 2)
    towers = [llm, expert]
    with torch.no_grad():
        (_, joint), _ = run_towers(
            towers, llm.rotary_emb, [Segment(prefix, valid_p, ar_p), Segment(suffix, valid_s, ar_s)]
        )
        _, cache = run_towers(
            towers, llm.rotary_emb, [Segment(prefix, valid_p, ar_p), None], keep_cache=True
        )
        (_, cached), _ = run_towers(
            towers, llm.rotary_emb, [None, Segment(suffix, valid_s, ar_s)], cache=cache
        )
    rows = valid_s  # padded suffix rows attend to nothing; their outputs are meaningless
    torch.testing.assert_close(cached[rows], joint[rows], rtol=1e-5, atol=1e-5)


def test_make_attn_mask_blocks_and_padding() -> None:
    # prefix (2 tokens, bidirectional, the 2nd padded) | state (own block) | 2 actions (one block)
    valid = torch.tensor([[True, False, True, True, True]])
    ar = torch.tensor([[False, False, True, True, False]])
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0],
            [0, 0, 0, 0, 0],
            [1, 0, 1, 0, 0],
            [1, 0, 1, 1, 1],
            [1, 0, 1, 1, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(make_attn_mask(valid, ar)[0], expected)
    assert positions(valid).tolist() == [[0, 0, 1, 2, 3]]


@pytest.mark.parametrize(("heads", "kv_heads"), [(8, 1), (16, 8), (4, 4)])
def test_gqa_attention_equals_repeating_the_kv_heads(heads: int, kv_heads: int) -> None:
    """The shared attention reads each key/value head once; the result is the eager GQA one
    (repeat_interleave of the key/value heads), to float noise in fp32."""
    from dexrl.models.flow.mot import MASK_VALUE, _attention

    generator = torch.Generator().manual_seed(0)
    batch, queries, keys, head_dim = 2, 7, 19, 16
    q = torch.randn(batch, queries, heads, head_dim, generator=generator).transpose(1, 2)
    k = torch.randn(batch, kv_heads, keys, head_dim, generator=generator)
    v = torch.randn(batch, kv_heads, keys, head_dim, generator=generator)
    blocked = torch.rand(batch, 1, queries, keys, generator=generator) < 0.3
    mask = torch.where(blocked, MASK_VALUE, 0.0)
    groups = heads // kv_heads
    scores = q @ k.repeat_interleave(groups, 1).transpose(2, 3) * 0.25 + mask
    expected = (scores.softmax(-1) @ v.repeat_interleave(groups, 1)).transpose(1, 2)
    out = _attention(q, k, v, mask, 0.25)
    torch.testing.assert_close(out, expected.reshape(batch, queries, -1), rtol=0, atol=1e-6)


# The sdpa implementation on the tiny checkpoints.

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _obs(batch: int, size: int) -> dict:
    rng = np.random.default_rng(0)
    return {"main_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "wrist_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "states": rng.normal(size=(batch, 8)),
            "task_descriptions": ["open the top drawer", "turn on the stove"][:batch]}


def _both(path: Path, device: str, dtype: torch.dtype | None) -> tuple[torch.Tensor, ...]:
    """Raw actions of the eager and the sdpa attention on the same inputs and noise."""
    policy = load_policy(path, device=device, dtype=dtype)
    obs = _obs(2, 48)
    chunk = policy.network.config.chunk_size
    noise = torch.randn(2, chunk, 32, generator=torch.Generator().manual_seed(0))
    outputs = []
    for attention in ("eager", "sdpa"):
        policy.network.attention = attention
        outputs.append(policy.predict(obs, noise=noise, num_steps=4)["raw_actions"].float())
    return tuple(outputs)


def test_sdpa_equals_eager_to_float_noise_on_the_cpu(model_dir: Path) -> None:
    eager, sdpa = _both(model_dir, "cpu", None)
    torch.testing.assert_close(sdpa, eager, rtol=0, atol=1e-5)
    assert not torch.equal(eager, torch.zeros_like(eager))


@pytest.mark.gpu
@needs_cuda
def test_sdpa_equals_eager_to_bf16_noise_on_cuda(model_dir: Path) -> None:
    eager, sdpa = _both(model_dir, "cuda", torch.bfloat16)
    torch.testing.assert_close(sdpa, eager, rtol=0, atol=3e-2)
