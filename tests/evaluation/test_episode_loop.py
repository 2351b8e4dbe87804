"""The episode loop on a scripted stand-in env (the real LIBERO env is in test_libero_eval.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch

from dexrl.evaluation.episode_loop import LoopSettings, Timings, run_episodes
from dexrl.evaluation.episodes import plan_episodes
from dexrl.vec_env import ChunkStep, Episode

SIZE = 16


class ScriptedEnv:
    """Parallel envs whose episode (task, trial) succeeds at a scripted step (or never).

    Observations depend only on (task, trial, step), like a simulator started from a fixed
    initial state, so outcomes must not depend on which slot runs an episode. With ``horizon``,
    an env stepped ``horizon`` steps after its last reset raises as robosuite does.
    """

    def __init__(self, num_envs: int, success_at: dict[tuple[int, int], int],
                 horizon: int | None = None) -> None:
        self.num_envs = num_envs
        self.success_at = success_at
        self.horizon = horizon
        self.current: list[Episode | None] = [None] * num_envs
        self.steps = [0] * num_envs
        self.resets: list[tuple[int, Episode]] = []
        self.chunks: list[np.ndarray] = []
        self.busy: list[list[int]] = []
        self.stepped = 0

    def _obs(self) -> dict:
        rows = [(e.task_id, e.trial_id, s) if e else (0, 0, 0)
                for e, s in zip(self.current, self.steps, strict=True)]
        images = np.stack([np.full((SIZE, SIZE, 3), (7 * t + 3 * k + s) % 256, np.uint8)
                           for t, k, s in rows])
        states = np.array([[t, k, s, 0, 0, 0, 0.04, -0.04] for t, k, s in rows], np.float32)
        return {"main_images": torch.from_numpy(images), "wrist_images": torch.from_numpy(images),
                "states": torch.from_numpy(states),
                "task_descriptions": [f"task {t}" for t, _, _ in rows]}

    def reset(self, env_ids: Sequence[int], episodes: Sequence[Episode]) -> dict:
        for i, e in zip(env_ids, episodes, strict=True):
            self.current[i], self.steps[i] = e, 0
            self.resets.append((i, e))
        return self._obs()

    def step_chunk(self, actions: np.ndarray, busy: Sequence[int]) -> ChunkStep:
        self.chunks.append(actions.copy())
        self.busy.append(list(busy))
        observations, successes = [], np.zeros(actions.shape[:2], dtype=bool)
        for k in range(actions.shape[1]):
            for i in busy:
                if self.horizon is not None and self.steps[i] >= self.horizon:
                    raise ValueError("executing action in terminated episode")
                self.steps[i] += 1
                self.stepped += 1
                e = self.current[i]
                successes[i, k] = e is not None and self.success_at.get(e.key) == self.steps[i]
            observations.append(self._obs())
        return ChunkStep(observations, successes)


class StepsEveryEnv(ScriptedEnv):
    """The control: steps idle envs too, as the loop once did."""

    def step_chunk(self, actions: np.ndarray, busy: Sequence[int]) -> ChunkStep:
        return super().step_chunk(actions, range(self.num_envs))


class RowPolicy:
    """Actions computed row by row from the state and the noise (batch-independent)."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def predict(self, env_obs: dict, noise: torch.Tensor, num_steps: int,
                num_action_chunks: int) -> dict:
        self.calls.append({"rows": len(env_obs["states"]), "num_steps": num_steps,
                           "chunk": num_action_chunks})
        states = torch.as_tensor(env_obs["states"])[:, None, :7]
        return {"actions": states + noise[:, :num_action_chunks, :7]}


class Recorder:
    def __init__(self, episode: Episode, log: dict) -> None:
        self.episode, self.log, self.frames = episode, log, 0

    def add(self, main: np.ndarray, wrist: np.ndarray) -> None:
        assert main.shape == wrist.shape == (SIZE, SIZE, 3)
        self.frames += 1

    def finish(self, success: bool) -> str:
        self.log[self.episode.key] = (self.frames, success)
        return f"videos/{self.episode.key}"


SETTINGS = LoopSettings(num_steps=3, action_chunk=4, max_episode_steps=10, noise_shape=(6, 32))
SUCCESS_AT = {(0, 0): 3, (0, 1): 10, (0, 2): 11, (1, 0): 1, (1, 2): 8}


def run(num_envs: int, episodes: list[Episode], **kwargs: object) -> tuple[list, ScriptedEnv]:
    env = ScriptedEnv(num_envs, SUCCESS_AT)
    return run_episodes(env, RowPolicy(), episodes, SETTINGS, **kwargs), env


def test_outcomes_lengths_and_horizon() -> None:
    plan = plan_episodes([0, 1], 3, {0: 50, 1: 50}, seed=0)
    results, env = run(2, plan)
    outcome = {(r.task_id, r.trial_id): (r.success, r.length) for r in results}
    assert outcome == {
        (0, 0): (True, 3),    # success mid-chunk: the episode ends there
        (0, 1): (True, 10),   # success on the last step of the horizon counts
        (0, 2): (False, 10),  # success at step 11 comes after the horizon (inside the chunk)
        (1, 0): (True, 1),
        (1, 1): (False, 10),
        (1, 2): (True, 8),
    }
    assert [r.key for r in plan] == [(r.task_id, r.trial_id) for r in results]
    assert sorted(e.key for _, e in env.resets) == sorted(e.key for e in plan)  # each once


