"""The flow network (:mod:`dexrl.models.flow.network`) on the tiny π0 and DM0: cached vs joint
passes, masked views, prompt padding, FSDP units, the sampling loop and bf16.

What one model alone does (its parameter names, π0's state token, DM0's causal prefix and mixed
precision) is in ``tests/models/pi0/test_network.py`` and ``tests/models/dm0/test_network.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers.network_inputs import model_inputs, noisy_actions
from safetensors.torch import load_file

from dexrl.models.dm0.policy import Dm0Policy
from dexrl.models.flow.network import ModelInputs
from dexrl.models.flow.sampling import time_grid
from dexrl.models.pi0.policy import Pi0Policy

LOADERS: dict[str, Callable[..., torch.nn.Module]] = {"pi0": Pi0Policy.load_network,
                                                      "dm0": Dm0Policy.load_network}
# π0's prompts leave out Gemma's special ids (below 4); DM0's come from the whole vocabulary.
FIRST_TOKEN = {"pi0": 4, "dm0": 0}
# The least change of the velocity when a used view changes (DM0's tiny PE tower moves it less).
VIEW_EFFECT = {"pi0": 1e-3, "dm0": 1e-4}
# Checkpoint tensors the network does not hold: DM0's unused language-model heads.
EXTRA_TENSORS = {"pi0": set(), "dm0": {"lm_head.weight", "model.action_expert.lm_head.weight"}}
# Parameters kept in float32 when the network is loaded in bf16.
KEEPS_FLOAT32: dict[str, Callable[[str], bool]] = {"pi0": lambda name: False,
                                                   "dm0": Dm0Policy.keeps_float32}


@pytest.fixture(scope="module")
def network(model: str, model_dir: Path) -> torch.nn.Module:
    return LOADERS[model](model_dir)


def _observation(model: str, net: torch.nn.Module, batch: int = 3) -> ModelInputs:
    return model_inputs(net, batch, first_token=FIRST_TOKEN[model])


def test_weights_are_the_file_tensors(model: str, network: torch.nn.Module,
                                      model_dir: Path) -> None:
    saved = load_file(str(model_dir / "model.safetensors"))
    state = network.state_dict()
    assert set(saved) - set(state) == EXTRA_TENSORS[model]
    assert set(state) <= set(saved)
    assert all(torch.equal(saved[k], state[k]) for k in state)


def test_fsdp_no_split_module_classes_exist(network: torch.nn.Module) -> None:
    present = {type(m).__name__ for m in network.modules()}
    assert set(type(network)._no_split_modules) <= present


@pytest.mark.parametrize("skip_masked_views", [False, True])
def test_cached_prefix_equals_joint_pass(model: str, network: torch.nn.Module,
                                         skip_masked_views: bool) -> None:
    obs = _observation(model, network)
    x_t, t = noisy_actions(network, 3)
    with torch.no_grad():
        joint = network(obs, x_t, t, skip_masked_views=False)
        cache = network.encode_prefix(obs, skip_masked_views=skip_masked_views)
        cached = network.denoise_step(cache, obs.state, x_t, t)
    assert cached.velocity.shape == (3, network.config.chunk_size, 32)
    assert cached.action_hidden.shape == (3, network.config.chunk_size, 16)
    torch.testing.assert_close(cached.velocity, joint.velocity, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cached.action_hidden, joint.action_hidden, rtol=1e-5, atol=1e-5)


def test_masked_view_content_does_not_matter(model: str, network: torch.nn.Module) -> None:
    obs = _observation(model, network)
    x_t, t = noisy_actions(network, 3)
    other = _observation(model, network)
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
    assert (changed - base).abs().amax(dim=(1, 2)).min() > VIEW_EFFECT[model]


def test_view_masked_in_one_sample_only(model: str, network: torch.nn.Module) -> None:
    obs = _observation(model, network)
    obs.image_masks = torch.tensor([[True, False, False], [True, True, False], [True, True, False]])
    x_t, t = noisy_actions(network, 3)
    with torch.no_grad():
        base = network(obs, x_t, t).velocity
        obs.images[:, 1] = torch.rand_like(obs.images[:, 1])
        changed = network(obs, x_t, t).velocity
    torch.testing.assert_close(changed[0], base[0], rtol=1e-6, atol=1e-6)
    assert (changed[1:] - base[1:]).abs().amax(dim=(1, 2)).min() > VIEW_EFFECT[model]


def test_prompt_padding_content_is_ignored(model: str, network: torch.nn.Module) -> None:
    obs = _observation(model, network)
    x_t, t = noisy_actions(network, 3)
    padded = ModelInputs(obs.images, obs.image_masks, obs.tokens.clone(), obs.token_mask,
                         obs.state)
    padded.tokens[~obs.token_mask] = 7  # content under the padding mask is ignored
    with torch.no_grad():
        torch.testing.assert_close(network(padded, x_t, t).velocity,
                                   network(obs, x_t, t).velocity, rtol=1e-6, atol=1e-6)


def test_sample_actions_is_euler_on_the_joint_pass(model: str, network: torch.nn.Module) -> None:
    obs = _observation(model, network, batch=2)
    gen = torch.Generator().manual_seed(3)
    noise = torch.randn(2, network.config.chunk_size, 32, generator=gen)
    steps = 4
    with torch.no_grad():
        sampled = network.sample_actions(obs, noise, num_steps=steps)
        again = network.sample_actions(obs, noise, num_steps=steps)
        x = noise.clone()
        dt = torch.tensor(-1.0 / steps)
        for t in time_grid(steps)[:steps]:
            x = x + network(obs, x, t.expand(2)).velocity * dt
    assert sampled.dtype == torch.float32
    assert torch.equal(sampled, again)
    torch.testing.assert_close(sampled, x, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(sampled, noise)


def test_bf16_network_keeps_its_float32_parameters_and_samples_close(
    model: str, model_dir: Path, network: torch.nn.Module
) -> None:
    """bf16 weights but the model's float32 ones (none for π0; DM0's rule), exact RoPE
    frequencies, and float32 actions close to the fp32 network's."""
    net = LOADERS[model](model_dir, dtype=torch.bfloat16)
    keeps = KEEPS_FLOAT32[model]
    dtypes = {name: p.dtype for name, p in net.named_parameters()}
    assert {name for name, dtype in dtypes.items() if dtype == torch.float32} == {
        name for name in dtypes if keeps(name)}
    assert {dtype for name, dtype in dtypes.items() if not keeps(name)} == {torch.bfloat16}
    assert net.model.llm.rotary_emb.inv_freq.dtype == torch.float32  # RoPE stays exact
    obs = _observation(model, net, batch=2)
    noise = torch.zeros(2, net.config.chunk_size, 32)
    low = net.sample_actions(obs, noise, num_steps=2)
    full = network.sample_actions(obs, noise, num_steps=2)
    assert low.dtype == torch.float32 and torch.isfinite(low).all()
    assert (low - full).abs().max() < 0.1 * full.abs().max()
