"""A small built-in task in LIBERO's observation format, for learning runs on a CPU.

Design notes: docs/design/learning-checks.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

INSTRUCTION = "move the gripper to the green target"
TARGET_RGB = (40, 200, 60)
GRIPPER_RGB = (220, 40, 40)
BACKGROUND = 96


class ReachEnv:
    """``num_envs`` reach episodes stepped together (RLinf's env constructor signature)."""

    def __init__(self, cfg: Any, num_envs: int, seed_offset: int, total_num_processes: int,
                 worker_info: Any) -> None:
        self.cfg = cfg
        self.num_envs = num_envs
        task = cfg.reach
        self.target = np.asarray(task.target, dtype=np.float64)
        self.start_low = np.asarray(task.start_low, dtype=np.float64)
        self.start_high = np.asarray(task.start_high, dtype=np.float64)
        self.step_size = float(task.step_size)
        self.success_radius = float(task.success_radius)
        self.success_bonus = float(task.success_bonus)
        self.size = (int(cfg.init_params.camera_heights), int(cfg.init_params.camera_widths))
        self.max_episode_steps = int(cfg.max_episode_steps)
        self._rng = np.random.default_rng(int(cfg.seed) + seed_offset)
        self.is_start = True
        self.pos = np.zeros((num_envs, 3))
        self.distance = np.zeros(num_envs)
        self.success_once = np.zeros(num_envs, dtype=bool)
        self.returns = np.zeros(num_envs)
        self.elapsed_steps = np.zeros(num_envs, dtype=np.int32)
        self.success_len = np.zeros(num_envs, dtype=np.int32)

    # RLinf's env interface ----------------------------------------------------------------
    def reset(self, env_idx: Any = None, reset_state_ids: Any = None) -> tuple[dict, dict]:
        """Start new episodes (all envs by default) at random places in the start box."""
        idx = np.arange(self.num_envs) if env_idx is None else np.asarray(env_idx)
        self.is_start = False
        self.pos[idx] = self._rng.uniform(self.start_low, self.start_high, (len(idx), 3))
        self.distance[idx] = self._distance()[idx]
        for array in (self.success_once, self.returns, self.elapsed_steps, self.success_len):
            array[idx] = 0
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
        """One env step for every env: move, reward the distance gained, check success."""
        active = ~self.success_once
        move = self.step_size * np.clip(actions[:, :3], -1.0, 1.0)
        self.pos[active] = np.clip(self.pos[active] + move[active], -1.0, 1.0)
        distance = self._distance()
        reached = active & (distance < self.success_radius)
        reward = np.where(active, self.distance - distance, 0.0) + self.success_bonus * reached
        self.distance = distance
        self.elapsed_steps += 1
        self.success_len[reached] = self.elapsed_steps[reached]
        self.success_once |= reached
        self.returns += reward
        truncated = self.elapsed_steps >= self.max_episode_steps
        length = np.where(self.success_once, self.success_len, self.elapsed_steps)
        episode = {"success_once": self.success_once.copy(), "return": self.returns.copy(),
                   "episode_len": self.elapsed_steps.copy(),
                   "reward": self.returns / np.maximum(length, 1)}
        infos = {"episode": {k: torch.from_numpy(np.asarray(v)) for k, v in episode.items()}}
        return (self._obs(), torch.from_numpy(reward).float(),
                torch.from_numpy(self.success_once.copy()), torch.from_numpy(truncated), infos)

    # Observations -------------------------------------------------------------------------
    def _distance(self) -> np.ndarray:
        return np.linalg.norm(self.pos - self.target, axis=1)

    def _obs(self) -> dict[str, Any]:
        states = np.zeros((self.num_envs, 8), dtype=np.float32)
        states[:, :3] = self.pos
        return {
            "main_images": self._view(axes=(0, 1)),
            "wrist_images": self._view(axes=(0, 2)),
            "states": torch.from_numpy(states),
            "task_descriptions": [INSTRUCTION] * self.num_envs,
        }

    def _view(self, axes: tuple[int, int]) -> torch.Tensor:
        """Target and gripper as discs on a plain background, projected on two axes."""
        h, w = self.size
        rows = np.arange(h)[None, :, None]
        cols = np.arange(w)[None, None, :]
        frames = np.full((self.num_envs, h, w, 3), BACKGROUND, dtype=np.uint8)
        radius = max(h, w) / 16
        for points, color in ((np.broadcast_to(self.target, self.pos.shape), TARGET_RGB),
                              (self.pos, GRIPPER_RGB)):
            r = (1 - points[:, axes[1]]) / 2 * (h - 1)  # +y / +z up
            c = (points[:, axes[0]] + 1) / 2 * (w - 1)
            disc = (rows - r[:, None, None]) ** 2 + (cols - c[:, None, None]) ** 2 <= radius ** 2
            frames[disc] = color
        return torch.from_numpy(frames)
