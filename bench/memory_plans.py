"""Peak GPU memory and step time of the memory plans (issue 47), beside the dry run's estimate.

Per run (``--runs MODEL:VARIANT ...``), the shipped libero_spatial run at one GPU's share (8
envs, a global batch of 128; ``libero_run.SHARE``), every fast path as shipped (off),
``--rollout-epochs`` rollout epochs of ``--episode-steps`` env steps, 2 global steps, no
checkpoints, one variant:

- ``80gb``, ``24gb``: ``dexrl train --memory-plan PLAN``;
- ``24gb-capped``: the 24gb plan with each worker process's torch allocator capped
  (``torch.cuda.set_per_process_memory_fraction``, set at CUDA's initialisation by a
  ``sitecustomize`` on ``PYTHONPATH``, which Ray's workers inherit) so that the caps, the
  estimate's per-process overheads and the envs' EGL memory add up to ``--cap-gib`` (24): the
  plan runs under a real limit.

Each run prints and records (``--json``): peak GPU memory of all processes (``nvidia-smi``,
sampled every 0.5 s), RLinf's ``time/step`` of each step and the steady step (the last step's
phases), and ``train --dry-run --json``'s per-GPU estimate of the same settings; then the table
of the issue's targets: peak ≤ 22 GiB under the 24gb plan, its step ≤ 1.5× the 80gb plan's,
the estimate within 15 % of every measured peak. ``--cpu``: the same with ``--smoke``'s tiny
policies on the CPU (checks the pipeline and the bookkeeping, not memory).

On one GPU (docs/performance.md#the-next-gpu-session), from the repository root:
    sh bench/gpu_env.sh .gpu/libero_spatial.tar.xz -- python3 bench/memory_plans.py \\
        --budget 540 --json $OUT/memory-plans.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.reach_runs import dexrl_command  # noqa: E402
from libero_run import (  # noqa: E402  (bench/ on the path first)
    CPU_NOT_HERE,
    CPU_SETTINGS,
    GPU_SETTINGS,
    SHARE,
    SUITE,
    Setup,
    checkpoint,
    run_part,
    step_rows,
)

GIB = 2**30
MIB_GB = 2**20 / 1e9
VARIANTS = ("80gb", "24gb", "24gb-capped")
# The default order: both plans of both models first, the capped run last (the budget skips
# what would not fit); about the seconds each takes on one H100 (not measured: start-up 70 s
# and 2 short steps).
RUNS = ("pi0:80gb", "pi0:24gb", "dm0:80gb", "dm0:24gb", "pi0:24gb-capped")
RUN_S = {"80gb": 100, "24gb": 110, "24gb-capped": 110}
TARGET_PEAK_GIB = 22.0
TARGET_STEP_RATIO = 1.5
TARGET_ESTIMATE = 0.15

# Installed as sitecustomize.py in a folder put first on PYTHONPATH for the capped run: when a
# process imports torch, queue (torch.cuda._lazy_call) the cap of its role at CUDA's
# initialisation; the role comes from the class of the Ray actor the process hosts.
CAP_HOOK = '''
import builtins, json, os, sys
_caps = json.loads(os.environ.get("DEXRL_BENCH_CAPS", "{}"))
_import = builtins.__import__

def _role():
    try:
        import ray
        actor = ray.get_runtime_context().current_actor
        name = actor._ray_actor_creation_function_descriptor.class_name.lower()
    except Exception:
        return None
    for role in ("rollout", "env", "actor"):
        if role in name:
            return role
    return None

def _cap():
    import torch
    role = _role()
    if role in _caps:
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, _caps[role] / total))
        with open(os.environ["DEXRL_BENCH_CAP_LOG"], "a") as log:
            log.write(json.dumps({"pid": os.getpid(), "role": role, "bytes": _caps[role],
                                  "total": total}) + "\\n")

def _hook(name, *args, **kwargs):
    module = _import(name, *args, **kwargs)
    if name == "torch" and "torch.cuda" in sys.modules and not getattr(_hook, "done", False):
        _hook.done = True
        builtins.__import__ = _import
        sys.modules["torch.cuda"]._lazy_call(_cap)
        with open(os.environ["DEXRL_BENCH_CAP_LOG"], "a") as log:
            log.write(json.dumps({"pid": os.getpid(), "registered": True}) + "\n")
    return module

if _caps:
    builtins.__import__ = _hook
'''


def estimate(args: list[str]) -> dict[str, Any] | None:
    """``train --dry-run --json``'s GPU 0 and memory plan for ``args``."""
    done = subprocess.run([*dexrl_command(), "train", *args, "--dry-run", "--json"],
                          capture_output=True, text=True, check=False)
    try:
        doc = json.loads(done.stdout)
    except json.JSONDecodeError:
        print(f"  no dry run: {done.stderr.strip()[-300:]}", flush=True)
        return None
    return {"gpu0": doc["plan"]["memory_gb_per_gpu"][0], "memory_plan": doc["memory_plan"]}


