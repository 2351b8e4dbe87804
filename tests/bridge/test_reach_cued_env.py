"""The cued reach task alone: cues in the instruction and the main image only, the wrong target
ends an episode, the blind bound holds for blind policies and a cue reader beats it, and its
settings are checked."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from dexrl.config.compose import compose
from dexrl.reach.env import CuedReachEnv
from dexrl.reach.rules import GRIPPER_RGB, PALETTE, CuedTask, check_section


def env_cfg(*overrides: str):  # noqa: ANN201
    return compose("reach_cued_ppo_dexbotic_pi0", list(overrides)).env.train


def make(cfg, num_envs: int = 6) -> CuedReachEnv:  # noqa: ANN001
    return CuedReachEnv(cfg, num_envs=num_envs, seed_offset=0, total_num_processes=1,
                        worker_info=None)


def toward(env: CuedReachEnv, points: np.ndarray) -> np.ndarray:
    direction = points - env.pos
    return np.concatenate([direction / np.abs(direction).max(1, keepdims=True),
                           np.zeros((env.num_envs, 4))], axis=1)


def colors_in(frame: torch.Tensor) -> set[tuple[int, ...]]:
    return {tuple(c) for c in frame.reshape(-1, 3).tolist()}


def test_the_named_target_is_in_the_instruction_and_the_main_image_only() -> None:
    env = make(env_cfg())
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
    env = make(env_cfg("env.train.reach_cued.show_cue=false",
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
    env = make(env_cfg(), num_envs=2)
    env.start([0, 1], [0, 1], [1, 2])
    z = env.pos[:, 2].copy()
    env.step(np.ones((2, 7)))
    assert (env.pos[:, 2] == z).all() and (env.pos[:, :2] != 0).all()


def test_the_named_target_succeeds_and_another_ends_the_episode_as_a_failure() -> None:
    env = make(env_cfg(), num_envs=3)
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


def test_blind_policies_stay_at_the_bound_and_a_cue_reader_beats_it() -> None:
    env = make(env_cfg(), num_envs=3000)
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


def test_the_task_is_read_from_its_config_section() -> None:
    section = OmegaConf.to_container(env_cfg().reach_cued)
    task = CuedTask.from_config(section)
    assert len(task.targets) == 3 and task.colors == ("red", "green", "blue")
    assert task.instruction_for(2) == "reach the blue target"


GOOD = OmegaConf.to_container(compose("reach_cued_ppo_dexbotic_pi0").env.train.reach_cued)


@pytest.mark.parametrize(("change", "size", "where", "words"), [
    ({"targets": [[0.5, 0, 0]], "colors": ["red"]}, (64, 64), "targets", "at least 2"),
    ({"colors": ["red", "green"]}, (64, 64), "colors", "2 colour(s) for 3 targets"),
    ({"colors": ["red", "red", "blue"]}, (64, 64), "colors", "repeated"),
    ({}, (8, 64), "init_params", "too small to draw the cue"),
    ({"instruction": "reach the target"}, (64, 64), "instruction", "does not name"),
    ({"success_radius": 0.5}, (64, 64), "success_radius", "overlap"),
    ({"targets": [[0.2, 0, 0], [-0.5, 0, 0], [0, 0.6, 0]]}, (64, 64), "success_radius",
     "start box"),
])
def test_bad_settings_are_named(change: dict, size: tuple, where: str, words: str) -> None:
    findings = check_section({**GOOD, **change}, size, "env.train.reach_cued")
    assert findings and all(f.level == "error" for f in findings)
    assert any(f.where.endswith(where) and words in f.message for f in findings), findings
    assert not check_section(GOOD, (64, 64), "env.train.reach_cued")
