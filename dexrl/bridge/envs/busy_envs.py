"""RLinf's LIBERO vector env with only the busy envs stepped, for ``dexrl eval``.

Design notes: docs/design/evaluation.md#the-end-of-the-queue-and-env-failures.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class BusyEnvs:
    """RLinf's vector env as :class:`dexrl.bridge.envs.libero_env.EpisodeLiberoEnv` (``owner``)
    shows it to RLinf's ``LiberoEnv``: an all-env ``step`` steps the envs ``owner.busy`` marks
    only (the idle ones report their last observation, no reward, no success), and ``seed``
    seeds only the envs ``owner.scene_seeds`` names."""

    def __init__(self, envs: Any, owner: Any) -> None:
        self._envs = envs
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._envs, name)

    def seed(self, base: Any = None) -> None:
        """Seed each env the starting episodes name (RLinf's ``base`` would seed all)."""
        for i, seed in self._owner.scene_seeds.items():
            self._envs.workers[i].seed(seed)

    def step(self, action: np.ndarray, id: Any = None) -> tuple[Any, ...]:  # noqa: A002
        if id is not None:
            return self._envs.step(action, id)
        busy = np.flatnonzero(self._owner.busy)
        obs, reward, done, info = self._envs.step(np.asarray(action)[busy], busy)
        n = self._owner.num_envs
        all_obs = list(self._owner.current_raw_obs or [None] * n)
        all_reward, all_done = np.zeros(n, dtype=reward.dtype), np.zeros(n, dtype=bool)
        all_info = [{**info[0], "env_id": i} for i in range(n)]
        for row, i in enumerate(busy):
            all_obs[i], all_reward[i], all_done[i], all_info[i] = (obs[row], reward[row],
                                                                   done[row], info[row])
        return all_obs, all_reward, all_done, np.array(all_info, dtype=object)
