"""RLinf's ``LiberoEnv`` subclassed for ``dexrl eval``: settle steps as a setting, per-env scene
seeds, and only the busy envs stepped. Imports rlinf (and LIBERO): import it only after
:func:`dexrl.bridge.envs.libero.prepare_process`.

Design notes: docs/design/evaluation.md#the-same-env-as-training.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from rlinf.envs.libero.libero_env import LiberoEnv

from dexrl.bridge.envs.busy_envs import BusyEnvs


class EpisodeLiberoEnv(LiberoEnv):
    """``LiberoEnv`` driven episode by episode.

    RLinf's ``reset`` waits 15 gripper-open steps (hard-coded); the published protocol waits
    ``settle_steps`` (10), so :meth:`start` does RLinf's reconfigure, then its own settle steps.
    RLinf's ``step`` steps every env; here only the envs marked busy are stepped, so an env with
    no episode left never runs into robosuite's horizon ("executing action in terminated
    episode" 1000 steps after its last reset).

    Args:
        cfg: The env config.
        num_envs: Parallel envs.
        settle_steps: Steps of ``[0]*6 + [-1]`` after setting the initial state (not counted
            in the episode).
    """

    def __init__(self, cfg: Any, num_envs: int, settle_steps: int) -> None:
        if settle_steps < 1:
            raise ValueError("settle_steps must be at least 1: the first observation comes "
                             "from the last settle step")
        self.settle_steps = settle_steps
        self.busy = np.ones(num_envs, dtype=bool)  # what an all-env step steps (BusyEnvs)
        self.scene_seeds: Mapping[int, int] = {}  # what the next reset seeds (BusyEnvs)
        super().__init__(cfg, num_envs=num_envs, seed_offset=0, total_num_processes=1,
                         worker_info=None)
        # The first reset would otherwise replace our (task, trial) choice with RLinf's pool.
        self.is_start = False

    def _init_env(self) -> None:
        super()._init_env()
        self.env = BusyEnvs(self.env, self)

    def start(self, env_idx: Sequence[int], reset_state_ids: np.ndarray,
              scene_seeds: Mapping[int, int]) -> dict[str, Any]:
        """Start the named initial states in ``env_idx``; returns every env's observation.

        Args:
            env_idx: The envs to reset.
            reset_state_ids: RLinf's flat initial-state id for each of them.
            scene_seeds: Env id -> seed for ``np.random`` in that env before its reset; an env
                not named keeps its RNG (the next trial of the task it just ran).
        """
        env_idx = np.asarray(env_idx)
        self.scene_seeds = dict(scene_seeds)
        try:
            self._reconfigure(reset_state_ids, env_idx)  # RLinf: rebuild, seed, reset, init state
        finally:
            self.scene_seeds = {}
        settle = np.zeros((len(env_idx), 7))
        if self.cfg.reset_gripper_open:
            settle[:, -1] = -1
        for _ in range(self.settle_steps):
            raw_obs, *_ = self.env.step(settle, env_idx)
        if self.current_raw_obs is None:
            self.current_raw_obs = [None] * self.num_envs
        for row, i in enumerate(env_idx):
            self.current_raw_obs[i] = raw_obs[row]
        self.busy[env_idx] = True
        self._reset_metrics(env_idx)
        return self._wrap_obs(self.current_raw_obs)
