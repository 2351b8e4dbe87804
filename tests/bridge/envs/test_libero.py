"""RLinf's LIBERO env driven episode by episode (real envs in subprocesses; slow)."""

from __future__ import annotations

import pytest
import torch

from dexrl.hub.libero_assets import is_asset_tree, libero_assets_dir
from dexrl.vec_env import Episode

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not is_asset_tree(libero_assets_dir()),
                       reason="LIBERO scene assets are not installed (`make install`)"),
]


def test_resets_start_the_named_task_and_initial_state(tiny_pi0_dir) -> None:  # noqa: ANN001
    from dexrl.bridge.envs.libero import LiberoVecEnv, suite_info
    from dexrl.checkpoints.sources import resolve_checkpoint
    from dexrl.evaluation.request import EvalRequest
    from dexrl.evaluation.settings import env_config, resolve_settings

    info = suite_info("libero_spatial")
    assert len(info.languages) == 10 and set(info.init_states.values()) == {50}
    source = resolve_checkpoint(tiny_pi0_dir)
    settings = resolve_settings(source, EvalRequest(
        ckpt=str(tiny_pi0_dir), suite="libero_spatial", episodes_per_task=2, num_envs=2, seed=0,
        num_steps=2, action_chunk=2, max_episode_steps=10, video="none", device="cpu",
        dtype=None, env_overrides=()), [0, 3])
    env = LiberoVecEnv(env_config(settings, source), source.model_type, 2)
    try:
        first = env.reset([0, 1], [Episode(3, 4, 0, 7), Episode(0, 2, 0, 8)])
        assert list(env._env.task_ids) == [3, 0] and list(env._env.trial_ids) == [4, 2]
        assert first["task_descriptions"] == [info.languages[3], info.languages[0]]
        assert first["main_images"].shape == (2, 256, 256, 3)
        assert first["main_images"].dtype == torch.uint8 and first["states"].shape == (2, 8)
        # The same episode in the other slot, reset alone, starts from the same state and frame
        # (RLinf alone would seed that slot differently and move the fixtures).
        again = env.reset([1], [Episode(3, 4, 0, 7)])
        assert torch.equal(again["states"][1], first["states"][0])
        assert torch.equal(again["main_images"][1], first["main_images"][0])
        other_scene = env.reset([1], [Episode(3, 4, 0, 8)])
        assert torch.equal(other_scene["states"][1], first["states"][0])
        assert not torch.equal(other_scene["main_images"][1], first["main_images"][0])
        stepped = env.step_chunk(torch.zeros(2, 2, 7).numpy())
        assert len(stepped.observations) == 2 and stepped.successes.shape == (2, 2)
    finally:
        env.close()
