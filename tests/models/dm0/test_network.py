"""DM0's own network facts: Dexbotic DM0 parameter names, the causal prefix with unscaled text,
no state input, which weights stay float32 in bf16, and its RMSNorm.

What DM0 shares with π0 is in ``tests/models/flow/test_network.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.network_inputs import TOKENS, model_inputs, noisy_actions

from dexrl.models.dm0.config import ALLOWED_EXTRA_KEYS
from dexrl.models.dm0.network import Dm0Network
from dexrl.models.dm0.policy import Dm0Policy
from dexrl.models.flow.network import ModelInputs


@pytest.fixture(scope="module")
def network(tiny_dm0_dir: Path) -> Dm0Network:
    return Dm0Policy.load_network(tiny_dm0_dir)


def test_parameter_names_follow_the_dexbotic_dm0_layout(network: Dm0Network) -> None:
    keys = set(network.state_dict())
    tower = "model.mm_vision_tower.vision_tower."
    required = {
        "model.llm.embed_tokens.weight",
        "model.llm.layers.1.self_attn.q_proj.weight",
        "model.llm.layers.0.self_attn.q_norm.weight",
        "model.llm.layers.0.self_attn.k_norm.weight",
        "model.llm.layers.0.mlp.gate_proj.weight",
        "model.llm.layers.0.post_attention_layernorm.weight",
        "model.llm.norm.weight",
        "model.action_expert.model.layers.0.input_layernorm.weight",
        "model.action_expert.model.layers.1.self_attn.k_norm.weight",
        "model.action_expert.model.layers.1.self_attn.o_proj.weight",
        "model.action_expert.model.norm.weight",
        tower + "conv1.weight",
        tower + "class_embedding",
        tower + "positional_embedding",
        tower + "ln_pre.weight",
        tower + "transformer.resblocks.1.attn.in_proj_weight",
        tower + "transformer.resblocks.0.ls_2.gamma",
        tower + "vit_downsampler2.bias",
        "model.mm_projector.weight",
        *(
            f"model.{name}.{p}"
            for name in ("action_in_proj", "action_time_mlp_in", "action_time_mlp_out",
                         "action_out_proj")
            for p in ("weight", "bias")
        ),
    }
    assert required <= keys
    assert "model.mm_projector.bias" not in keys  # linear4x without projector_bias
    assert not [k for k in keys if "lm_head" in k or "state_proj" in k or "ln_post" in k]
    assert not [k for k in keys if k.startswith("model.action_expert.model.embed_tokens")]
    top = {".".join(k.split(".")[:2]) for k in keys}
    assert top == {
        "model.llm", "model.action_expert", "model.mm_vision_tower", "model.mm_projector",
        "model.action_in_proj", "model.action_time_mlp_in", "model.action_time_mlp_out",
        "model.action_out_proj",
    }
    assert network.model.mm_projector.weight.shape == (32, 64)  # 4 × PE width -> LLM width
    assert "model.action_expert.lm_head.*" in ALLOWED_EXTRA_KEYS  # in the file, not the network


def test_prefix_is_causal_and_text_is_unscaled(network: Dm0Network) -> None:
    obs = model_inputs(network)
    segment = network.embed_prefix(obs)
    assert segment.ar.all()  # every prefix token opens its own causal block
    text = network.model.llm.embed_tokens(obs.tokens)
    torch.testing.assert_close(segment.embeds[:, -TOKENS:], text, rtol=0, atol=0)
    changed = ModelInputs(obs.images, obs.image_masks, obs.tokens.clone(), obs.token_mask,
                             obs.state)
    changed.tokens[0, 15] = (changed.tokens[0, 15] + 1) % network.config.llm.vocab_size
    with torch.no_grad():
        before = network.encode_prefix(obs)
        after = network.encode_prefix(changed)
    # A later token cannot change earlier keys (it would in π0's bidirectional prefix) ...
    for layer in range(2):
        torch.testing.assert_close(after.keys[layer][:, :, :-1], before.keys[layer][:, :, :-1])
    # ... but it reaches the actions.
    x_t, t = noisy_actions(network, 3)
    with torch.no_grad():
        base = network.denoise_step(before, obs.state, x_t, t).velocity
        moved = network.denoise_step(after, obs.state, x_t, t).velocity
    assert (moved[0] - base[0]).abs().max() > 1e-4
    torch.testing.assert_close(moved[1:], base[1:])


def test_state_is_not_a_model_input(network: Dm0Network) -> None:
    obs = model_inputs(network)
    x_t, t = noisy_actions(network, 3)
    with torch.no_grad():
        base = network(obs, x_t, t).velocity
        obs.state = obs.state + 5.0
        same = network(obs, x_t, t).velocity
    assert torch.equal(base, same)
    assert network.embed_suffix(obs.state, x_t, t).embeds.shape[1] == network.config.chunk_size


def test_bf16_keeps_the_mixed_precision_rule(tiny_dm0_dir: Path) -> None:
    """Which parameters the rule keeps in float32 (that it is
    :meth:`Dm0Policy.keeps_float32`, and the actions, are checked in
    ``tests/models/flow/test_network.py``)."""
    net = Dm0Policy.load_network(tiny_dm0_dir, dtype=torch.bfloat16)
    dtypes = {name: p.dtype for name, p in net.named_parameters()}
    float32 = {name for name, dtype in dtypes.items() if dtype == torch.float32}
    tower = "model.mm_vision_tower.vision_tower."
    assert {tower + "conv1.weight", tower + "positional_embedding",
            "model.llm.layers.0.self_attn.q_norm.weight",
            "model.action_expert.model.layers.1.post_attention_layernorm.weight",
            "model.action_expert.model.norm.weight"} <= float32
    assert dtypes[tower + "class_embedding"] == torch.bfloat16
    assert dtypes["model.llm.layers.0.mlp.up_proj.weight"] == torch.bfloat16


def test_dm0_rms_norm_is_qwen3s_in_fp32_and_rounds_once_in_bf16() -> None:
    """Bit-identical to HF's Qwen3RMSNorm in fp32; in bf16 with DM0's fp32 weight it returns bf16
    (one rounding of the float32 product) where HF's returns float32."""
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

    from dexrl.models.dm0.network import Dm0RMSNorm

    generator = torch.Generator().manual_seed(0)
    hf, ours = Qwen3RMSNorm(24, eps=1e-6), Dm0RMSNorm(24, eps=1e-6)
    weight = torch.randn(24, generator=generator)
    hf.weight.data.copy_(weight)
    ours.weight.data.copy_(weight)
    x = torch.randn(3, 5, 24, generator=generator)
    assert torch.equal(ours(x), hf(x))
    half = x.to(torch.bfloat16)
    assert hf(half).dtype == torch.float32 and ours(half).dtype == torch.bfloat16
    exact = (weight * (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6)))
    ours_err = (ours(half).double() - exact).abs().mean()
    hf_err = (hf(half).to(torch.bfloat16).double() - exact).abs().mean()
    assert ours_err <= hf_err


def test_dm0_towers_use_the_lean_norms(tiny_dm0_dir: Path) -> None:
    from dexrl.models.dm0.network import Dm0RMSNorm

    network = Dm0Policy.load_network(tiny_dm0_dir, dtype=torch.bfloat16)
    names = {type(m).__name__ for m in network.model.llm.modules()}
    assert "Qwen3RMSNorm" not in names and "Dm0RMSNorm" in names
    norm = network.model.action_expert.model.layers[0].self_attn.q_norm
    assert isinstance(norm, Dm0RMSNorm) and norm.weight.dtype == torch.float32
