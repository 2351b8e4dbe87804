"""The evaluation episode loop: parallel envs, one policy call per action chunk, fixed episodes.

Design notes: docs/design/evaluation.md.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from dexrl.vec_env import ChunkStep, Episode, Observation, VecEnv, take_rows


class Policy(Protocol):
    """What the loop needs from a policy (:class:`dexrl.models.flow.policy.FlowPolicy`)."""

    def predict(self, env_obs: Observation, noise: torch.Tensor | None = None, num_steps: int = 10,
                num_action_chunks: int | None = None) -> dict[str, torch.Tensor]: ...


@dataclass(frozen=True)
class LoopSettings:
    """How the loop calls the policy and when episodes end.

    Attributes:
        num_steps: Denoising steps per policy call.
        action_chunk: Actions executed per policy call.
        max_episode_steps: Env steps after which an episode is truncated (a failure).
        noise_shape: (chunk_size, action_dim) of the policy's initial noise.
    """

    num_steps: int
    action_chunk: int
    max_episode_steps: int
    noise_shape: tuple[int, int]


@dataclass(frozen=True)
class EpisodeResult:
    """The outcome of one episode.

    Attributes:
        task_id, trial_id, noise_seed, scene_seed: The episode (see :class:`Episode`).
        success: Success within the horizon.
        length: Env steps taken (up to and including the first success, else the horizon).
        actions_sha256: Digest of every action chunk the policy produced (float32 bytes), to
            check that two runs took the same actions.
        env_slot: Which parallel env ran it (for debugging; outcomes never depend on it).
        video: Path of the episode's video relative to the output folder, if kept.
    """

    task_id: int
    trial_id: int
    noise_seed: int
    scene_seed: int
    success: bool
    length: int
    actions_sha256: str
    env_slot: int
    video: str | None = None


class EpisodeVideo(Protocol):
    """A video being recorded for one episode."""

    def add(self, main: np.ndarray, wrist: np.ndarray) -> None: ...

    def finish(self, success: bool) -> str | None: ...


@dataclass
class Timings:
    """Where the loop's time went (seconds), for ``bench/eval_throughput.py``."""

    policy_s: float = 0.0
    env_step_s: float = 0.0
    env_reset_s: float = 0.0
    total_s: float = 0.0
    env_steps: int = 0  # executed steps summed over the busy envs
    policy_calls: int = 0
    warm_up_s: float = 0.0  # compiling / capturing the fast policy call, before the loop


@dataclass
class _Slot:
    episode: Episode
    generator: torch.Generator
    hasher: Any = field(default_factory=hashlib.sha256)
    steps: int = 0
    video: EpisodeVideo | None = None


