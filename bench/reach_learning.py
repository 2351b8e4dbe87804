"""Learning runs on dexrl's built-in reach tasks through RLinf, against controls that cannot learn.

Run by hand (it starts Ray and RLinf; on a shared machine take the heavy-run lock)::

    flock /tmp/dexrl-heavy.lock .venv/bin/python bench/reach_learning.py --task reach_cued \\
        --models pi0 dm0 --seeds 0 1 2 --steps 100 --set actor.micro_batch_size=16

Each seed and model runs ``dexrl train --suite TASK --model MODEL --smoke`` for ``--steps``
global steps (``--algo`` and ``--noise`` go to every run: GRPO, flow-noise; docs/algorithms.md)
once per arm: ``ppo`` (as shipped, or the chosen algorithm), ``control`` (the policy's learning
rate 0, for ``--control-steps``: its weights cannot move, so any length gives the same policy) and,
on ``reach_cued``, ``ablation`` (one fixed instruction and no target in the image, in training and
in evaluation). Printed per run: return and success averaged over the first and the last
``--window`` steps, wall time and median step time. On ``reach_cued`` each run's last checkpoint
is then evaluated with ``dexrl eval`` (``--eval-episodes`` per target, deterministic actions):
as trained, and for ``ppo`` also with the image cue masked, the instruction masked, and both.
Then per arm: the mean over seeds, its spread, and whether success clears the blind bound by
two standard errors of the seed mean (``ppo``) or stays within them (``control``, ``ablation``).
All runs' curves are overlaid in ``OUT/seeds.png``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dexrl.curves import plot_runs

# The reach runs are a test harness, kept out of the package in tests/helpers/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers.reach_runs import (  # noqa: E402
    ABLATION,
    CONTROL,
    MASKS,
    evaluate,
    rise,
    run_reach,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="reach", choices=("reach", "reach_cued"))
    parser.add_argument("--models", nargs="+", default=["pi0"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--window", type=int, default=3, help="steps averaged at each end")
    parser.add_argument("--arms", nargs="+", default=None,
                        help="ppo, control, ablation (default: all the task has)")
    parser.add_argument("--eval-episodes", type=int, default=100, help="per target")
    parser.add_argument("--out", type=Path, default=None, help="folder for the run folders")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="overrides for every run (e.g. actor.micro_batch_size=16)")
    parser.add_argument("--algo", default=None, help="dexrl train --algo (ppo, grpo)")
    parser.add_argument("--noise", default=None, help="dexrl train --noise (flow_sde, "
                        "flow_noise)")
    parser.add_argument("--control-steps", type=int, default=None,
                        help="global steps of the control arm (default --steps)")
    parser.add_argument("--masks", action=argparse.BooleanOptionalAction, default=True,
                        help="also evaluate the trained arm with each cue masked")
    args = parser.parse_args()
    flags = [*(["--algo", args.algo] if args.algo else []),
             *(["--noise", args.noise] if args.noise else [])]
    out = args.out or Path(tempfile.mkdtemp(prefix="reach-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    cued = args.task == "reach_cued"
    known = {"ppo": (), "control": CONTROL, **({"ablation": ABLATION} if cued else {})}
    arms = {a: known[a] for a in (args.arms or known)}
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    print(f"{'model':5} {'arm':8} {'seed':>4} {'return first→last':>20} "
          f"{'success first→last':>20} {'wall s':>7} {'step s':>7}")
    ends: dict[tuple[str, str], list[float]] = {}
    evals: dict[tuple[str, str, str], list[float]] = {}
    bound = None
    dirs = []
    for model in args.models:
        for seed in args.seeds:
            for arm, overrides in arms.items():
                run_dir = out / f"{model}-{arm}-s{seed}"
                start = time.perf_counter()
                steps = (args.control_steps or args.steps) if arm == "control" else args.steps
                curves = run_reach(run_dir, seed, steps, *flags, *args.set, *overrides,
                                   suite=args.task, model=model, timeout_s=args.timeout)
                wall = time.perf_counter() - start
                ret = rise(curves, "env/return", args.window)
                succ = rise(curves, "env/success_once", args.window)
                step_times = curves.series["time/step"][1][1:]  # after the first
                ends.setdefault((model, arm), []).append(succ[1])
                dirs.append(run_dir)
                label = (args.algo or "ppo") if arm == "ppo" else arm
                print(f"{model:5} {label:8} {seed:>4} {ret[0]:>9.3f} → {ret[1]:>7.3f} "
                      f"{succ[0]:>9.2f} → {succ[1]:>7.2f} {wall:>7.0f} "
                      f"{statistics.median(step_times):>7.1f}", flush=True)
                if not cued:
                    continue
                masks = MASKS if arm == "ppo" and args.masks else {"as trained": ()}
                for mask, extra in masks.items():
                    data = evaluate(run_dir, out / "eval" / f"{run_dir.name}-{mask.split()[0]}",
                                    args.eval_episodes, *extra)
                    bound = data["blind_bound"]["success_rate"]
                    rate = data["overall"]["success_rate"]
                    evals.setdefault((model, arm, mask), []).append(rate)
                    per_target = " ".join(f"{r['success_rate']:.2f}" for r in data["per_task"])
                    print(f"      eval {mask:20} success {rate:.3f} "
                          f"(per target {per_target})", flush=True)
    _summary(ends, "training success, last window", bound)
    if cued:
        _summary({(m, f"{a}, {k}"): v for (m, a, k), v in evals.items()},
                 "eval success (deterministic)", bound)
    print(f"curves: {plot_runs(dirs, out / 'seeds.png')}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


def _summary(values: dict[tuple[str, str], list[float]], what: str, bound: float | None) -> None:
    """Mean, sd and two standard errors of the seed mean per arm, against the blind bound."""
    print(f"\n{what}" + (f" (blind bound {bound:.3f})" if bound is not None else ""))
    for (model, arm), xs in values.items():
        mean = statistics.fmean(xs)
        sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
        margin = 2 * sd / math.sqrt(len(xs))
        verdict = ""
        if bound is not None:
            verdict = "above the bound" if mean - margin > bound else "not above the bound"
        print(f"  {model:5} {arm:32} mean {mean:.3f} sd {sd:.3f} (2 SE {margin:.3f}) over "
              f"{len(xs)} seed(s): {' '.join(f'{x:.2f}' for x in xs)}  {verdict}")


if __name__ == "__main__":
    main()
