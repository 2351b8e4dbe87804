"""Where LIBERO's share of a training step goes: RLinf's LiberoEnv timed piece by piece.

Run by hand, alone or as ``bench/libero_run.py``'s first part (no policy, no Ray)::

    python3 bench/libero_anatomy.py --envs 8 [--suite libero_spatial] [--chunks 10]

RLinf's ``LiberoEnv`` is built as the env worker builds it for the shipped training config (one
subprocess per env, two 256² cameras), then timed: the subprocesses' start and first scene
builds; a training reset, split into its parts (RLinf rebuilds every env's scene at each
training reset, then ``reset``, the init state, and 15 rendered settle steps); ``--chunks``
chunks of 5 zero actions through ``chunk_step`` (what a rollout's env steps run, observations
wrapped); and the same raw steps with and without rendering the cameras (a second set of envs
built with ``use_camera_obs=False``), so that the cameras' share of an env step shows. Prints
one line per piece and, with ``--json``, writes them.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np


def _timer() -> Any:
    start = [time.perf_counter()]

    def lap() -> float:
        now = time.perf_counter()
        spent, start[0] = now - start[0], now
        return spent

    return lap


def anatomy(suite: str, envs: int, chunks: int, actions: int = 5) -> dict[str, float]:
    """Seconds of each piece (see the module docstring) for ``envs`` envs of ``suite``."""
    from dexrl.bridge.envs.libero import prepare_process

    prepare_process()
    from dexrl.bridge.registry import register

    register()
    from rlinf.envs.libero.libero_env import LiberoEnv

    from dexrl.config.compose import compose

    overrides = [f"env.train.total_num_envs={envs}"]
    cfg = compose(f"{suite}_ppo_dexbotic_pi0", overrides).env.train
    lap, out = _timer(), {}
    env = LiberoEnv(cfg, num_envs=envs, seed_offset=0, total_num_processes=1, worker_info=None)
    env.reset()
    out["start and first reset"] = lap()
    ids = np.arange(envs)
    env.is_start = True
    env.env.reconfigure_env_fns(env.get_env_fn_params(list(ids)), list(ids))
    out["reset: rebuild scenes"] = lap()
    env.env.seed(env.seed * envs)
    env.env.reset(id=ids)
    out["reset: reset"] = lap()
    env.env.set_init_state(init_state=env._get_reset_states(env_idx=ids), id=ids)
    out["reset: init state"] = lap()
    for _ in range(15):
        env.env.step(np.zeros((envs, 7)), ids)
    out["reset: 15 settle steps"] = lap()
    env.is_start = True
    env.reset()
    out["reset, whole (RLinf)"] = lap()
    for _ in range(chunks):
        env.chunk_step(np.zeros((envs, actions, 7)))
    out[f"env step (chunk_step, per action, {envs} envs)"] = lap() / (chunks * actions)
    for _ in range(chunks * actions):
        env.env.step(np.zeros((envs, 7)))
    out["raw env step with cameras, per action"] = lap() / (chunks * actions)
    env.env.close()
    blind = compose(f"{suite}_ppo_dexbotic_pi0", [*overrides,
                                                 "+env.train.init_params.use_camera_obs=false"])
    lap()
    other = LiberoEnv(blind.env.train, num_envs=envs, seed_offset=0, total_num_processes=1,
                      worker_info=None)
    other.env.reset(id=ids)
    lap()
    for _ in range(chunks * actions):
        other.env.step(np.zeros((envs, 7)))
    out["raw env step without cameras, per action"] = lap() / (chunks * actions)
    other.env.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="libero_spatial")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    pieces = anatomy(args.suite, args.envs, args.chunks)
    for name, seconds in pieces.items():
        print(f"{name:<48} {seconds * 1e3 if seconds < 1 else seconds:>9.1f} "
              f"{'ms' if seconds < 1 else 's'}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"suite": args.suite, "envs": args.envs,
                                         "seconds": pieces}, indent=1))


if __name__ == "__main__":
    main()
