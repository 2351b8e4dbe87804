"""dexrl's built-in tasks in LIBERO's observation format, for learning runs on a CPU: ``reach``
(one fixed target) and ``reach_cued`` (the target named by the instruction and drawn in the main
camera image; its rules are :mod:`dexrl.reach.rules`).

Design notes: docs/design/learning-checks.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from dexrl.reach.rules import BACKGROUND, GRIPPER_RGB, INSTRUCTION, PALETTE, SECTION, CuedTask

TARGET_RGB = (40, 200, 60)
REACH_GRIPPER_RGB = (220, 40, 40)
DISC = 1 / 16  # disc radius as a fraction of the image side
CUE_DISC = 1 / 8  # the cued target is drawn larger than the gripper


class ReachEnv:
    """``num_envs`` reach episodes stepped together (RLinf's env constructor signature).

    Each env moves a point by its actions' first three dims and is rewarded for the distance it
    gains toward its goal, plus a bonus on reaching it; the episode ends (the point freezes) on
    success, or when :meth:`_misses` says so. Envs form groups of the config's ``group_size``
    consecutive envs (RLinf's LIBERO env's layout, GRPO's groups): a group's members start each
    episode at one start, toward one goal (and cue).
    """

    section = "reach"
    axes = np.ones(3)  # which of x, y, z the actions move

    def __init__(self, cfg: Any, num_envs: int, seed_offset: int, total_num_processes: int,
                 worker_info: Any) -> None:
        self.cfg = cfg
        self.num_envs = num_envs
        task = cfg[self.section]
        self.start_low = np.asarray(task.start_low, dtype=np.float64)
        self.start_high = np.asarray(task.start_high, dtype=np.float64)
        self.step_size = float(task.step_size)
        self.success_radius = float(task.success_radius)
        self.success_bonus = float(task.success_bonus)
        self.size = (int(cfg.init_params.camera_heights), int(cfg.init_params.camera_widths))
        self.max_episode_steps = int(cfg.max_episode_steps)
        self.group_size = max(1, int(cfg.get("group_size", 1) or 1))
        self._rng = np.random.default_rng(int(cfg.seed) + seed_offset)
        self.is_start = True
        self.pos = np.zeros((num_envs, 3))
        self.goal = np.zeros((num_envs, 3))
        self.distance = np.zeros(num_envs)
        self.success_once = np.zeros(num_envs, dtype=bool)
        self.ended = np.zeros(num_envs, dtype=bool)
        self.returns = np.zeros(num_envs)
        self.elapsed_steps = np.zeros(num_envs, dtype=np.int32)
        self.success_len = np.zeros(num_envs, dtype=np.int32)

    # RLinf's env interface ----------------------------------------------------------------
    def reset(self, env_idx: Any = None, reset_state_ids: Any = None) -> tuple[dict, dict]:
        """Start new episodes (all envs by default) at random places in the start box, one
        start and goal per group (with groups of one: the draws of one env after another)."""
        idx = np.arange(self.num_envs) if env_idx is None else np.asarray(env_idx)
        self.is_start = False
        groups, member = np.unique(idx // self.group_size, return_inverse=True)
        starts = self._rng.uniform(self.start_low, self.start_high, (len(groups), 3))
        self._place(idx, starts[member], self._draw_goals(len(groups))[member])
        return self._obs(), {}

    def update_reset_state_ids(self) -> None:
        """RLinf calls this after each rollout epoch; every reset draws a fresh start."""

    def chunk_step(self, chunk_actions: Any) -> tuple[list, torch.Tensor, torch.Tensor,
                                                      torch.Tensor, list]:
        """Execute a ``[num_envs, chunk, action_dim]`` chunk, one env step per action."""
        actions = np.asarray(chunk_actions.cpu() if torch.is_tensor(chunk_actions)
                             else chunk_actions, dtype=np.float64)
        obs_list, infos_list, rewards, terminations, truncations = [], [], [], [], []
        for k in range(actions.shape[1]):
            obs, reward, done, truncated, infos = self.step(actions[:, k])
            obs_list.append(obs)
            infos_list.append(infos)
            rewards.append(reward)
            terminations.append(done)
            truncations.append(truncated)
        return (obs_list, torch.stack(rewards, 1), torch.stack(terminations, 1),
                torch.stack(truncations, 1), infos_list)

    def step(self, actions: np.ndarray) -> tuple[dict, torch.Tensor, torch.Tensor,
                                                 torch.Tensor, dict]:
        """One env step for every env: move, reward the distance gained, check the end."""
        active = ~self.ended
        move = self.step_size * np.clip(actions[:, :3], -1.0, 1.0) * self.axes
        self.pos[active] = np.clip(self.pos[active] + move[active], -1.0, 1.0)
        distance = np.linalg.norm(self.pos - self.goal, axis=1)
        reached = active & (distance < self.success_radius)
        missed = active & ~reached & self._misses()
        reward = np.where(active, self.distance - distance, 0.0) + self.success_bonus * reached
        self.distance = distance
        self.elapsed_steps += 1
        self.success_len[reached] = self.elapsed_steps[reached]
        self.success_once |= reached
        self.ended |= reached | missed
        self.returns += reward
        truncated = self.elapsed_steps >= self.max_episode_steps
        length = np.where(self.success_once, self.success_len, self.elapsed_steps)
        episode = {"success_once": self.success_once.copy(), "return": self.returns.copy(),
                   "episode_len": self.elapsed_steps.copy(),
                   "reward": self.returns / np.maximum(length, 1)}
        infos = {"episode": {k: torch.from_numpy(np.asarray(v)) for k, v in episode.items()}}
        return (self._obs(), torch.from_numpy(reward).float(),
                torch.from_numpy(self.ended.copy()), torch.from_numpy(truncated), infos)

    # What dexrl eval drives ---------------------------------------------------------------
    def start(self, idx: Sequence[int], goals: Sequence[int], seeds: Sequence[int]) -> dict:
        """Start envs ``idx`` on goal indices ``goals`` at starts drawn from ``seeds``."""
        starts = np.stack([np.random.default_rng(s).uniform(self.start_low, self.start_high)
                           for s in seeds])
        self.is_start = False
        self._place(np.asarray(idx), starts, np.asarray(goals))
        return self._obs()

    # The task's own parts -----------------------------------------------------------------
    def _place(self, idx: np.ndarray, starts: np.ndarray, goals: np.ndarray) -> None:
        self.pos[idx] = starts
        self._set_goals(idx, goals)
        self.distance[idx] = np.linalg.norm(self.pos[idx] - self.goal[idx], axis=1)
        for array in (self.success_once, self.ended, self.returns, self.elapsed_steps,
                      self.success_len):
            array[idx] = 0

    def _draw_goals(self, count: int) -> np.ndarray:
        return np.zeros(count, dtype=np.int64)

    def _set_goals(self, idx: np.ndarray, goals: np.ndarray) -> None:
        self.goal[idx] = np.asarray(self.cfg.reach.target, dtype=np.float64)

    def _misses(self) -> np.ndarray:
        """Envs whose step ended the episode as a failure (none, in ``reach``)."""
        return np.zeros(self.num_envs, dtype=bool)

    def _obs(self) -> dict[str, Any]:
        states = np.zeros((self.num_envs, 8), dtype=np.float32)
        states[:, :3] = self.pos
        main, wrist = self._images()
        return {"main_images": main, "wrist_images": wrist, "states": torch.from_numpy(states),
                "task_descriptions": self._instructions()}

    def _images(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(main, wrist) frames: the target and the gripper seen from the top and the side."""
        discs = [(self.goal, TARGET_RGB, DISC), (self.pos, REACH_GRIPPER_RGB, DISC)]
        return self._view((0, 1), discs), self._view((0, 2), discs)

    def _instructions(self) -> list[str]:
        return [INSTRUCTION] * self.num_envs

    def _view(self, axes: tuple[int, int], discs: list[tuple[np.ndarray, Any, float]]
              ) -> torch.Tensor:
        """Discs (points [N, 3], RGB per env or one for all, radius as a fraction of the side)
        on a plain background, projected on two axes (+second axis up); later discs cover
        earlier ones."""
        h, w = self.size
        rows = np.arange(h)[None, :, None]
        cols = np.arange(w)[None, None, :]
        frames = np.full((self.num_envs, h, w, 3), BACKGROUND, dtype=np.uint8)
        for points, color, fraction in discs:
            radius = max(h, w) * fraction
            r = (1 - points[:, axes[1]]) / 2 * (h - 1)
            c = (points[:, axes[0]] + 1) / 2 * (w - 1)
            disc = (rows - r[:, None, None]) ** 2 + (cols - c[:, None, None]) ** 2 <= radius ** 2
            rgb = np.broadcast_to(np.asarray(color, dtype=np.uint8), (self.num_envs, 3))
            frames[disc] = np.repeat(rgb, disc.sum(axis=(1, 2)), axis=0)
        return torch.from_numpy(frames)


class CuedReachEnv(ReachEnv):
    """The cued reach task: each episode's goal is one of K targets, named by the instruction
    and drawn in the main camera image; the gripper moves in the targets' plane (z stays put),
    its position is in the state, the goal's is not; entering another target's success ball
    ends the episode as a failure."""

    section = SECTION
    axes = np.array([1.0, 1.0, 0.0])  # the gripper moves in the targets' (table) plane

    def __init__(self, cfg: Any, num_envs: int, seed_offset: int, total_num_processes: int,
                 worker_info: Any) -> None:
        super().__init__(cfg, num_envs, seed_offset, total_num_processes, worker_info)
        self.task = CuedTask.from_config(cfg[SECTION])
        self.targets = np.asarray(self.task.targets, dtype=np.float64)
        self.colors = np.asarray([PALETTE[c] for c in self.task.colors], dtype=np.uint8)
        self.goal_id = np.zeros(num_envs, dtype=np.int64)

    def _draw_goals(self, count: int) -> np.ndarray:
        return self._rng.integers(0, len(self.targets), count)

    def _set_goals(self, idx: np.ndarray, goals: np.ndarray) -> None:
        self.goal_id[idx] = goals
        self.goal[idx] = self.targets[goals]

    def _misses(self) -> np.ndarray:
        near = np.linalg.norm(self.pos[:, None] - self.targets[None], axis=2) < self.success_radius
        near[np.arange(self.num_envs), self.goal_id] = False
        return near.any(axis=1)

    def _images(self) -> tuple[torch.Tensor, torch.Tensor]:
        """From the top: the named target as a disc of its colour on a backdrop tinted with it
        (the cue, unless ablated: a random tiny vision tower barely sees a disc alone), and the
        gripper; from the side: the gripper alone."""
        cue = [(self.goal, self.colors[self.goal_id], CUE_DISC)] if self.task.show_cue else []
        main = self._view((0, 1), [*cue, (self.pos, GRIPPER_RGB, DISC)])
        if self.task.show_cue:  # the backdrop takes the target's colour, half strength
            tint = torch.from_numpy(self.colors[self.goal_id] // 2 + BACKGROUND // 2)
            plain = (main == BACKGROUND).all(-1)
            main[plain] = tint[:, None, None, :].expand_as(main)[plain]
        return main, self._view((0, 2), [(self.pos, GRIPPER_RGB, DISC)])

    def _instructions(self) -> list[str]:
        return [self.task.instruction_for(int(g)) for g in self.goal_id]


# The value of an env config's ``dexrl_env`` key -> the task's env class.
ENVS: dict[str, type[ReachEnv]] = {"reach": ReachEnv, "reach_cued": CuedReachEnv}
