"""A built-in task's envs (:mod:`dexrl.reach.env`) behind the evaluation loop's ``VecEnv``
interface, with RLinf's action post-processing (what ``dexrl eval`` runs for the built-in
tasks), and what the evaluation asks about such a task (:data:`TASK`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dexrl.bridge.registry import register
from dexrl.config.checks import check_task_env
from dexrl.errors import DexrlError, errors
from dexrl.reach import rules
from dexrl.vec_env import ChunkStep


class TaskVecEnv:
    """A built-in task's envs behind the evaluation loop's ``VecEnv`` interface.

    An episode's ``task_id`` is its goal (the target index; 0 in ``reach``) and its
    ``scene_seed`` draws its start, so an episode looks the same in any slot or batch.

    Args:
        cfg: The task's env config (``dexrl_env`` names the task).
        model_type: The policy's RLinf model type, for RLinf's action post-processing.
        action_chunk: Actions per policy call.
    """

    def __init__(self, cfg: Any, model_type: str, action_chunk: int) -> None:
        from dexrl.bridge.launch.workers import dexrl_env_class
        register()  # prepare_actions looks the model type up in RLinf's registry
        self.num_envs = int(cfg.total_num_envs)
        self._model_type = model_type
        self._chunk = action_chunk
        self._env = dexrl_env_class(str(cfg.dexrl_env))(cfg, self.num_envs, 0, 1, None)

    def reset(self, env_ids: Sequence[int], episodes: Sequence[Any]) -> dict[str, Any]:
        """Start each episode (an :class:`dexrl.vec_env.Episode`) in its env."""
        return self._env.start(env_ids, [e.task_id for e in episodes],
                               [e.scene_seed for e in episodes])

    def step_chunk(self, actions: np.ndarray, busy: Sequence[int]) -> Any:
        """Post-process the actions as RLinf's env worker does, then step every env (a dexrl
        task has no horizon of its own: stepping an idle env only costs its time)."""
        from rlinf.envs.action_utils import prepare_actions

        prepared = prepare_actions(raw_chunk_actions=actions, env_type="libero",
                                   model_type=self._model_type, num_action_chunks=self._chunk,
                                   action_dim=actions.shape[-1])
        observations, _, _, _, infos = self._env.chunk_step(prepared)
        # Success, not the end of the episode: entering the wrong target ends it as a failure.
        successes = np.stack([np.asarray(i["episode"]["success_once"]) for i in infos], axis=1)
        return ChunkStep(list(observations), successes)

    def close(self) -> None:
        """Nothing to release (the envs live in this process)."""



class BuiltinTask:
    """A built-in task as ``dexrl eval`` asks it (:class:`dexrl.vec_env.EvalTask`): its goals come
    from its env config, and each trial draws its own start."""

    def goals(self, suite: str, env_config: Callable[[], Any], episodes_per_task: int
              ) -> tuple[dict[int, str], dict[int, int]]:
        """The goals' instructions once the task's settings (after the overrides) are valid;
        every goal has ``episodes_per_task`` starts."""
        cfg = env_config()
        check_task(cfg, suite)
        languages = rules.languages(suite, cfg)
        return languages, dict.fromkeys(languages, max(episodes_per_task, 1))

    def vec_env(self, cfg: Any, model_type: str, action_chunk: int) -> TaskVecEnv:
        """:class:`TaskVecEnv` over ``cfg``."""
        return TaskVecEnv(cfg, model_type, action_chunk)

    def blind_bound(self, suite: str, cfg: Any) -> float | None:
        """The cued task's bound (:func:`dexrl.reach.rules.blind_bound`)."""
        return rules.blind_bound(suite, cfg)


TASK = BuiltinTask()


def check_task(env_cfg: Any, suite: str) -> None:
    """Raise the first problem of a built-in task's settings (after the eval's overrides)."""
    if suite != rules.SECTION:
        return
    found = errors(check_task_env(env_cfg))
    if found:
        raise DexrlError(found[0].message, found[0].hint, where=found[0].where,
                         code="eval-task-invalid")