def test_outcomes_and_actions_do_not_depend_on_the_number_of_envs() -> None:
    plan = plan_episodes([0, 1], 3, {0: 50, 1: 50}, seed=3)
    runs = [run(n, plan)[0] for n in (1, 2, 4)]
    signature = [[(r.success, r.length, r.actions_sha256) for r in rs] for rs in runs]
    assert signature[0] == signature[1] == signature[2]
    assert len({r.actions_sha256 for r in runs[0]}) == len(plan)


def test_the_seed_changes_the_actions_not_the_schedule() -> None:
    a, _ = run(2, plan_episodes([0], 2, {0: 50}, seed=0))
    b, _ = run(2, plan_episodes([0], 2, {0: 50}, seed=1))
    assert [r.actions_sha256 for r in a] != [r.actions_sha256 for r in b]


def test_idle_envs_are_not_stepped_and_policy_sees_busy_rows_only() -> None:
    env = ScriptedEnv(3, SUCCESS_AT)
    policy = RowPolicy()
    run_episodes(env, policy, plan_episodes([1], 1, {1: 50}, seed=0), SETTINGS)
    assert [c["rows"] for c in policy.calls] == [1]
    assert policy.calls[0]["num_steps"] == 3 and policy.calls[0]["chunk"] == 4
    assert env.busy == [[0]] and env.steps == [4, 0, 0]


def test_no_env_is_stepped_past_the_simulator_horizon_at_the_end_of_the_queue() -> None:
    # Each episode fails at 10 steps, taking 3 chunks (12 steps) in an env whose simulator ends
    # 12 steps after a reset. Env 1 has nothing to do while env 0 runs the third episode.
    plan = plan_episodes([1], 3, {1: 50}, seed=0)[1:] + plan_episodes([2], 1, {2: 50}, seed=0)
    env = ScriptedEnv(2, {}, horizon=12)
    results = run_episodes(env, RowPolicy(), plan, SETTINGS)
    assert [(r.success, r.length) for r in results] == [(False, 10)] * 3
    assert env.busy[-3:] == [[0]] * 3 and env.steps == [12, 12]
    with pytest.raises(ValueError, match="terminated episode"):  # the control: idle envs stepped
        run_episodes(StepsEveryEnv(2, {}, horizon=12), RowPolicy(), plan, SETTINGS)


def test_a_task_sequence_runs_in_order_in_one_env() -> None:
    plan = plan_episodes([0, 1, 2], 3, {0: 50, 1: 50, 2: 50}, seed=0, task_scene_seed=7)
    env = ScriptedEnv(2, SUCCESS_AT)
    results = run_episodes(env, RowPolicy(), plan, SETTINGS)
    assert [(r.task_id, r.trial_id) for r in results] == [e.key for e in plan]
    for task in (0, 1, 2):
        mine = [(slot, e.trial_id) for slot, e in env.resets if e.task_id == task]
        assert [k for _, k in mine] == [0, 1, 2] and len({slot for slot, _ in mine}) == 1
        slot = mine[0][0]
        in_slot = [e.key for i, e in env.resets if i == slot]
        first = in_slot.index((task, 0))
        assert in_slot[first:first + 3] == [(task, 0), (task, 1), (task, 2)]  # back to back
    # The same plan with a seed per episode spreads a task's trials over the envs.
    spread = ScriptedEnv(2, SUCCESS_AT)
    run_episodes(spread, RowPolicy(), plan_episodes([0, 1, 2], 3, {0: 50, 1: 50, 2: 50},
                                                    seed=0), SETTINGS)
    assert any(len({i for i, e in spread.resets if e.task_id == t}) > 1 for t in (0, 1, 2))


def test_callbacks_videos_and_timings() -> None:
    plan = plan_episodes([0, 1], 2, {0: 50, 1: 50}, seed=0)
    seen, frames = [], {}
    timings = Timings()
    results, env = run(2, plan, on_episode=seen.append,
                       start_video=lambda e: Recorder(e, frames), timings=timings)
    assert sorted((r.task_id, r.trial_id) for r in seen) == [e.key for e in plan]
    # one frame at reset plus one per step taken
    assert frames == {(r.task_id, r.trial_id): (r.length + 1, r.success) for r in results}
    assert all(r.video == f"videos/{(r.task_id, r.trial_id)}" for r in results)
    assert timings.policy_calls > 0 and timings.env_steps == env.stepped > 0
    assert timings.total_s >= timings.policy_s + timings.env_step_s


def test_real_policy_is_deterministic_on_the_loop(tiny_pi0_dir: Path) -> None:
    from dexrl.checkpoints.policy import load_policy

    policy = load_policy(tiny_pi0_dir)
    settings = LoopSettings(2, 4, 10, (policy.network.config.chunk_size,
                                       policy.network.config.action_dim))
    plan = plan_episodes([0, 1], 2, {0: 50, 1: 50}, seed=0)
    first, second = (run_episodes(ScriptedEnv(2, SUCCESS_AT), policy, plan, settings)
                     for _ in range(2))
    assert [r.actions_sha256 for r in first] == [r.actions_sha256 for r in second]


@pytest.mark.parametrize("num_envs", [1, 5])
def test_empty_and_small_plans(num_envs: int) -> None:
    assert run(num_envs, [])[0] == []
    results, _ = run(num_envs, plan_episodes([1], 1, {1: 50}, seed=0))
    assert [(r.success, r.length) for r in results] == [(True, 1)]
