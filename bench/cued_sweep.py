"""In-process PPO on the cued reach task: a quick way to compare settings before pipeline runs.

Run by hand (one thread; two can run side by side on 2 cores)::

    .venv/bin/python bench/cued_sweep.py --model pi0 --seed 0 --updates 60 \\
        actor.model.dexbotic.noise_level=1.5

It composes ``reach_cued_ppo_dexbotic_MODEL`` with the given overrides and a tiny random
checkpoint, then runs ``--updates`` PPO updates of :class:`helpers.local_ppo.LocalPPO` (RLinf's
advantages and loss, no Ray) on :class:`dexrl.reach.env.CuedReachEnv`, one rollout of
``total_num_envs`` episodes per update, printing training success every 10 updates. Then it
evaluates the rollout policy with deterministic actions on fixed noise, ``--episodes`` per target,
as trained and with the image cue, the instruction, or both masked. A pipeline run
(``bench/reach_learning.py``) adds Ray, FSDP and the weight syncer but the same algorithm; on 2
cores one update here took about 2.5 s (π0) and 4.5 s (DM0) with two sweeps side by side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from dexrl.config.compose import compose
from dexrl.models.dm0.tiny import write_tiny_dm0
from dexrl.models.pi0.tiny import write_tiny_pi0
from dexrl.reach.env import CuedReachEnv

# The in-process PPO iteration and the masks are a test harness, kept out of the package in
# tests/helpers/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers.local_ppo import LocalPPO, RolloutStep  # noqa: E402
from helpers.reach_runs import MASKS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("pi0", "dm0"), default="pi0")
    parser.add_argument("--seed", type=int, default=0, help="env starts, targets and sampling")
    parser.add_argument("--updates", type=int, default=60)
    parser.add_argument("--episodes", type=int, default=60, help="per target, at evaluation")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = parser.parse_args()
    torch.set_num_threads(1)
    writer = write_tiny_pi0 if args.model == "pi0" else write_tiny_dm0
    ckpt = writer(Path(tempfile.mkdtemp(prefix="cued-sweep-")) / "ckpt", seed=0)
    cfg = compose(f"reach_cued_ppo_dexbotic_{args.model}",
                  [f"actor.model.model_path={ckpt}", *args.overrides])
    OmegaConf.resolve(cfg)
    torch.manual_seed(args.seed)
    ppo = LocalPPO(cfg)
    env = CuedReachEnv(cfg.env.train, int(cfg.env.train.total_num_envs), args.seed, 1, None)
    calls = cfg.env.train.max_episode_steps // cfg.actor.model.num_action_chunks
    generator = torch.Generator().manual_seed(args.seed)
    history: list[float] = []
    start = time.perf_counter()
    for update in range(1, args.updates + 1):
        ppo.sync_weights()
        obs, _ = env.reset()
        steps = []
        for _ in range(calls):
            actions, result = ppo.act(obs)
            obs_list, rewards, terminations, truncations, infos = env.chunk_step(actions)
            obs = obs_list[-1]
            steps.append(RolloutStep(result, rewards.float(), terminations | truncations))
        history.append(float(infos[-1]["episode"]["success_once"].float().mean()))
        ppo.train(steps, generator)
        if update % 10 == 0:
            print(f"update {update:4}  training success (last 10) "
                  f"{statistics.fmean(history[-10:]):.3f}  {time.perf_counter() - start:.0f} s",
                  flush=True)
    ppo.sync_weights()
    for name, overrides in MASKS.items():
        per_target = evaluate(ppo, cfg, calls, args.episodes, overrides)
        print(f"eval {name:20} success {statistics.fmean(per_target):.3f} "
              f"(per target {' '.join(f'{r:.2f}' for r in per_target)})")


def evaluate(ppo: LocalPPO, cfg: DictConfig, calls: int, episodes: int,
             overrides: tuple[str, ...]) -> list[float]:
    """Deterministic success rate per target over ``episodes`` seeded starts each, in the
    training env with ``overrides`` (``dexrl eval``'s env override keys, e.g. a mask)."""
    env_cfg = OmegaConf.merge(cfg.env.train, OmegaConf.from_dotlist(list(overrides)))
    targets = len(env_cfg.reach_cued.targets)
    count = targets * episodes
    env = CuedReachEnv(env_cfg, count, 0, 1, None)
    obs = env.start(range(count), [t for t in range(targets) for _ in range(episodes)],
                    [1000 + i for i in range(count)])
    network = ppo.rollout.flow.network.config
    generator = torch.Generator().manual_seed(1)
    for _ in range(calls):
        noise = torch.randn(count, network.chunk_size, network.action_dim, generator=generator)
        actions, _ = ppo.rollout.predict_action_batch(obs, mode="eval", noise=noise)
        obs = env.chunk_step(actions)[0][-1]
    return env.success_once.reshape(targets, episodes).mean(1).tolist()


if __name__ == "__main__":
    main()
