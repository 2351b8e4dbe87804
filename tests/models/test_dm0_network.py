"""DM0 network: Dexbotic parameter names, causal prefix, cached vs joint pass, masking, sampling."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dexrl.models.dm0.loader import ALLOWED_EXTRA_KEYS, keeps_float32, load_dm0_network
from dexrl.models.dm0.network import Dm0Network
from dexrl.models.dm0.tiny import write_tiny_dm0
from dexrl.models.flow.network import ModelInputs
from dexrl.models.flow.sampling import time_grid

TOKENS = 16


@pytest.fixture(scope="module")
def tiny_dm0_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_dm0(tmp_path_factory.mktemp("tiny_dm0") / "ckpt", seed=0)


@pytest.fixture(scope="module")
def network(tiny_dm0_dir: Path) -> Dm0Network:
    return load_dm0_network(tiny_dm0_dir)


def _observation(net: Dm0Network, batch: int = 3, seed: int = 0) -> ModelInputs:
    """Random inputs with ragged prompts; the third view is the masked zero pad."""
    gen = torch.Generator().manual_seed(seed)
    size = net.config.vision.image_size
    images = torch.rand(batch, 3, 3, size, size, generator=gen) * 2 - 1
    images[:, 2] = 0
    lengths = torch.tensor([16, 5, 9, 12][:batch])
    token_mask = torch.arange(TOKENS)[None] < lengths[:, None]
    tokens = torch.randint(0, net.config.llm.vocab_size, (batch, TOKENS), generator=gen)
    masks = torch.tensor([True, True, False]).expand(batch, 3)
    state = torch.randn(batch, 32, generator=gen)
    return ModelInputs(images, masks, tokens * token_mask, token_mask, state)


def _noisy_actions(net: Dm0Network, batch: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x_t = torch.randn(batch, net.config.chunk_size, 32, generator=gen)
    return x_t, torch.rand(batch, generator=gen)


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


def test_weights_are_the_file_tensors_and_lm_heads_are_the_only_extras(
    network: Dm0Network, tiny_dm0_dir: Path
) -> None:
    saved = load_file(str(tiny_dm0_dir / "model.safetensors"))
    state = network.state_dict()
    assert set(saved) - set(state) == {"lm_head.weight", "model.action_expert.lm_head.weight"}
    assert set(state) <= set(saved)
    assert all(torch.equal(saved[k], state[k]) for k in state)
    assert "model.action_expert.lm_head.*" in ALLOWED_EXTRA_KEYS


def test_fsdp_no_split_module_classes_exist(network: Dm0Network) -> None:
    present = {type(m).__name__ for m in network.modules()}
    assert set(Dm0Network._no_split_modules) <= present


@pytest.mark.parametrize("skip_masked_views", [False, True])
def test_cached_prefix_equals_joint_pass(network: Dm0Network, skip_masked_views: bool) -> None:
    obs = _observation(network)
    x_t, t = _noisy_actions(network, 3)
    with torch.no_grad():
        joint = network(obs, x_t, t, skip_masked_views=False)
        cache = network.encode_prefix(obs, skip_masked_views=skip_masked_views)
        cached = network.denoise_step(cache, obs.state, x_t, t)
    assert cached.velocity.shape == (3, network.config.chunk_size, 32)
    assert cached.action_hidden.shape == (3, network.config.chunk_size, 16)
    torch.testing.assert_close(cached.velocity, joint.velocity, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cached.action_hidden, joint.action_hidden, rtol=1e-5, atol=1e-5)


def test_prefix_is_causal_and_text_is_unscaled(network: Dm0Network) -> None:
    obs = _observation(network)
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
    x_t, t = _noisy_actions(network, 3)
    with torch.no_grad():
        base = network.denoise_step(before, obs.state, x_t, t).velocity
        moved = network.denoise_step(after, obs.state, x_t, t).velocity
    assert (moved[0] - base[0]).abs().max() > 1e-4
    torch.testing.assert_close(moved[1:], base[1:])


def test_state_is_not_a_model_input(network: Dm0Network) -> None:
    obs = _observation(network)
    x_t, t = _noisy_actions(network, 3)
    with torch.no_grad():
        base = network(obs, x_t, t).velocity
        obs.state = obs.state + 5.0
        same = network(obs, x_t, t).velocity
    assert torch.equal(base, same)
    assert network.embed_suffix(obs.state, x_t, t).embeds.shape[1] == network.config.chunk_size


def test_masked_view_content_does_not_matter(network: Dm0Network) -> None:
    obs = _observation(network)
    x_t, t = _noisy_actions(network, 3)
    other = _observation(network)
    other.images[:, 2] = torch.rand_like(other.images[:, 2])  # garbage in the masked slot
    with torch.no_grad():
        base = network(obs, x_t, t, skip_masked_views=False).velocity
        noisy = network(other, x_t, t, skip_masked_views=False).velocity
        skipped = network(other, x_t, t, skip_masked_views=True).velocity
        # A view that is used changes the outputs (so the checks above can fail).
        other.images[:, 1] = torch.rand_like(other.images[:, 1])
        changed = network(other, x_t, t, skip_masked_views=False).velocity
    torch.testing.assert_close(noisy, base, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(skipped, base, rtol=1e-5, atol=1e-6)
    assert (changed - base).abs().amax(dim=(1, 2)).min() > 1e-4


def test_view_masked_in_one_sample_only(network: Dm0Network) -> None:
    obs = _observation(network)
    obs.image_masks = torch.tensor([[True, False, False], [True, True, False], [True, True, False]])
    x_t, t = _noisy_actions(network, 3)
    with torch.no_grad():
        base = network(obs, x_t, t).velocity
        obs.images[:, 1] = torch.rand_like(obs.images[:, 1])
        changed = network(obs, x_t, t).velocity
    torch.testing.assert_close(changed[0], base[0], rtol=1e-6, atol=1e-6)
    assert (changed[1:] - base[1:]).abs().amax(dim=(1, 2)).min() > 1e-4


def test_prompt_padding_content_is_ignored(network: Dm0Network) -> None:
    obs = _observation(network)
    x_t, t = _noisy_actions(network, 3)
    padded = ModelInputs(obs.images, obs.image_masks, obs.tokens.clone(), obs.token_mask,
                            obs.state)
    padded.tokens[~obs.token_mask] = 7
    with torch.no_grad():
        torch.testing.assert_close(network(padded, x_t, t).velocity, network(obs, x_t, t).velocity)


def test_sample_actions_is_euler_on_the_joint_pass(network: Dm0Network) -> None:
    obs = _observation(network, batch=2)
    gen = torch.Generator().manual_seed(3)
    noise = torch.randn(2, network.config.chunk_size, 32, generator=gen)
    steps = 4
    with torch.no_grad():
        sampled = network.sample_actions(obs, noise, num_steps=steps)
        again = network.sample_actions(obs, noise, num_steps=steps)
        x = noise.clone()
        for t in time_grid(steps)[:steps]:
            x = x + network(obs, x, t.expand(2)).velocity * torch.tensor(-1.0 / steps)
    assert sampled.dtype == torch.float32
    assert torch.equal(sampled, again)
    torch.testing.assert_close(sampled, x, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(sampled, noise)


def test_bf16_keeps_the_mixed_precision_rule(tiny_dm0_dir: Path, network: Dm0Network) -> None:
    net = load_dm0_network(tiny_dm0_dir, dtype=torch.bfloat16)
    dtypes = {name: p.dtype for name, p in net.named_parameters()}
    float32 = {name for name, dtype in dtypes.items() if dtype == torch.float32}
    assert float32 == {name for name in dtypes if keeps_float32(name)}
    tower = "model.mm_vision_tower.vision_tower."
    assert {tower + "conv1.weight", tower + "positional_embedding",
            "model.llm.layers.0.self_attn.q_norm.weight",
            "model.action_expert.model.layers.1.post_attention_layernorm.weight",
            "model.action_expert.model.norm.weight"} <= float32
    assert dtypes[tower + "class_embedding"] == torch.bfloat16
    assert dtypes["model.llm.layers.0.mlp.up_proj.weight"] == torch.bfloat16
    assert net.model.llm.rotary_emb.inv_freq.dtype == torch.float32
    obs = _observation(net, batch=2)
    noise = torch.zeros(2, net.config.chunk_size, 32)
    low = net.sample_actions(obs, noise, num_steps=2)
    full = network.sample_actions(obs, noise, num_steps=2)
    assert low.dtype == torch.float32 and torch.isfinite(low).all()
    assert (low - full).abs().max() < 0.1 * full.abs().max()


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


def test_dm0_towers_use_the_lean_norms(tmp_path: Path) -> None:
    from dexrl.models.dm0.network import Dm0RMSNorm

    network = load_dm0_network(write_tiny_dm0(tmp_path / "ckpt"), dtype=torch.bfloat16)
    names = {type(m).__name__ for m in network.model.llm.modules()}
    assert "Qwen3RMSNorm" not in names and "Dm0RMSNorm" in names
    norm = network.model.action_expert.model.layers[0].self_attn.q_norm
    assert isinstance(norm, Dm0RMSNorm) and norm.weight.dtype == torch.float32
