"""Which episodes an evaluation runs: task selection, (task, trial) order and per-episode seeds."""

from __future__ import annotations

import numpy as np

from dexrl.errors import DexrlError
from dexrl.vec_env import Episode


def parse_tasks(spec: str | None, num_tasks: int) -> list[int]:
    """Parse ``--tasks`` (``"0,3-5"``; None or ``"all"`` = every task) into sorted unique ids.

    Raises:
        DexrlError: malformed items, reversed ranges or ids outside ``0..num_tasks-1``.
    """
    if spec is None or spec.strip().lower() in ("", "all"):
        return list(range(num_tasks))
    ids: set[int] = set()
    for item in (part.strip() for part in spec.split(",")):
        low, sep, high = item.partition("-")
        try:
            first, last = int(low), int(high if sep else low)
        except ValueError:
            raise DexrlError(f"'{item}' is not a task id or range", "write ids and ranges like "
                             "0,3-5", where="--tasks", code="eval-tasks-syntax") from None
        if first > last:
            raise DexrlError(f"range '{item}' runs backwards", f"write it as {last}-{first}",
                             where="--tasks", code="eval-tasks-syntax")
        ids.update(range(first, last + 1))
    bad = sorted(i for i in ids if not 0 <= i < num_tasks)
    if bad:
        raise DexrlError(f"task id(s) {', '.join(map(str, bad))} do not exist in this suite",
                         f"the suite has tasks 0-{num_tasks - 1}", where="--tasks",
                         code="eval-task-out-of-range")
    return sorted(ids)


def noise_seed(seed: int, task_id: int, trial_id: int) -> int:
    """A 63-bit seed that depends only on (seed, task, trial), never on scheduling."""
    state = np.random.SeedSequence([seed, task_id, trial_id]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def scene_seed(seed: int, task_id: int, trial_id: int) -> int:
    """A 32-bit seed (what ``np.random.seed`` takes) for the episode's scene."""
    return int(np.random.SeedSequence([seed, task_id, trial_id, 1]).generate_state(1)[0])


def plan_episodes(
    tasks: list[int], episodes_per_task: int, init_states: dict[int, int], seed: int,
    task_scene_seed: int | None = None,
) -> list[Episode]:
    """Episodes in task-major order: trials 0..n-1 of each task.

    Task-major order keeps a parallel env on one task for consecutive episodes, so LIBERO rarely
    has to rebuild its scene. With ``task_scene_seed`` (the standard protocol's 7) the scene RNG
    is seeded with it before trial 0 of each task only, and the later trials continue it in order
    (``Episode.reseed`` False); else each episode has its own scene seed.

    Args:
        tasks: Task ids.
        episodes_per_task: Trials per task (init states 0..n-1).
        init_states: Number of fixed initial states of each task.
        seed: The run's seed.
        task_scene_seed: The scene seed of each task's sequence (None: one per episode).

    Raises:
        DexrlError: more episodes per task than a task has initial states.
    """
    if episodes_per_task < 1:
        raise DexrlError(f"--episodes-per-task is {episodes_per_task}", "use at least 1",
                         where="--episodes-per-task", code="eval-episodes-per-task-invalid")
    short = {t: init_states[t] for t in tasks if init_states[t] < episodes_per_task}
    if short:
        fewest = min(short.values())
        raise DexrlError(f"{episodes_per_task} episodes per task asked, but task(s) "
                         f"{', '.join(map(str, short))} have only {fewest} initial states",
                         f"use --episodes-per-task {fewest} or less (each episode starts from "
                         "its own fixed initial state)", where="--episodes-per-task",
                         code="eval-too-many-episodes")
    if task_scene_seed is not None:
        return [Episode(t, k, noise_seed(seed, t, k), task_scene_seed, reseed=k == 0)
                for t in tasks for k in range(episodes_per_task)]
    return [Episode(t, k, noise_seed(seed, t, k), scene_seed(seed, t, k))
            for t in tasks for k in range(episodes_per_task)]
