"""The reach task alone: LIBERO observation format, shaped reward, success, episode metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dexrl.config.compose import compose
from dexrl.reach.env import INSTRUCTION, TARGET_RGB, ReachEnv
from dexrl.reach.env import REACH_GRIPPER_RGB as GRIPPER_RGB


@pytest.fixture(scope="module")
def cfg():  # noqa: ANN201
    return compose("reach_ppo_dexbotic_pi0").env.train


def make(cfg, num_envs: int = 4) -> ReachEnv:  # noqa: ANN001
    return ReachEnv(cfg, num_envs=num_envs, seed_offset=0, total_num_processes=1, worker_info=None)


def toward_target(env: ReachEnv) -> np.ndarray:
    direction = env.goal - env.pos
    return np.concatenate([direction / np.abs(direction).max(1, keepdims=True),
                           np.zeros((env.num_envs, 4))], axis=1)


def test_observations_are_in_libero_format(cfg) -> None:  # noqa: ANN001
    obs, infos = make(cfg).reset()
    assert infos == {}
    for key in ("main_images", "wrist_images"):
        assert obs[key].shape == (4, 64, 64, 3) and obs[key].dtype == torch.uint8
        colors = {tuple(c) for c in obs[key].reshape(-1, 3).tolist()}
        assert TARGET_RGB in colors and GRIPPER_RGB in colors
    assert obs["states"].shape == (4, 8) and obs["states"].dtype == torch.float32
    assert obs["task_descriptions"] == [INSTRUCTION] * 4


def test_reward_is_the_distance_gained_and_success_ends_the_episode(cfg) -> None:  # noqa: ANN001
    env = make(cfg)
    env.reset()
    before = env.distance.copy()
    _, reward, done, truncated, _ = env.step(toward_target(env))
    gained = before - env.distance
    assert (gained > 0).all()
    np.testing.assert_allclose(reward.numpy(), gained + cfg.reach.success_bonus * done.numpy(),
                               rtol=1e-6)
    for _ in range(20):
        if env.success_once.all():
            break
        env.step(toward_target(env))
    assert env.success_once.all() and (env.distance < cfg.reach.success_radius).all()
    frozen = env.pos.copy()
    _, reward, done, _, infos = env.step(-toward_target(env))
    assert (env.pos == frozen).all() and (reward == 0).all() and done.all()
    assert torch.equal(infos["episode"]["success_once"], torch.ones(4, dtype=torch.bool))


def test_chunk_step_stacks_steps_and_truncates_at_the_horizon(cfg) -> None:  # noqa: ANN001
    env = make(cfg, num_envs=2)
    env.reset()
    away = torch.zeros(2, 5, 7)
    away[:, :, :3] = torch.tensor([-1.0, 1.0, -1.0])  # away from the target: never succeeds
    obs_list, rewards, terms, truncs, infos = env.chunk_step(away)
    assert len(obs_list) == 5 and rewards.shape == terms.shape == truncs.shape == (2, 5)
    assert (rewards < 0).all() and not terms.any() and not truncs.any()
    _, _, _, truncs, infos = env.chunk_step(away)
    assert truncs[:, -1].all() and not truncs[:, :-1].any()
    np.testing.assert_allclose(infos[-1]["episode"]["return"].numpy(), env.returns)
    assert infos[-1]["episode"]["episode_len"].tolist() == [10, 10]


def test_resets_draw_new_starts_in_the_start_box(cfg) -> None:  # noqa: ANN001
    env = make(cfg, num_envs=64)
    env.reset()
    first = env.pos.copy()
    env.reset()
    assert not np.allclose(first, env.pos)
    assert (env.pos >= cfg.reach.start_low).all() and (env.pos <= cfg.reach.start_high).all()


def test_the_env_worker_builds_dexrl_tasks_by_name() -> None:
    from dexrl.bridge.launch.workers import dexrl_env_class

    assert dexrl_env_class("reach") is ReachEnv
    with pytest.raises(ValueError, match="unknown dexrl_env 'rech'"):
        dexrl_env_class("rech")
