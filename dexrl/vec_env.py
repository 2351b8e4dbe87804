"""The contract between the evaluation loop and its environments: what an env is given
(:class:`Episode`) and returns (:class:`ChunkStep`), the :class:`VecEnv` interface, and the
:class:`EvalTask` that ``dexrl eval`` asks about a suite.

It sits below both sides: :mod:`dexrl.evaluation` plans episodes and drives a ``VecEnv``;
:mod:`dexrl.bridge.envs` implements both, for LIBERO (``libero.py``) and for dexrl's built-in
tasks (``tasks.py``), so the bridge never imports the evaluation package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

Observation = Mapping[str, Any]  # main_images/wrist_images [N, H, W, 3], states, task_descriptions



def take_rows(obs: Observation, rows: Sequence[int]) -> dict[str, Any]:
    """The observations of ``rows``, in that order (repeats allowed): arrays and tensors are
    indexed, lists (``task_descriptions``) picked."""
    picked = list(rows)
    return {key: value[picked] if hasattr(value, "shape") else [value[i] for i in picked]
            for key, value in obs.items()}

@dataclass(frozen=True)
class Episode:
    """One evaluation episode, fixed before anything runs.

    Attributes:
        task_id: Task index within the suite.
        trial_id: Index of LIBERO's fixed initial state for that task (the init-state id).
        noise_seed: Seeds the policy's initial noise for every call of this episode.
        scene_seed: Seeds LIBERO's scene randomness that the initial state does not fix (the
            placement of fixtures such as cabinets and stoves) right before the reset.
        reseed: False: the scene RNG is not seeded at this reset but continues from the
            previous trial of the same task, which the loop runs just before in the same env
            (the published protocol seeds once per task and resets its trials in sequence).
            True: the scene depends on this episode alone, not on which env runs it.
    """

    task_id: int
    trial_id: int
    noise_seed: int
    scene_seed: int
    reseed: bool = True

    @property
    def key(self) -> tuple[int, int]:
        """(task_id, trial_id): what identifies an episode across runs."""
        return self.task_id, self.trial_id


@dataclass
class ChunkStep:
    """What stepping every env through one action chunk returned.

    Attributes:
        observations: One observation batch (all envs) per executed step.
        successes: bool [num_envs, chunk]: the env reported task success at that step.
    """

    observations: list[Observation]
    successes: np.ndarray


class VecEnv(Protocol):
    """Parallel environments the loop can drive."""

    num_envs: int

    def reset(self, env_ids: Sequence[int], episodes: Sequence[Episode]) -> Observation:
        """Start ``episodes[j]`` in env ``env_ids[j]``; return the observation of every env."""
        ...

    def step_chunk(self, actions: np.ndarray, busy: Sequence[int]) -> ChunkStep:
        """Execute float32 [num_envs, chunk, action_dim] actions in the ``busy`` envs; the others
        are not stepped (an idle LIBERO env stepped on would pass robosuite's horizon) and
        report the observation they last had and no success."""
        ...


class EvalTask(Protocol):
    """What ``dexrl eval`` asks about a suite's tasks (a suite names its own:
    :attr:`dexrl.specs.Suite.eval_task`), so the evaluation never asks which kind it is."""

    def goals(self, suite: str, env_config: Callable[[], Any], episodes_per_task: int
              ) -> tuple[dict[int, str], dict[int, int]]:
        """Check that ``suite`` can run here, then return (task id -> instruction, task id ->
        number of fixed initial states).

        ``env_config()`` builds the env config with the user's overrides (raising on a bad one);
        a suite whose tasks depend on it calls it, so its errors come first only there.
        """
        ...

    def vec_env(self, cfg: Any, model_type: str, action_chunk: int) -> VecEnv:
        """The envs of an evaluation with env config ``cfg`` (started, ready to reset)."""
        ...

    def blind_bound(self, suite: str, cfg: Any) -> float | None:
        """The success rate no policy blind to the task's cue beats (None: no such bound)."""
        ...
