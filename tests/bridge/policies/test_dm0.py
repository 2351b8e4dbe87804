"""dexrl's RLinf DM0 adapter (:mod:`dexrl.bridge.policies.dm0`): what DM0 changes in the shared
flow adapter (``test_flow.py`` runs its maths on DM0 too) — no state token, the normalization
mode that must be the checkpoint's, and its settings checked where it is built.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dexrl.bridge.policies.chain import RLSettings
from dexrl.bridge.policies.dm0 import Dm0RLPolicy, build
from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError

CHUNK = 8  # chunk_size of the tiny checkpoint
pytestmark = pytest.mark.parametrize("model", ["dm0"], indirect=True)


def test_norm_modes_give_different_actions(model_cfg, make_env_obs) -> None:
    """The configured mode reaches the transforms (the eval test of test_flow.py would pass if
    it did not)."""
    noise = torch.randn(2, CHUNK, 32, generator=torch.Generator().manual_seed(1))
    actions = [build(model_cfg(f"dexbotic.norm_mode={mode}"))
               .predict_action_batch(make_env_obs(2), mode="eval", noise=noise)[0]
               for mode in ("mean_std", "quantile")]
    assert not torch.allclose(actions[0], actions[1])


def test_no_state_projection_to_train(make_policy) -> None:
    names = {n for n, _ in make_policy(train_expert_only=True).named_parameters()}
    assert not any(n.startswith("model.state_proj") for n in names)  # DM0 has no state token


def test_norm_mode_must_match_the_loaded_policy(model_dir: Path) -> None:
    with pytest.raises(DexrlError, match="normalizes with 'mean_std'") as info:
        Dm0RLPolicy(load_policy(model_dir),
                    RLSettings(num_action_chunks=5, norm_mode="quantile"))
    assert info.value.code == "policy-norm-mode-mismatch"
    assert info.value.where == "actor.model.dexbotic.norm_mode"


def test_bad_settings_fail_clearly(model_cfg, tiny_pi0_dir: Path) -> None:
    cases = [
        (("dexbotic.model_max_length=0",), "actor.model.dexbotic.model_max_length"),
        (("dexbotic.model_max_length=long",), "actor.model.dexbotic.model_max_length"),
        (("dexbotic.norm_mode=min_max",), "actor.model.dexbotic.norm_mode"),
        (("num_action_chunks=9",), "actor.model.num_action_chunks"),
        ((f"model_path={tiny_pi0_dir}",), str(tiny_pi0_dir / "config.json")),
    ]
    for overrides, where in cases:
        with pytest.raises(DexrlError) as info:
            build(model_cfg(*overrides))
        assert info.value.where == where
    assert "model_type=dexbotic_pi0" in info.value.hint
