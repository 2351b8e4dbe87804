"""The reach tasks alone (:mod:`dexrl.reach.env`).

Reach: LIBERO observation format, shaped reward, success, episode metrics. Cued reach: cues in the
instruction and the main image only, the wrong target ends an episode, the blind bound holds for
blind policies and a cue reader beats it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dexrl.config.compose import compose
from dexrl.reach.env import INSTRUCTION, TARGET_RGB, CuedReachEnv, ReachEnv
from dexrl.reach.env import REACH_GRIPPER_RGB as REACH_GRIPPER
from dexrl.reach.rules import GRIPPER_RGB, PALETTE


def env_cfg(*overrides: str):  # noqa: ANN201
    return compose("reach_cued_ppo_dexbotic_pi0", list(overrides)).env.train


def make_cued(cfg, num_envs: int = 6) -> CuedReachEnv:  # noqa: ANN001
    return CuedReachEnv(cfg, num_envs=num_envs, seed_offset=0, total_num_processes=1,
                        worker_info=None)


def toward(env: ReachEnv, points: np.ndarray) -> np.ndarray:
    """Full-speed actions from the gripper toward ``points`` (one per env)."""
    direction = points - env.pos
    return np.concatenate([direction / np.abs(direction).max(1, keepdims=True),
                           np.zeros((env.num_envs, 4))], axis=1)


def colors_in(frame: torch.Tensor) -> set[tuple[int, ...]]:
    return {tuple(c) for c in frame.reshape(-1, 3).tolist()}


# The reach task.


@pytest.fixture(scope="module")
def cfg():  # noqa: ANN201
    return compose("reach_ppo_dexbotic_pi0").env.train


def make_reach(cfg, num_envs: int = 4) -> ReachEnv:  # noqa: ANN001
    return ReachEnv(cfg, num_envs=num_envs, seed_offset=0, total_num_processes=1, worker_info=None)


def test_observations_are_in_libero_format(cfg) -> None:  # noqa: ANN001
    obs, infos = make_reach(cfg).reset()
    assert infos == {}
    for key in ("main_images", "wrist_images"):
        assert obs[key].shape == (4, 64, 64, 3) and obs[key].dtype == torch.uint8
        colors = {tuple(c) for c in obs[key].reshape(-1, 3).tolist()}
        assert TARGET_RGB in colors and REACH_GRIPPER in colors
    assert obs["states"].shape == (4, 8) and obs["states"].dtype == torch.float32
    assert obs["task_descriptions"] == [INSTRUCTION] * 4


def test_reward_is_the_distance_gained_and_success_ends_the_episode(cfg) -> None:  # noqa: ANN001
    env = make_reach(cfg)
    env.reset()
    before = env.distance.copy()
    _, reward, done, truncated, _ = env.step(toward(env, env.goal))
    gained = before - env.distance
    assert (gained > 0).all()
    np.testing.assert_allclose(reward.numpy(), gained + cfg.reach.success_bonus * done.numpy(),
                               rtol=1e-6)
    for _ in range(20):
        if env.success_once.all():
            break
        env.step(toward(env, env.goal))
    assert env.success_once.all() and (env.distance < cfg.reach.success_radius).all()
    frozen = env.pos.copy()
    _, reward, done, _, infos = env.step(-toward(env, env.goal))
    assert (env.pos == frozen).all() and (reward == 0).all() and done.all()
    assert torch.equal(infos["episode"]["success_once"], torch.ones(4, dtype=torch.bool))


def test_chunk_step_stacks_steps_and_truncates_at_the_horizon(cfg) -> None:  # noqa: ANN001
    env = make_reach(cfg, num_envs=2)
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
    env = make_reach(cfg, num_envs=64)
    env.reset()
    first = env.pos.copy()
    env.reset()
    assert not np.allclose(first, env.pos)
    assert (env.pos >= cfg.reach.start_low).all() and (env.pos <= cfg.reach.start_high).all()


# The cued reach task.


def test_the_named_target_is_in_the_instruction_and_the_main_image_only() -> None:
    env = make_cued(env_cfg())
    obs = env.start([0, 1, 2, 3, 4, 5], [0, 1, 2, 0, 1, 2], [7, 8, 9, 10, 11, 12])
    names = env.task.colors
    for i, goal in enumerate([0, 1, 2, 0, 1, 2]):
        assert obs["task_descriptions"][i] == f"reach the {names[goal]} target"
        main, wrist = colors_in(obs["main_images"][i]), colors_in(obs["wrist_images"][i])
        cues = {PALETTE[c] for c in names}
        assert main & cues == {PALETTE[names[goal]]} and GRIPPER_RGB in main
        assert not wrist & cues and GRIPPER_RGB in wrist
    tints = {tuple(int(v) for v in np.asarray(PALETTE[c]) // 2 + 96 // 2) for c in names}
    backdrop = {tuple(f[0, 0].tolist()) for f in obs["main_images"]}
    assert backdrop <= tints and len(backdrop) == 3  # the backdrop takes the target's tint
    state = obs["states"].numpy()
    np.testing.assert_allclose(state[:, :3], env.pos, rtol=1e-6)
    assert not state[:, 3:].any()  # the target's position is nowhere in the state


def test_the_ablation_removes_both_cues() -> None:
    env = make_cued(env_cfg("env.train.reach_cued.show_cue=false",
                       "env.train.reach_cued.fixed_instruction='move the gripper to the target'"))
    obs = env.start(range(6), [0, 1, 2, 0, 1, 2], range(6))
    assert set(obs["task_descriptions"]) == {"move the gripper to the target"}
    cues = {PALETTE[c] for c in env.task.colors}
    assert all(not colors_in(frame) & cues for frame in obs["main_images"])
    assert all(tuple(f[0, 0].tolist()) == (96, 96, 96) for f in obs["main_images"])
    # What the policy sees no longer depends on the target: same start, other target.
    again = env.start(range(6), [1, 2, 0, 1, 2, 0], range(6))
    assert torch.equal(obs["main_images"], again["main_images"])


def test_the_gripper_moves_in_the_targets_plane() -> None:
    env = make_cued(env_cfg(), num_envs=2)
    env.start([0, 1], [0, 1], [1, 2])
    z = env.pos[:, 2].copy()
    env.step(np.ones((2, 7)))
    assert (env.pos[:, 2] == z).all() and (env.pos[:, :2] != 0).all()


def test_the_named_target_succeeds_and_another_ends_the_episode_as_a_failure() -> None:
    env = make_cued(env_cfg(), num_envs=3)
    env.start([0, 1, 2], [0, 1, 2], [1, 2, 3])
    wrong = env.targets[[1, 2, 0]]
    for _ in range(10):
        _, reward, done, _, infos = env.step(toward(env, wrong))
    assert done.all() and not env.success_once.any()
    frozen = env.pos.copy()
    _, reward, _, _, _ = env.step(toward(env, env.goal))
    assert (env.pos == frozen).all() and (reward == 0).all()
    env.start([0, 1, 2], [0, 1, 2], [1, 2, 3])
    for _ in range(10):
        _, reward, done, _, infos = env.step(toward(env, env.goal))
    assert env.success_once.all() and done.all()
    assert infos["episode"]["success_once"].all()


def success_rate(env: CuedReachEnv, act) -> float:  # noqa: ANN001 - obs -> actions
    obs, _ = env.reset()
    for _ in range(env.max_episode_steps):
        obs, *_ = env.step(act(obs))
    return float(env.success_once.mean())


@pytest.mark.slow
def test_blind_policies_stay_at_the_bound_and_a_cue_reader_beats_it() -> None:
    env = make_cued(env_cfg(), num_envs=3000)
    task = env.task
    assert task.blind_bound == pytest.approx(1 / 3)
    rng = np.random.default_rng(0)
    # Blind: straight to target 0 (the best), or a random walk that sees only the state.
    straight = success_rate(env, lambda obs: toward(env, env.targets[[0] * env.num_envs]))
    walk = success_rate(env, lambda obs: rng.uniform(-1, 1, (env.num_envs, 7)))
    colour_of = {c: i for i, c in enumerate(task.colors)}

    def reader(obs: dict) -> np.ndarray:  # reads the colour word of the instruction
        named = [colour_of[text.split()[-2]] for text in obs["task_descriptions"]]
        return toward(env, env.targets[named])

    cued = success_rate(env, reader)
    sd = np.sqrt(task.blind_bound * (1 - task.blind_bound) / env.num_envs)
    assert straight == pytest.approx(task.blind_bound, abs=4 * sd)
    assert walk < task.blind_bound + 4 * sd
    assert cued == 1.0


# Groups (GRPO): the members of a group share start, target and cue, as LIBERO's env's do.


def _episode_key(obs: dict, env: CuedReachEnv, i: int) -> tuple:
    return (tuple(env.pos[i]), int(env.goal_id[i]), obs["task_descriptions"][i],
            obs["main_images"][i].numpy().tobytes())


@pytest.mark.parametrize("group", [1, 2, 4])
def test_the_members_of_a_group_share_start_target_and_cue(group: int) -> None:
    env = make_cued(env_cfg(f"env.train.group_size={group}"), num_envs=16)
    groups = set()
    for _ in range(3):
        obs, _ = env.reset()
        keys = [_episode_key(obs, env, i) for i in range(env.num_envs)]
        for start in range(0, env.num_envs, group):
            assert len(set(keys[start:start + group])) == 1, f"group at env {start} differs"
        groups.update(keys[::group])
    # groups differ from one another: the draws are per group, not one for all
    assert len(groups) == 3 * env.num_envs // group


def test_groups_of_one_keep_the_ungrouped_draws() -> None:
    """group_size 1 draws exactly what an env drew before groups existed: PPO runs and their
    figures are unchanged."""
    env = make_cued(env_cfg(), num_envs=6)
    env.reset()
    rng = np.random.default_rng(0)
    starts = rng.uniform(env.start_low, env.start_high, (6, 3))
    goals = rng.integers(0, len(env.targets), 6)
    np.testing.assert_array_equal(env.pos, starts)
    np.testing.assert_array_equal(env.goal_id, goals)


def test_a_partial_reset_draws_one_state_per_group_it_touches() -> None:
    env = make_cued(env_cfg("env.train.group_size=4"), num_envs=8)
    env.reset()
    before = env.pos.copy()
    obs, _ = env.reset(env_idx=np.array([4, 5, 6, 7]))
    np.testing.assert_array_equal(env.pos[:4], before[:4])
    keys = {_episode_key(obs, env, i) for i in range(4, 8)}
    assert len(keys) == 1
