"""One ``dexrl eval`` from arguments to ``results.json``: check everything, then run.

:func:`prepare` resolves and checks every input and writes nothing; :func:`run` loads the policy
and the envs (still writing nothing), then claims the output folder, logs each finished episode
to ``progress.jsonl`` and writes ``results.json`` atomically at the end.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from dexrl.catalog import get_suite
from dexrl.checkpoints.policy import load_eval_policy
from dexrl.checkpoints.sources import CheckpointSource, locate_checkpoint, resolve_checkpoint
from dexrl.errors import DexrlError, disk_full, one_line
from dexrl.evaluation import results as res
from dexrl.evaluation.episode_loop import EpisodeResult, LoopSettings, Timings, run_episodes
from dexrl.evaluation.episodes import parse_tasks, plan_episodes
from dexrl.evaluation.protocol import check_same_protocol, protocol_record
from dexrl.evaluation.reference import references_for
from dexrl.evaluation.request import EvalRequest
from dexrl.evaluation.settings import (
    EvalSettings,
    env_config,
    resolve_settings,
    user_env_config,
)
from dexrl.evaluation.videos import VideoRecorder, write_gallery
from dexrl.runs import durable
from dexrl.runs.layout import eval_dir
from dexrl.runs.record import git_state
from dexrl.specs import load_reference
from dexrl.vec_env import Episode, EvalTask
from dexrl.versions import installed_versions


@dataclass
class Prepared:
    """A checked evaluation, ready to run.

    Attributes:
        source: The checkpoint.
        settings: Every value used.
        task: What the suite's tasks are, and their envs.
        languages: Task id -> instruction.
        init_states: Task id -> number of fixed initial states.
        episodes: The plan.
        out: Output folder.
        stale: Files of an earlier evaluation that ``--overwrite`` will remove.
        env_cfg: The env config (RLinf's LIBERO env config, or a built-in task's).
        other: ``--compare`` (path, results) if given.
        protocol: results.json's ``protocol`` record.
    """

    source: CheckpointSource
    settings: EvalSettings
    task: EvalTask
    languages: dict[int, str]
    init_states: dict[int, int]
    episodes: list[Episode]
    out: Path
    stale: list[Path]
    env_cfg: DictConfig
    other: tuple[str, dict[str, Any]] | None
    protocol: dict[str, Any] = dataclasses.field(default_factory=dict)


def prepare(request: EvalRequest) -> Prepared:
    """Resolve and check every input; raises DexrlError on the first problem, writes nothing."""
    ckpt = locate_checkpoint(request.ckpt)  # a missing --ckpt is the first error, then the suite
    suite = get_suite(request.suite)
    source = resolve_checkpoint(ckpt, request.base)
    task: EvalTask = load_reference(suite.eval_task)
    languages, init_states = task.goals(
        suite.name, lambda: user_env_config(suite.name, source, request.env_overrides),
        request.episodes_per_task)
    task_ids = parse_tasks(request.tasks, len(languages))
    episodes = plan_episodes(task_ids, request.episodes_per_task, init_states, request.seed)
    settings = resolve_settings(source, request, task_ids)
    if settings.scene_seed is not None:  # the standard protocol: one scene sequence per task
        episodes = plan_episodes(task_ids, request.episodes_per_task, init_states, request.seed,
                                 task_scene_seed=settings.scene_seed)
    env_cfg = env_config(settings, source)
    protocol = protocol_record(settings.protocol_value(), settings.record(), settings.sources,
                               camera=_camera(env_cfg))
    out_dir = (Path(request.out).expanduser() if request.out
               else default_out(source, suite.name, request.env_overrides))
    stale = res.check_out_dir(out_dir, request.overwrite)
    other = None
    if request.compare:
        other = (str(request.compare), res.load_results(Path(request.compare)))
        res.check_same_suite(suite.name, other[1], str(request.compare))
        if not request.allow_protocol_mismatch:
            check_same_protocol(protocol, other[1], str(request.compare))
    return Prepared(source, settings, task, languages, init_states, episodes, out_dir, stale,
                    env_cfg, other, protocol)


def _camera(env_cfg: DictConfig) -> str | None:
    """The LIBERO cameras' size as ``HxW`` (None for a dexrl task)."""
    params = env_cfg.get("init_params") or {}
    if "camera_heights" not in params:
        return None
    return f"{params['camera_heights']}x{params['camera_widths']}"


