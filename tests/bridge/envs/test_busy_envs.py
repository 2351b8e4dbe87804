"""Only the busy envs are stepped, on a stand-in for RLinf's subprocess vector env."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dexrl.bridge.envs.busy_envs import BusyEnvs


class SubprocEnvs:
    """Stands in for RLinf's subprocess vector env: steps the envs named, records seeds."""

    def __init__(self, n: int) -> None:
        self.stepped: list[list[int]] = []
        self.seeded: dict[int, int] = {}
        self.workers = [SimpleNamespace(seed=lambda s, i=i: self.seeded.__setitem__(i, s))
                        for i in range(n)]
        self.env_num = n

    def step(self, action: np.ndarray, id: list[int] | None = None) -> tuple:  # noqa: A002
        ids = list(range(self.env_num)) if id is None else list(id)
        assert len(action) == len(ids)
        self.stepped.append(ids)
        return (np.array([{"env": i} for i in ids], dtype=object), np.ones(len(ids)),
                np.array([i == 2 for i in ids]), np.array([{"env_id": i} for i in ids]))


def test_an_all_env_step_steps_the_busy_envs_only() -> None:
    inner = SubprocEnvs(3)
    owner = SimpleNamespace(busy=np.array([True, False, True]), num_envs=3, scene_seeds={},
                            current_raw_obs=[{"env": "old0"}, {"env": "old1"}, {"env": "old2"}])
    envs = BusyEnvs(inner, owner)
    obs, reward, done, info = envs.step(np.zeros((3, 7)))
    assert inner.stepped == [[0, 2]]
    assert [o["env"] for o in obs] == [0, "old1", 2]  # the idle env keeps its observation
    assert list(reward) == [1, 0, 1] and list(done) == [False, False, True]
    assert [i["env_id"] for i in info] == [0, 1, 2]
    envs.step(np.zeros((1, 7)), [1])  # a step naming its envs (a reset's settle steps) as is
    assert inner.stepped[-1] == [1]
    owner.scene_seeds = {1: 7}
    envs.seed(0)  # RLinf's one-int seed of every env: only the named env is seeded
    assert inner.seeded == {1: 7}
    assert envs.env_num == 3  # anything else is the vector env's