def caps(gpu0: dict[str, Any], cap_gib: float) -> dict[str, float]:
    """Bytes per role whose sum, with each worker's overhead and the envs' EGL memory (torch's
    cap does not count them), is ``cap_gib``: the estimate's share of each role, scaled."""
    workers = gpu0["workers"]
    fixed = sum(w["overhead_gb"] for w in workers) + sum(
        w["working_gb"] for w in workers if w["role"] == "env")
    env_cap = 0.5  # GB: the env worker's own tensors (its EGL memory is outside torch)
    need = {w["role"]: w["resident_gb"] + w["working_gb"] for w in workers if w["role"] != "env"}
    scale = (cap_gib * GIB / 1e9 - fixed - env_cap) / sum(need.values())
    out = {role: gb * scale * 1e9 for role, gb in need.items()}
    out["env"] = env_cap * 1e9
    return out


def run_variant(setup: Setup, model: str, variant: str, overrides: list[str],
                cap_gib: float) -> dict[str, Any]:
    """One ``dexrl train`` of ``variant``: its steps, peak memory and the dry run's estimate."""
    plan = variant.split("-")[0]
    # one GPU: a dry run assumes 8 per node unless told
    base = ["--suite", SUITE, "--model", model, *checkpoint(setup, model),
            "--gpus-per-node", "1", "--memory-plan", plan, *overrides]
    planned = estimate(base)
    run_dir = setup.out / f"{model}-{variant}"
    env = dict(os.environ)
    hook_dir = None
    if variant.endswith("-capped") and planned is not None:
        hook_dir = tempfile.mkdtemp(prefix="dexrl-cap-")
        Path(hook_dir, "sitecustomize.py").write_text(CAP_HOOK)
        env["PYTHONPATH"] = os.pathsep.join([hook_dir, env.get("PYTHONPATH", "")])
        env["DEXRL_BENCH_CAPS"] = json.dumps(caps(planned["gpu0"], cap_gib))
        env["DEXRL_BENCH_CAP_LOG"] = str(setup.out / f"{model}-{variant}-caps.jsonl")
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        part = run_part(f"{model} {variant}", [*dexrl_command(), "train", *base, "--run-dir",
                                               str(run_dir)], setup.left(),
                        setup.out / f"{model}-{variant}.log")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    rows = step_rows(part, run_dir, 1)
    assert part.samples is not None
    peak_mib = part.samples.peaks()["peak_gpu_mib"]
    est = planned["gpu0"]["gb"] if planned else None
    result = {"variant": variant, "rc": part.rc, "wall_s": part.wall_s, "ready_s": part.ready_s,
              "steps": rows, "peak_gpu_mib": peak_mib, "estimate_gb": est,
              "dry_run": planned, "tail": part.tail[-12:]}
    if variant.endswith("-capped"):
        log = setup.out / f"{model}-{variant}-caps.jsonl"
        result["caps"] = [json.loads(line) for line in log.read_text().splitlines()] \
            if log.exists() else []
    return result