def run_episodes(
    env: VecEnv,
    policy: Policy,
    episodes: Sequence[Episode],
    settings: LoopSettings,
    *,
    start_video: Callable[[Episode], EpisodeVideo | None] | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
    timings: Timings | None = None,
) -> list[EpisodeResult]:
    """Run every episode on ``env``'s parallel slots; return results in plan order.

    Args:
        env: The parallel environments (``num_envs`` slots).
        policy: Called once per chunk on the observations of the busy slots.
        episodes: The plan; each runs exactly once.
        settings: Denoising steps, chunk, horizon, noise shape.
        start_video: Returns a recorder for an episode (None: no video).
        on_episode: Called as each episode ends (progress file, progress bar).
        timings: Filled with where the time went, when given.
    """
    timings = timings if timings is not None else Timings()
    started = time.perf_counter()
    lanes = deque(_lanes(episodes))
    slots: list[_Slot | None] = [None] * env.num_envs
    lane_of: list[deque[Episode]] = [deque() for _ in range(env.num_envs)]
    results: dict[tuple[int, int], EpisodeResult] = {}

    def next_episode(i: int) -> Episode | None:
        # An episode that continues its task's scene RNG runs in the env of its predecessor.
        if not lane_of[i] and lanes:
            lane_of[i] = lanes.popleft()
        return lane_of[i].popleft() if lane_of[i] else None

    def start(env_ids: list[int]) -> Observation | None:
        assigned = [(i, e) for i in env_ids if (e := next_episode(i)) is not None]
        if not assigned:
            return None
        for i, episode in assigned:
            slots[i] = _Slot(episode, torch.Generator().manual_seed(episode.noise_seed),
                             video=start_video(episode) if start_video else None)
        t0 = time.perf_counter()
        obs = env.reset([i for i, _ in assigned], [e for _, e in assigned])
        timings.env_reset_s += time.perf_counter() - t0
        for i, _ in assigned:
            _record(slots[i], obs, i)
        return obs

    obs = start(list(range(env.num_envs)))
    while obs is not None and any(slots):
        busy = [i for i, s in enumerate(slots) if s is not None]
        t0 = time.perf_counter()
        chunk = _act(policy, obs, [slots[i] for i in busy], busy, settings)
        timings.policy_s += time.perf_counter() - t0
        timings.policy_calls += 1
        actions = np.zeros((env.num_envs, *chunk.shape[1:]), dtype=np.float32)  # idle: unused
        actions[busy] = chunk
        t0 = time.perf_counter()
        stepped = env.step_chunk(actions, busy)
        timings.env_step_s += time.perf_counter() - t0
        timings.env_steps += len(busy) * settings.action_chunk
        ended = []
        for row, i in enumerate(busy):
            slot = slots[i]
            slot.hasher.update(np.ascontiguousarray(chunk[row]).tobytes())
            success = _advance(slot, i, stepped, settings.max_episode_steps)
            if success is not None:
                result = _finish(slot, i, success)
                results[result.task_id, result.trial_id] = result
                slots[i] = None
                ended.append(i)
                if on_episode:
                    on_episode(result)
        obs = stepped.observations[-1]
        if ended:
            obs = start(ended) or obs
    timings.total_s += time.perf_counter() - started
    return [results[e.key] for e in episodes]


def _lanes(episodes: Sequence[Episode]) -> list[deque[Episode]]:
    """The plan cut into lanes, each run in order in one env: an episode that does not reseed
    the scene joins the lane of the episode before it."""
    lanes: list[deque[Episode]] = []
    for episode in episodes:
        if episode.reseed or not lanes:
            lanes.append(deque())
        lanes[-1].append(episode)
    return lanes


def _act(policy: Policy, obs: Observation, slots: list[_Slot], rows: list[int],
         settings: LoopSettings) -> np.ndarray:
    """One policy call on the busy rows; float32 [len(rows), action_chunk, 7]."""
    sub = take_rows(obs, rows)
    noise = torch.stack([torch.randn(settings.noise_shape, generator=s.generator) for s in slots])
    out = policy.predict(sub, noise=noise, num_steps=settings.num_steps,
                         num_action_chunks=settings.action_chunk)
    return out["actions"].to(torch.float32).cpu().numpy()


def _advance(slot: _Slot, i: int, stepped: ChunkStep, max_steps: int) -> bool | None:
    """Count the chunk's steps for slot ``i``; True/False once the episode ended, else None."""
    for k, obs in enumerate(stepped.observations):
        slot.steps += 1
        _record(slot, obs, i)
        if bool(stepped.successes[i, k]):
            return True
        if slot.steps >= max_steps:
            return False
    return None


def _record(slot: _Slot | None, obs: Observation, i: int) -> None:
    if slot is not None and slot.video is not None:
        slot.video.add(_frame(obs["main_images"], i), _frame(obs["wrist_images"], i))


def _frame(images: Any, i: int) -> np.ndarray:
    frame = images[i]
    return frame.cpu().numpy() if isinstance(frame, torch.Tensor) else np.asarray(frame)


def _finish(slot: _Slot, i: int, success: bool) -> EpisodeResult:
    episode = slot.episode
    video = slot.video.finish(success) if slot.video is not None else None
    return EpisodeResult(episode.task_id, episode.trial_id, episode.noise_seed,
                         episode.scene_seed, success, slot.steps, slot.hasher.hexdigest(), i,
                         video)
