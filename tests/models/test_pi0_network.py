"""π0 network: Dexbotic parameter names, cached vs joint passes, masking, sampling loop."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dexrl.models.flow.network import ModelInputs
from dexrl.models.flow.sampling import time_grid
from dexrl.models.pi0.loader import load_pi0_network
from dexrl.models.pi0.network import Pi0Network


@pytest.fixture(scope="module")
def network(tiny_pi0_dir: Path) -> Pi0Network:
    return load_pi0_network(tiny_pi0_dir)


def _observation(net: Pi0Network, batch: int = 3, seed: int = 0) -> ModelInputs:
    """Random inputs with ragged prompts; the third view is the masked zero pad."""
    gen = torch.Generator().manual_seed(seed)
    size = net.config.vision.image_size
    vocab = net.config.llm.vocab_size
    images = torch.rand(batch, 3, 3, size, size, generator=gen) * 2 - 1
    images[:, 2] = 0
    lengths = torch.tensor([16, 5, 9, 12][:batch])
    token_mask = torch.arange(16)[None] < lengths[:, None]
    tokens = torch.randint(4, vocab, (batch, 16), generator=gen) * token_mask
    masks = torch.tensor([True, True, False]).expand(batch, 3)
    state = torch.randn(batch, 32, generator=gen)
    return ModelInputs(images, masks, tokens, token_mask, state)


def _noisy_actions(net: Pi0Network, batch: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x_t = torch.randn(batch, net.config.chunk_size, 32, generator=gen)
    return x_t, torch.rand(batch, generator=gen)


def test_parameter_names_equal_dexbotic_checkpoint_keys(network: Pi0Network) -> None:
    keys = set(network.state_dict())
    required = {
        "model.llm.embed_tokens.weight",
        "model.llm.layers.1.self_attn.q_proj.weight",
        "model.llm.layers.0.mlp.gate_proj.weight",
        "model.llm.layers.0.post_attention_layernorm.weight",
        "model.llm.norm.weight",
        "model.action_expert.layers.0.input_layernorm.weight",
        "model.action_expert.layers.1.self_attn.o_proj.weight",
        "model.action_expert.norm.weight",
        "model.mm_vision_tower.vision_tower.vision_model.embeddings.patch_embedding.weight",
        "model.mm_vision_tower.vision_tower.vision_model.embeddings.position_embedding.weight",
        "model.mm_vision_tower.vision_tower.vision_model.encoder.layers.1.self_attn.out_proj.bias",
        "model.mm_vision_tower.vision_tower.vision_model.encoder.layers.0.mlp.fc2.weight",
        "model.mm_vision_tower.vision_tower.vision_model.post_layernorm.weight",
        "model.mm_projector.0.weight",
        "model.mm_projector.2.bias",
        *(
            f"model.{name}.{p}"
            for name in (
                "state_proj",
                "action_in_proj",
                "action_time_mlp_in",
                "action_time_mlp_out",
                "action_out_proj",
            )
            for p in ("weight", "bias")
        ),
    }
    assert required <= keys
    assert not [
        k
        for k in keys
        if k.startswith("lm_head")
        or ".head." in k
        or k.startswith("model.action_expert.embed_tokens")
    ]
    top = {".".join(k.split(".")[:2]) for k in keys}
    assert top == {
        "model.llm",
        "model.action_expert",
        "model.mm_vision_tower",
        "model.mm_projector",
        "model.state_proj",
        "model.action_in_proj",
        "model.action_time_mlp_in",
        "model.action_time_mlp_out",
        "model.action_out_proj",
    }


def test_loaded_weights_are_the_file_tensors(network: Pi0Network, tiny_pi0_dir: Path) -> None:
    saved = load_file(str(tiny_pi0_dir / "model.safetensors"))
    state = network.state_dict()
    assert set(saved) == set(state)
    assert all(torch.equal(saved[k], state[k]) for k in saved)


def test_fsdp_no_split_module_classes_exist(network: Pi0Network) -> None:
    present = {type(m).__name__ for m in network.modules()}
    assert set(Pi0Network._no_split_modules) <= present


@pytest.mark.parametrize("skip_masked_views", [False, True])
def test_cached_prefix_equals_joint_pass(network: Pi0Network, skip_masked_views: bool) -> None:
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


def test_masked_view_content_does_not_matter(network: Pi0Network) -> None:
    obs = _observation(network)
    x_t, t = _noisy_actions(network, 3)
    other = _observation(network)
    other.images[:, 2] = torch.rand_like(other.images[:, 2])  # garbage in the masked slot
    with torch.no_grad():
        base = network(obs, x_t, t, skip_masked_views=False).velocity
        noisy = network(other, x_t, t, skip_masked_views=False).velocity
        # A view that is used changes the outputs (so the check above can fail).
        other.images[:, 1] = torch.rand_like(other.images[:, 1])
        changed = network(other, x_t, t, skip_masked_views=False).velocity
    torch.testing.assert_close(noisy, base, rtol=1e-6, atol=1e-6)
    assert (changed - base).abs().amax(dim=(1, 2)).min() > 1e-3


def test_view_masked_in_one_sample_only(network: Pi0Network) -> None:
    obs = _observation(network)
    obs.image_masks = torch.tensor([[True, False, False], [True, True, False], [True, True, False]])
    x_t, t = _noisy_actions(network, 3)
    with torch.no_grad():
        base = network(obs, x_t, t).velocity
        obs.images[:, 1] = torch.rand_like(obs.images[:, 1])
        changed = network(obs, x_t, t).velocity
    torch.testing.assert_close(changed[0], base[0], rtol=1e-6, atol=1e-6)
    assert (changed[1:] - base[1:]).abs().amax(dim=(1, 2)).min() > 1e-3


def test_suffix_state_token_and_prompt_padding_matter_as_specified(network: Pi0Network) -> None:
    obs = _observation(network)
    x_t, t = _noisy_actions(network, 3)
    with torch.no_grad():
        base = network(obs, x_t, t).velocity
        padded = ModelInputs(
            obs.images, obs.image_masks, obs.tokens.clone(), obs.token_mask, obs.state
        )
        padded.tokens[~obs.token_mask] = 7  # content under the padding mask is ignored
        ignored = network(padded, x_t, t).velocity
        other_state = ModelInputs(
            obs.images, obs.image_masks, obs.tokens, obs.token_mask, obs.state + 1.0
        )
        moved = network(other_state, x_t, t).velocity
    torch.testing.assert_close(ignored, base, rtol=1e-6, atol=1e-6)
    assert (moved - base).abs().max() > 1e-3


def test_sample_actions_is_euler_on_the_joint_pass(network: Pi0Network) -> None:
    obs = _observation(network, batch=2)
    gen = torch.Generator().manual_seed(3)
    noise = torch.randn(2, network.config.chunk_size, 32, generator=gen)
    steps = 4
    with torch.no_grad():
        sampled = network.sample_actions(obs, noise, num_steps=steps)
        x = noise.clone()
        dt = torch.tensor(-1.0 / steps)
        for t in time_grid(steps)[:steps]:
            x = x + network(obs, x, t.expand(2)).velocity * dt
    assert sampled.dtype == torch.float32
    torch.testing.assert_close(sampled, x, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(sampled, noise)


def test_bf16_network_runs(tiny_pi0_dir: Path) -> None:
    net = load_pi0_network(tiny_pi0_dir, dtype=torch.bfloat16)
    assert {p.dtype for p in net.parameters()} == {torch.bfloat16}
    rope = net.model.llm.rotary_emb.inv_freq
    assert rope.dtype == torch.float32  # RoPE frequencies stay exact
    obs = _observation(net, batch=2)
    out = net.sample_actions(obs, torch.zeros(2, net.config.chunk_size, 32), num_steps=2)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