def step_s(result: dict[str, Any]) -> float | None:
    """RLinf's time/step of the last step a run made (the steady one: no checkpoint)."""
    rows = [r for r in result.get("steps", []) if r.get("step time") is not None]
    return rows[-1]["step time"] if rows else None


def report(results: dict[str, dict[str, Any]]) -> list[str]:
    """The table of one model's variants and the issue's targets."""
    lines = ["| variant | exit | peak GPU (nvidia-smi) | estimate | estimate / peak | "
             "step (RLinf time/step, last) |", "|---|---|---|---|---|---|"]
    for variant, r in results.items():
        peak = r.get("peak_gpu_mib")
        peak_gb = peak * MIB_GB if peak is not None else None
        est = r.get("estimate_gb")
        ratio = f"{est / peak_gb:.2f}" if est and peak_gb else "—"
        step = step_s(r)
        lines.append(f"| {variant} | {r.get('rc')} | "
                     f"{f'{peak / 1024:.1f} GiB' if peak is not None else '—'} | "
                     f"{f'{est:.1f} GB' if est else '—'} | {ratio} | "
                     f"{f'{step:.1f} s' if step else '—'} |")
    small, large = results.get("24gb", {}), results.get("80gb", {})
    peak = small.get("peak_gpu_mib")
    if peak is not None:
        lines.append(f"24gb peak {peak / 1024:.1f} GiB (target ≤ {TARGET_PEAK_GIB:.0f} GiB: "
                     f"{'met' if peak / 1024 <= TARGET_PEAK_GIB else 'NOT met'})")
    if step_s(small) and step_s(large):
        ratio = step_s(small) / step_s(large)
        lines.append(f"24gb step / 80gb step {ratio:.2f}× (target ≤ {TARGET_STEP_RATIO}×: "
                     f"{'met' if ratio <= TARGET_STEP_RATIO else 'NOT met'})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", default=list(RUNS), metavar="MODEL:VARIANT",
                        help="in this order (default: %(default)s); variants: "
                             + ", ".join(VARIANTS))
    parser.add_argument("--rollout-epochs", type=int, default=1)
    parser.add_argument("--episode-steps", type=int, default=80,
                        help="env steps per rollout epoch (shipped: 240)")
    parser.add_argument("--cap-gib", type=float, default=24.0)
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for everything")
    parser.add_argument("--cpu", action="store_true", help="the CPU check: tiny policies")
    parser.add_argument("--out", type=Path, default=Path("/tmp/memory-plans"))
    parser.add_argument("--ckpt-dir", type=Path, default=Path("/tmp/ckpt"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    setup = Setup(args.out, args.cpu, args.rollout_epochs, time.time() + args.budget,
                  args.ckpt_dir)
    episode = args.episode_steps if not args.cpu else 10
    overrides = [*(CPU_SETTINGS + CPU_NOT_HERE if args.cpu else SHARE + GPU_SETTINGS),
                 f"env.train.rollout_epoch={args.rollout_epochs}",
                 f"env.train.max_episode_steps={episode}",
                 f"env.train.max_steps_per_rollout_epoch={episode}",
                 "runner.max_steps=2", "runner.save_interval=-1"]
    out: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()},
                           "overrides": overrides, "models": {}, "not_run": []}
    for run in args.runs:
        model, _, variant = run.partition(":")
        if model not in ("pi0", "dm0") or variant not in VARIANTS:
            parser.error(f"{run}: not MODEL:VARIANT (pi0 or dm0; {', '.join(VARIANTS)})")
        need = RUN_S[variant] * (3 if args.cpu else 1)
        if setup.left() < need * 0.6:
            out["not_run"].append(f"{run}: {setup.left():.0f} s left, it needs about {need} s")
            print(f"[{run}] not run: {setup.left():.0f} s left", flush=True)
            continue
        got = out["models"].setdefault(model, {})
        got[variant] = run_variant(setup, model, variant, overrides, args.cap_gib)
        if args.json:
            args.json.write_text(json.dumps(out, indent=1, default=str))
    for model, got in out["models"].items():
        print(f"\n{model}:", *report(got), sep="\n", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
