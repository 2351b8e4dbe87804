"""π0's own network facts: Dexbotic parameter names and the state token of the suffix.

What π0 shares with DM0 is in ``tests/models/flow/test_network.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.network_inputs import model_inputs, noisy_actions

from dexrl.models.flow.network import ModelInputs
from dexrl.models.pi0.network import Pi0Network
from dexrl.models.pi0.policy import Pi0Policy


@pytest.fixture(scope="module")
def network(tiny_pi0_dir: Path) -> Pi0Network:
    return Pi0Policy.load_network(tiny_pi0_dir)


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


def test_the_state_token_moves_the_actions(network: Pi0Network) -> None:
    obs = model_inputs(network, first_token=4)
    x_t, t = noisy_actions(network, 3)
    with torch.no_grad():
        base = network(obs, x_t, t).velocity
        other_state = ModelInputs(
            obs.images, obs.image_masks, obs.tokens, obs.token_mask, obs.state + 1.0
        )
        moved = network(other_state, x_t, t).velocity
    assert (moved - base).abs().max() > 1e-3