def default_out(source: CheckpointSource, suite: str, overrides: Sequence[str] = ()) -> Path:
    """``RUN_DIR/eval/global_step_N-<suite>`` for RLinf checkpoints (``dexrl export`` finds it
    there for the model card), else ``eval/<checkpoint name>-<suite>-<time>``; env overrides
    follow the suite (:func:`overrides_tag`), so that a masked evaluation of a checkpoint does
    not land in the folder of its unmasked one."""
    name = suite + overrides_tag(overrides)
    if source.run_dir is not None and source.step is not None:
        return eval_dir(source.run_dir, source.step, name)
    return Path("eval") / f"{source.model_dir.name}-{name}-{time.strftime('%Y%m%d-%H%M%S')}"


_UNSAFE = re.compile(r"[^A-Za-z0-9._=+,-]+")
MAX_TAG = 60  # characters of the overrides kept in a folder name


def overrides_tag(overrides: Sequence[str]) -> str:
    """The env overrides as a folder name suffix: ``''`` without any, else ``-`` and the
    overrides joined by ``,``, e.g. ``-reach_cued.show_cue=false``. Runs of characters other
    than letters, digits and ``._=+,-`` become ``_``; a tag changed so, or longer than
    ``MAX_TAG``, is cut and ends with 8 hex digits of the overrides' hash, so that different
    overrides never share a folder and the same ones always do."""
    if not overrides:
        return ""
    text = ",".join(overrides)
    tag = _UNSAFE.sub("_", text)
    if tag != text or len(tag) > MAX_TAG:
        digest = hashlib.sha256("\0".join(overrides).encode()).hexdigest()[:8]
        tag = f"{tag[:MAX_TAG - 9].rstrip('_')}-{digest}"
    return f"-{tag}"


def is_full_suite(prepared: Prepared) -> bool:
    """Every task of the suite, every initial state of each task."""
    s = prepared.settings
    return (len(s.tasks) == len(prepared.languages)
            and all(s.episodes_per_task >= n for n in prepared.init_states.values()))


def run(prepared: Prepared, *, command: list[str],
        on_start: Callable[[int], None] | None = None,
        on_episode: Callable[[EpisodeResult], None] | None = None) -> dict[str, Any]:
    """Run the prepared evaluation and write its results; returns the results.json content."""
    s = prepared.settings
    started = time.perf_counter()
    policy = load_eval_policy(prepared.source, s.device, s.dtype)
    # Record the dtype the weights actually have (None meant "the checkpoint's").
    dtype = policy.network.model.action_out_proj.weight.dtype
    s = prepared.settings = dataclasses.replace(s, dtype=str(dtype).removeprefix("torch."))
    config = policy.network.config
    loop = LoopSettings(s.num_steps, s.action_chunk, s.max_episode_steps,
                        (config.chunk_size, config.action_dim))
    timings = Timings()
    policy = _fast_policy(policy, prepared, timings)
    env = prepared.task.vec_env(prepared.env_cfg, prepared.source.model_type, s.action_chunk)
    try:
        res.claim_out_dir(prepared.out, prepared.stale)
        recorder = VideoRecorder(prepared.out, s.video)
        progress = res.ProgressLog(prepared.out / res.PROGRESS_FILE,
                                   {"suite": s.suite, "checkpoint": str(prepared.source.path),
                                    "config": s.record(), "episodes": len(prepared.episodes)})

        done: list[EpisodeResult] = []  # what results.json keeps if the evaluation fails

        def finished(result: EpisodeResult) -> None:
            progress.episode(result)
            done.append(result)
            if on_episode:
                on_episode(result)

        if on_start:
            on_start(len(prepared.episodes))
        try:
            outcomes = run_episodes(env, policy, prepared.episodes, loop,
                                    start_video=recorder.start, on_episode=finished,
                                    timings=timings)
        except BaseException as exc:  # a dead env, a full disk, Ctrl-C: no half-written video
            recorder.discard_unfinished()
            if isinstance(exc, Exception) and done and not _disk_full(exc):
                _write_partial(prepared, done, timings, time.perf_counter() - started, command,
                               exc)
            if isinstance(exc, DexrlError):
                _with_partial(exc, prepared.out, bool(done))
            raise
        finally:
            progress.close()
    finally:
        env.close()
    return _finish(prepared, outcomes, timings, time.perf_counter() - started, command,
                   _environment())


