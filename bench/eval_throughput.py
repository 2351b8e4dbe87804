"""Throughput of ``dexrl eval``'s episode loop against bare LIBERO loops, in one run.

Run by hand: ``.venv/bin/python bench/eval_throughput.py`` (CPU: a tiny random π0, 2 envs, 4
episodes of 40 steps on libero_spatial; a few minutes) or with ``--ckpt DIR`` for a real checkpoint
(``--device cuda`` on a GPU). All loops share the same envs (RLinf's ``LiberoEnv``: one subprocess
per env, two 256² cameras rendered every step):

- raw: the subprocess vector env stepped with zero actions (no RLinf wrapper, no resets);
- bare: the same episodes through RLinf's wrapper with zero actions and the same resets;
- eval: :func:`dexrl.evaluation.episode_loop.run_episodes` with the policy.

Each loop runs ``--repeats`` times, in turns, and the best time of each is compared.

The headline ratio is the eval loop's time *excluding policy inference* over the bare loop's time
for the same episodes; target ≤ 1.10 (≤ 10 % overhead beyond inference). The loop's own time
outside policy and env calls is printed too: on a loaded machine the two loops' env times vary
by tens of percent between runs, while that part does not.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", help="checkpoint folder (default: a tiny random π0)")
    parser.add_argument("--suite", default="libero_spatial")
    parser.add_argument("--num-envs", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=4, help="episodes (spread over tasks)")
    parser.add_argument("--max-episode-steps", type=int, default=40)
    parser.add_argument("--action-chunk", type=int, default=5)
    parser.add_argument("--num-steps", type=int, default=4, help="denoising steps")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each loop (best kept)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    from dexrl.bridge.envs.libero import LiberoVecEnv, suite_info
    from dexrl.checkpoints.policy import load_eval_policy
    from dexrl.checkpoints.sources import resolve_checkpoint
    from dexrl.evaluation.episode_loop import LoopSettings, Timings, run_episodes
    from dexrl.evaluation.episodes import plan_episodes
    from dexrl.evaluation.request import EvalRequest
    from dexrl.evaluation.settings import env_config, resolve_settings

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = args.ckpt
        if ckpt is None:
            from dexrl.models.pi0.tiny import write_tiny_pi0

            ckpt = write_tiny_pi0(Path(tmp) / "tiny", chunk_size=max(8, args.action_chunk))
        source = resolve_checkpoint(ckpt)
        info = suite_info(args.suite)
        per_task = -(-args.episodes // args.num_envs)
        tasks = list(range(min(args.num_envs, len(info.languages))))
        plan = plan_episodes(tasks, per_task, info.init_states, seed=0)[: args.episodes]
        settings = resolve_settings(source, EvalRequest(
            ckpt=str(ckpt), suite=args.suite, episodes_per_task=per_task,
            num_envs=args.num_envs, seed=0, num_steps=args.num_steps,
            action_chunk=args.action_chunk, max_episode_steps=args.max_episode_steps,
            video="none", device=args.device, dtype=None), tasks)
        policy = load_eval_policy(source, settings.device)
        config = policy.network.config
        loop = LoopSettings(settings.num_steps, settings.action_chunk,
                            settings.max_episode_steps, (config.chunk_size, config.action_dim))
        t0 = time.perf_counter()
        env = LiberoVecEnv(env_config(settings, source), source.model_type, args.action_chunk)
        env.reset(list(range(env.num_envs)), plan[: env.num_envs])  # warm-up: scenes built
        print(f"envs up and first reset: {time.perf_counter() - t0:.1f} s")
        try:
            rows = measure(env, policy, plan, loop, run_episodes, Timings, args.repeats)
        finally:
            env.close()
    report(rows, args)


def measure(env, policy, plan, loop, run_episodes, timings_class,  # noqa: ANN001
            repeats: int) -> dict[str, tuple]:
    """(seconds, env steps) of each loop, best of ``repeats`` runs taken in turns (the machine's
    other load then affects every loop alike); the eval row also returns its timings."""
    chunks = -(-loop.max_episode_steps // loop.action_chunk)
    zeros = np.zeros((env.num_envs, loop.action_chunk, 7), dtype=np.float32)
    raw = env._env.env  # the subprocess vector env under RLinf's wrapper
    raw_calls = -(-len(plan) * chunks * loop.action_chunk // env.num_envs)

    def raw_loop() -> float:
        t0 = time.perf_counter()
        for _ in range(raw_calls):
            raw.step(zeros[:, 0])
        return time.perf_counter() - t0

    def bare_loop() -> float:
        t0 = time.perf_counter()
        for start in range(0, len(plan), env.num_envs):
            batch = plan[start:start + env.num_envs]
            env.reset(list(range(len(batch))), batch)
            for _ in range(chunks):
                env.step_chunk(zeros, list(range(len(batch))))
        return time.perf_counter() - t0

    def eval_loop() -> tuple:
        timings = timings_class()
        results = run_episodes(env, policy, plan, loop, timings=timings)
        return timings, sum(r.length < loop.max_episode_steps for r in results)

    raws, bares, evals = [], [], []
    for _ in range(repeats):
        raws.append(raw_loop())
        bares.append(bare_loop())
        evals.append(eval_loop())
    timings, early = min(evals, key=lambda e: e[0].total_s - e[0].policy_s)
    bare_steps = -(-len(plan) // env.num_envs) * chunks * loop.action_chunk * env.num_envs
    return {"raw": (min(raws), raw_calls * env.num_envs), "bare": (min(bares), bare_steps),
            "timings": (timings, early), "runs": (raws, bares, evals)}


def report(rows: dict[str, tuple], args: argparse.Namespace) -> None:
    timings, early = rows["timings"]
    bare_s, bare_steps = rows["bare"]
    raw_s, raw_steps = rows["raw"]
    loop_s = timings.total_s - timings.policy_s
    print(f"\n{args.num_envs} envs, {args.episodes} episodes x {args.max_episode_steps} steps, "
          f"chunk {args.action_chunk}, {args.num_steps} denoising steps, device {args.device}")
    print(f"{'loop':<34}{'seconds':>9}{'env steps':>11}{'steps/s':>9}")
    for label, seconds, steps in (
            ("raw LIBERO (subprocess vector env)", raw_s, raw_steps),
            ("bare (RLinf wrapper, zero actions)", bare_s, bare_steps),
            ("eval loop", timings.total_s, timings.env_steps),
            ("eval loop minus policy inference", loop_s, timings.env_steps)):
        print(f"{label:<34}{seconds:>9.2f}{steps:>11}{steps / seconds:>9.2f}")
    raws, bares, evals = rows["runs"]
    print("\nall runs (s): raw " + ", ".join(f"{t:.1f}" for t in raws) + "; bare "
          + ", ".join(f"{t:.1f}" for t in bares) + "; eval minus inference "
          + ", ".join(f"{t.total_s - t.policy_s:.1f}" for t, _ in evals))
    print(f"policy inference: {timings.policy_s:.2f} s in {timings.policy_calls} calls; "
          f"env steps {timings.env_step_s:.2f} s; resets {timings.env_reset_s:.2f} s")
    env_s = timings.env_step_s + timings.env_reset_s
    own = timings.total_s - timings.policy_s - env_s
    print(f"eval loop outside policy and env calls: {own:.3f} s ({100 * own / env_s:.2f} % of its "
          "env time; the part of the overhead that machine load cannot blur)")
    ratio = loop_s / bare_s
    print(f"eval loop minus inference / bare loop = {ratio:.3f} "
          f"({'within' if ratio <= 1.10 else 'above'} the 1.10 target)")
    print(f"bare loop / raw LIBERO stepping = {bare_s / raw_s:.3f} (RLinf's wrapper and resets)")
    if early:
        print(f"note: {early} episode(s) ended early (success), so the eval loop did less work")


if __name__ == "__main__":
    main()