def _fast_policy(policy: Any, prepared: Prepared, timings: Timings) -> Any:
    """The policy's calls through the rollout's compiled / CUDA-graph path when asked for
    (``--torch-compile``, ``--cuda-graph``), compiled and captured now; else ``policy``."""
    s = prepared.settings
    if s.torch_compile is None and not s.cuda_graph:
        return policy
    from dexrl.bridge.policies.fast_eval import FastEvalPolicy

    started = time.perf_counter()
    fast = FastEvalPolicy(policy, prepared.source.model_type, num_steps=s.num_steps,
                          action_chunk=s.action_chunk, num_envs=s.num_envs,
                          compile_mode=s.torch_compile, cuda_graph=s.cuda_graph)
    try:
        fast.warm_up()
    except DexrlError:
        raise
    except Exception as exc:  # inductor without a C compiler, a capture out of GPU memory, ...
        flags = " and ".join(f for f, on in (("--torch-compile", s.torch_compile is not None),
                                             ("--cuda-graph", s.cuda_graph)) if on)
        raise DexrlError(f"compiling / capturing the policy call failed: {one_line(exc)}",
                         hint=f"leave {flags} out (the eager policy call gives the same "
                         "actions), or fix the cause above", where=flags,
                         code="eval-fast-path-failed") from None
    timings.warm_up_s = time.perf_counter() - started
    return fast


def _environment() -> dict[str, Any]:
    return {"versions": installed_versions(), "git": git_state()}


def _disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and disk_full(exc)


def _write_partial(prepared: Prepared, done: list[EpisodeResult], timings: Timings,
                   wall: float, command: list[str], exc: Exception) -> None:
    """results.json of the episodes that finished before ``exc`` stopped the evaluation, marked
    partial (the per-episode log stays beside it)."""
    what = exc.message if isinstance(exc, DexrlError) else f"{type(exc).__name__}: {exc}"
    order = {e.key: n for n, e in enumerate(prepared.episodes)}
    _finish(prepared, sorted(done, key=lambda r: order[r.task_id, r.trial_id]), timings, wall,
            command, _environment(), partial={"reason": what,
                                              "episodes_planned": len(prepared.episodes),
                                              "episodes_finished": len(done)})


def _with_partial(exc: DexrlError, out: Path, kept: bool) -> DexrlError:
    """``exc``, its hint saying where the finished episodes are."""
    where = (f"the {res.RESULTS_FILE} in {out} holds the episodes that finished, marked partial"
             if kept else f"no episode finished; {out / res.PROGRESS_FILE} has the run's header")
    exc.hint = f"{exc.hint}; {where}" if exc.hint else where
    return exc


def _finish(prepared: Prepared, outcomes: list[EpisodeResult], timings: Timings, wall: float,
            command: list[str], environment: dict[str, Any],
            partial: dict[str, Any] | None = None) -> dict[str, Any]:
    s = prepared.settings
    _, overall = res.summarize(outcomes, prepared.languages)
    reference = references_for(prepared.source.model_type, s.suite, overall,
                               is_full_suite(prepared) and partial is None,
                               prepared.protocol)
    data = res.build_results(
        suite=s.suite, checkpoint=prepared.source.describe(), config=s.record(), seed=s.seed,
        episodes=outcomes, languages=prepared.languages, wall_time_s=wall,
        environment={**environment, "command": command, "timing": timings.__dict__},
        reference=reference, blind_bound=prepared.task.blind_bound(s.suite, prepared.env_cfg),
        protocol=prepared.protocol, partial=partial)
    if prepared.other is not None:
        data["comparison"] = res.compare(data, prepared.other[1], prepared.other[0])
    write_gallery(prepared.out, data["episodes"], prepared.languages,
                  f"{s.suite}: {prepared.source.path}")
    durable.write_json(prepared.out / res.RESULTS_FILE, data)
    return data
