"""The shipped LIBERO run at one GPU's share: trained, resumed, evaluated, and measured per phase.

On one CUDA GPU (a bare offline machine, with the archives of ``bench/gpu_bundle.py``: the
procedure is in docs/performance.md#the-shipped-libero-run-on-a-gpu)::

    python3 bench/libero_run.py --models pi0 --budget 540 --json libero-run.json --fit

and its check on a CPU (tiny random policies, ``--smoke``'s settings, real LIBERO)::

    .venv/bin/python bench/libero_run.py --cpu --json /tmp/libero-run.json --fit

The parts, per model, in ``--parts`` order (default :data:`PARTS`); a part that ``--budget``'s
seconds would not hold is skipped and named so, and one cut off by it keeps what it measured:

- ``train``: ``dexrl train --suite libero_spatial --model M --ckpt <real-size random
  checkpoint>`` at one GPU's share of the shipped run (:data:`SHARE`) with every fast path on
  (``+fast_paths=gpu``), ``--rollout-epochs`` rollout epochs per step, 2 steps and a checkpoint;
- ``plain``: the same with every fast path off (``+fast_paths=off``), the speed-up's reference;
- ``eval``: ``dexrl eval`` of the train part's checkpoint, two episodes;
- ``resume``: ``dexrl resume`` of the train part for 2 more steps at twice the rollout epochs
  (the second size: each phase's growth is measured, not assumed; its start shows the compile
  cache at work);
- ``anatomy``: RLinf's LiberoEnv alone, piece by piece (``bench/libero_anatomy.py``).

Printed, and written with ``--json``: per step, RLinf's ``time/*`` phases (env steps, resets,
rollout calls, training, weight sync), GPU busy over the step (``nvidia-smi``'s utilization,
sampled every 0.5 s), peak GPU memory of all processes, peak host memory; each part's steady
step beside dexrl's forecast of the same settings; each variant scaled to the shipped 8
rollout epochs beside the forecast of the shipped settings, and the speed-up. ``--fit`` prints
the calibration the runs give (for ``dexrl/training/calibrations.py``); ``--report JSON``
prints the tables of an earlier run again.

What changes from the shipped config, and why: :data:`SHARE` (one of the shipped 8 GPUs' envs
and global batch), fewer rollout epochs per step (time), no training videos (no ffmpeg on the
bare machine), checkpoints only where a later part needs one (disk).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
# The dexrl command of the reach runs' harness, kept out of the package in tests/helpers/.
sys.path.insert(0, str(BENCH.parent / "tests"))
from helpers.reach_runs import dexrl_command  # noqa: E402

SUITE = "libero_spatial"
SHIPPED_EPOCHS = 8
# One GPU's share of the shipped run (64 envs and a global batch of 1024 over 8 GPUs): 8 envs,
# and a global batch of 128 so that each optimizer step takes the same 4 micro-batches of 32.
SHARE = ("env.train.total_num_envs=8", "actor.global_batch_size=128")
# The bare machine has no ffmpeg for RLinf's training videos (imageio writes them as MP4).
GPU_SETTINGS = ("env.train.video_cfg.save_video=false",)
# The CPU check: --smoke's settings (fp32, the bucket syncer, 128² cameras, micro-batch 1),
# 2 envs and episodes of 10 steps; the GPU-only fast paths off.
CPU_SETTINGS = ("env.train.total_num_envs=2", "env.train.max_episode_steps=10",
                "env.train.max_steps_per_rollout_epoch=10")
CPU_NOT_HERE = ("rollout.enable_torch_compile=false", "rollout.enable_cuda_graph=false")
VARIANTS = {"fast": ("+fast_paths=gpu",), "plain": ("+fast_paths=off",)}
PHASES = {  # label -> RLinf's metric
    "step time": "time/step",
    "env steps": "time/env/env_interact_step",
    "resets": "time/env/env/bootstrap_step",
    "rollout calls": "time/rollout/predict",
    "rollout phase": "time/generate_rollouts",
    "training": "time/actor/run_training",
    "weight sync": "time/sync_weights",
    "advantages": "time/cal_adv_and_returns",
}
GROWS = ("env steps", "rollout calls", "other rollout", "training")  # with the rollout epochs
STEP_LINE = re.compile(r"^step (\d+)/(\d+)")
READY_LINE = re.compile(r"^workers ready after (\d+) s")
# The parts in their default order (the speed-up's reference right after the fast run), and
# about how long each takes on one H100 (the CPU check: 3x).
PARTS = ("train", "plain", "eval", "resume", "anatomy")
ESTIMATE_S = {"train": 300, "plain": 170, "eval": 90, "resume": 200, "anatomy": 70}


# ---------------------------------------------------------------- sampling
@dataclass
class Samples:
    """(time, GPU memory MiB, GPU utilization %, host memory used GB) every half second."""

    rows: list[tuple[float, float | None, float | None, float]] = field(default_factory=list)

    def window(self, start: float, end: float) -> list[tuple[float, float | None, float | None,
                                                             float]]:
        return [r for r in self.rows if start <= r[0] <= end]

    def peaks(self) -> dict[str, float | None]:
        gpu = [r[1] for r in self.rows if r[1] is not None]
        return {"peak_gpu_mib": max(gpu) if gpu else None,
                "peak_host_gb": max((r[3] for r in self.rows), default=None)}

    def busy(self, start: float, end: float) -> float | None:
        """Mean GPU utilization (%) between two times; None without nvidia-smi samples."""
        util = [r[2] for r in self.window(start, end) if r[2] is not None]
        return statistics.fmean(util) if util else None


def host_used_gb() -> float:
    """Memory in use on this machine (MemTotal - MemAvailable), GB."""
    info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    kib = int(info["MemTotal"].split()[0]) - int(info["MemAvailable"].split()[0])
    return kib * 1024 / 1e9


class Sampler:
    """Samples GPU memory and utilization (``nvidia-smi``) and host memory while a part runs."""

    def __enter__(self) -> Samples:
        self.samples, self.stop = Samples(), threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self.samples

    def _loop(self) -> None:
        smi = shutil.which("nvidia-smi")
        while not self.stop.is_set():
            mem = util = None
            if smi:
                out = subprocess.run([smi, "--query-gpu=memory.used,utilization.gpu",
                                      "--format=csv,noheader,nounits"], capture_output=True,
                                     text=True, check=False).stdout.split("\n")[0]
                parts = [p.strip() for p in out.split(",")]
                if len(parts) == 2 and all(p.replace(".", "").isdigit() for p in parts):
                    mem, util = float(parts[0]), float(parts[1])
            self.samples.rows.append((time.time(), mem, util, host_used_gb()))
            self.stop.wait(0.5)

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


# ---------------------------------------------------------------- running the CLI
@dataclass
class Part:
    """One command's run: its output lines with their arrival times, and how it ended."""

    name: str
    command: list[str]
    rc: int | None = None
    wall_s: float = 0.0
    ready_s: float | None = None
    step_times: dict[int, float] = field(default_factory=dict)  # step -> wall time at its line
    started: float = 0.0
    tail: list[str] = field(default_factory=list)
    samples: Samples | None = None


def run_part(name: str, command: list[str], timeout_s: float, log: Path) -> Part:
    """Run ``command``, time-stamping its step lines; stopped after ``timeout_s`` (rc None)."""
    part = Part(name, command)
    print(f"[{name}] {' '.join(command)}", flush=True)
    with Sampler() as samples, log.open("w") as out:
        part.started = time.time()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env={**os.environ, "COLUMNS": "250"})
        killer = threading.Timer(timeout_s, proc.kill)
        killer.start()
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            line = line.rstrip()
            part.tail = (part.tail + [line])[-40:]
            now = time.time()
            if (m := READY_LINE.match(line)) is not None:
                part.ready_s = float(m.group(1))
                part.step_times[0] = now
            elif (m := STEP_LINE.match(line)) is not None:
                part.step_times[int(m.group(1))] = now
            if line.startswith(("step ", "workers ready", "error:", "hint:", "  checkpoint")):
                print(f"  {line[:200]}", flush=True)
        proc.wait()
        killed = not killer.is_alive()
        killer.cancel()
    part.rc = None if killed else proc.returncode
    part.wall_s = time.time() - part.started
    part.samples = samples
    if part.rc not in (0,):
        print(f"  [{name}] {'stopped by the budget' if killed else f'exit {part.rc}'}; "
              f"last lines in {log}", flush=True)
    return part


def forecast_of(args: list[str]) -> dict[str, Any] | None:
    """dexrl's forecast (``train --dry-run --json``) of the run ``args`` describe."""
    done = subprocess.run([*dexrl_command(), "train", *args, "--dry-run", "--json"],
                          capture_output=True, text=True, check=False)
    try:
        return json.loads(done.stdout).get("forecast")
    except json.JSONDecodeError:
        return None


# ---------------------------------------------------------------- reading a run
def step_rows(part: Part, run_dir: Path, epochs: int) -> list[dict[str, Any]]:
    """One row per global step ``part`` ran: its phases (RLinf's metrics), GPU busy over the
    step's window, and the rollout epochs it ran."""
    from dexrl.curves import read_run

    try:
        series = read_run(run_dir).series
    except Exception as exc:  # a part cut off before its first step has no events
        print(f"  no metrics in {run_dir}: {exc}", flush=True)
        return []
    rows = []
    for step in sorted(s for s in part.step_times if s > 0):
        row: dict[str, Any] = {"part": part.name, "step": step, "rollout_epochs": epochs}
        for label, tag in PHASES.items():
            steps, values = series.get(tag, ([], []))
            row[label] = dict(zip(steps, values, strict=True)).get(step)
        start = max((t for s, t in part.step_times.items() if s < step), default=part.started)
        assert part.samples is not None
        busy = part.samples.busy(start, part.step_times[step])
        row["gpu_busy_pct"] = busy
        rows.append(row)
    return rows


def per_epoch_reset(rows: list[dict[str, Any]], overlap: bool) -> float | None:
    """Seconds of one rollout epoch's resets. Each row is a run's last step: with the bootstrap
    overlap its first epoch's resets ran during the step before, so it counted one fewer."""
    for row in sorted(rows, key=lambda r: -r["rollout_epochs"]):
        counted = row["rollout_epochs"] - (1 if overlap else 0)
        if counted > 0 and row["resets"] is not None:
            return row["resets"] / counted
    return None


def scaled(rows: list[dict[str, Any]], target: int, overlap: bool,
           reset_s: float | None = None) -> dict[str, float] | None:
    """A steady step's phases at ``target`` rollout epochs, from the last step of each size a
    variant ran (its first step pays the start-up, its last writes a checkpoint, so the step is
    the sum of its phases, not RLinf's ``time/step``): env steps, rollout calls, training and
    what else the rollout phase spends grow along the line through two sizes (in proportion
    with one); the resets are the epochs' resets (with the bootstrap overlap, one epoch's run
    during training and add only what training does not cover); the weight sync is fixed.

    Args:
        rows: The last step of each size (``rollout_epochs``), with the :data:`PHASES`.
        target: Rollout epochs per step.
        overlap: The variant runs with ``runner.overlap_env_bootstrap``.
        reset_s: One epoch's resets where no row tells (bench/libero_anatomy.py's).
    """
    steady = {row["rollout_epochs"]: row for row in rows}
    if not steady:
        return None
    reset = per_epoch_reset(list(steady.values()), overlap)
    reset = reset_s if reset is None else reset
    reset = reset or 0.0
    sizes = sorted(steady)
    values: dict[int, dict[str, float]] = {}
    for size, row in steady.items():
        v = {k: row[k] or 0.0 for k in PHASES}
        counted = size - (1 if overlap else 0)
        v["other rollout"] = v["rollout phase"] - v["env steps"] - v["rollout calls"] - \
            counted * reset
        values[size] = v
    out = {}
    for label in GROWS:
        if len(sizes) >= 2:
            (e1, e2) = sizes[0], sizes[-1]
            v1, v2 = values[e1][label], values[e2][label]
            out[label] = v1 + (v2 - v1) / (e2 - e1) * (target - e1)
        else:
            out[label] = values[sizes[0]][label] * target / sizes[0]
    last = values[sizes[-1]]
    out["resets"] = (target - (1 if overlap else 0)) * reset
    out["hidden reset excess"] = max(0.0, reset - out["training"]) if overlap else 0.0
    out["weight sync"], out["advantages"] = last["weight sync"], last["advantages"]
    out["rollout phase"] = out["env steps"] + out["rollout calls"] + out["other rollout"] + \
        out["resets"]
    out["step"] = (out["rollout phase"] + out["training"] + out["weight sync"]
                   + out["advantages"] + out["hidden reset excess"])
    return out


# ---------------------------------------------------------------- the parts
@dataclass
class Setup:
    """Where and how the runs go."""

    out: Path
    cpu: bool
    epochs: int
    budget_end: float
    ckpt_dir: Path
    fast_extra: list[str] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)

    def left(self) -> float:
        return self.budget_end - time.time()

    def allows(self, part: str) -> bool:
        need = ESTIMATE_S[part] * (3 if self.cpu else 1)
        if self.left() < need * 0.5:
            self.results.setdefault("not_run", []).append(
                f"{part}: {self.left():.0f} s of --budget left, it needs about {need} s")
            print(f"[{part}] not run: {self.left():.0f} s of --budget left", flush=True)
            return False
        return True


def checkpoint(setup: Setup, model: str) -> list[str]:
    """The policy flags of ``model``'s runs: a real-size random checkpoint (written once) on a
    GPU, ``--smoke``'s tiny one on the CPU."""
    if setup.cpu:
        return ["--smoke"]
    folder = setup.ckpt_dir / model
    if not (folder / "config.json").exists():
        start = time.time()
        subprocess.run([sys.executable, str(BENCH / "random_checkpoint.py"), str(folder),
                        "--model", model], check=True)
        setup.results.setdefault("checkpoint_write_s", {})[model] = time.time() - start
    return ["--ckpt", str(folder)]


def settings(setup: Setup, variant: str) -> list[str]:
    """The overrides of a training run of ``variant``."""
    extra = [*CPU_SETTINGS, *CPU_NOT_HERE] if setup.cpu else [*SHARE, *GPU_SETTINGS]
    more = setup.fast_extra if variant == "fast" else []
    return [*VARIANTS[variant], *extra, f"env.train.rollout_epoch={setup.epochs}", *more]


def train_part(setup: Setup, model: str, variant: str, name: str) -> dict[str, Any]:
    """``dexrl train`` for 2 steps; the fast run writes a checkpoint at the end (what the
    resume continues from and the eval evaluates), the plain one none (28 GB each for π0 at
    real size, on a 64 GB disk)."""
    run_dir = setup.out / f"{model}-{variant}"
    shutil.rmtree(run_dir, ignore_errors=True)
    base = ["--suite", SUITE, "--model", model, *checkpoint(setup, model)]
    save = 2 if variant == "fast" else -1
    overrides = [*settings(setup, variant), "runner.max_steps=2", f"runner.save_interval={save}"]
    forecast = forecast_of([*base, *overrides])
    shipped = forecast_of([*base, *overrides, f"env.train.rollout_epoch={SHIPPED_EPOCHS}"])
    part = run_part(name, [*dexrl_command(), "train", *base, "--run-dir", str(run_dir),
                           *overrides], setup.left(), setup.out / f"{name}.log")
    return {**record(part, run_dir, setup.epochs, forecast), "forecast_shipped": shipped}


def resume_part(setup: Setup, model: str) -> dict[str, Any]:
    """``dexrl resume`` of the fast run for 2 more steps at twice the rollout epochs (no new
    checkpoint: the disk)."""
    run_dir = setup.out / f"{model}-fast"
    epochs = setup.epochs * 2
    overrides = [f"env.train.rollout_epoch={epochs}", "runner.max_steps=4",
                 "runner.save_interval=-1"]
    base = ["--suite", SUITE, "--model", model, *checkpoint(setup, model)]
    forecast = forecast_of([*base, *settings(setup, "fast"), *overrides])
    part = run_part(f"{model} resume", [*dexrl_command(), "resume", str(run_dir),
                                        "--allow-changes", *overrides], setup.left(),
                    setup.out / f"{model}-resume.log")
    return record(part, run_dir, epochs, forecast)


def eval_part(setup: Setup, model: str) -> dict[str, Any]:
    """``dexrl eval`` of the fast run's checkpoint: tasks 0 and 1, one episode each."""
    out = setup.out / f"{model}-eval"
    shutil.rmtree(out, ignore_errors=True)
    part = run_part(f"{model} eval", [
        *dexrl_command(), "eval", "--ckpt", str(setup.out / f"{model}-fast"), "--suite", SUITE,
        "--tasks", "0,1", "--episodes-per-task", "1", "--num-envs", "2", "--out", str(out),
        *(["--max-episode-steps", "20"] if setup.cpu else [])], setup.left(),
        setup.out / f"{model}-eval.log")
    result: dict[str, Any] = {"rc": part.rc, "wall_s": part.wall_s,
                              **(part.samples.peaks() if part.samples else {})}
    results = out / "results.json"
    if results.exists():
        overall = json.loads(results.read_text())["overall"]
        result.update(episodes=overall["episodes"], success=overall["success_rate"],
                      mean_length=overall["mean_length"])
    return result


def record(part: Part, run_dir: Path, epochs: int, forecast: dict[str, Any] | None
           ) -> dict[str, Any]:
    """What a training part leaves in the results (with the work of one of its steps, read
    from the config it ran, for ``--fit``)."""
    rows = step_rows(part, run_dir, epochs)
    work = None
    if (run_dir / "config.yaml").exists():
        work = dataclasses.asdict(work_of_run(run_dir)[0])
    return {"rc": part.rc, "wall_s": part.wall_s, "workers_ready_s": part.ready_s,
            "rows": rows, "forecast": forecast, "work": work,
            **(part.samples.peaks() if part.samples else {}),
            "ended": None if part.rc == 0 else part.tail[-12:]}


def work_of_run(run_dir: Path) -> tuple[Any, Any]:
    """(StepWork, Plan) of the config a run folder holds."""
    from omegaconf import OmegaConf

    from dexrl.config.checks import Facts
    from dexrl.training.forecast import work_of
    from dexrl.training.plan import make_plan

    cfg = OmegaConf.load(run_dir / "config.yaml")
    plan = make_plan(cfg, Facts(SUITE, 1))
    return work_of(cfg, plan), plan


def print_fit(results: dict[str, Any], device: str) -> None:
    """The calibration each model's fast run gives (for dexrl/training/calibrations.py): its
    steady step (the train part's last) fitted by dexrl.training.forecast.fit."""
    from dexrl.training.calibrations import CALIBRATIONS
    from dexrl.training.forecast import StepWork, choose, fit

    for model, parts in results.get("models", {}).items():
        fast = parts.get("fast") or {}
        rows, work = fast.get("rows") or [], fast.get("work")
        if len(rows) < 2 or work is None:
            print(f"\n{model}: no steady step to fit (the train part needs 2 steps)")
            continue
        model_type = f"dexbotic_{model}"
        steady, first = rows[-1], rows[0]
        fast_rows = last_rows(parts, ("fast", "resume"))
        reset = per_epoch_reset(fast_rows, work["overlap_bootstrap"]) or anatomy_reset(results)
        base = choose(device, model_type, 0 if device == "cpu" else 1e10)
        if base is None:  # a device measured for the first time: no other figures carry over
            template = next(c for c in CALIBRATIONS if c.model_type == model_type)
            base = dataclasses.replace(template, device="cpu" if device == "cpu" else device,
                                       size="tiny" if device == "cpu" else "real",
                                       env_step_s=(), call_s={})
        cal = fit(StepWork(**work), {k: steady[k] or 0.0 for k in PHASES}, base,
            measured_on=time.strftime("%Y-%m-%d"),
            basis=f"bench/libero_run.py, one whole run on {results['device']}",
            startup_s=fast.get("workers_ready_s"),
            first_step_extra_s=max(0.0, (first["step time"] or 0.0) - (fast.get(
                "steady_step_s") or 0.0)),
            reset_s=reset)
        print(f"\n{model}: the calibration this run gives:\n{cal!r}")


def anatomy_part(setup: Setup) -> dict[str, Any] | None:
    """LIBERO alone, piece by piece (bench/libero_anatomy.py), at the run's env count."""
    out = setup.out / "anatomy.json"
    envs = "2" if setup.cpu else "8"
    part = run_part("anatomy", [sys.executable, str(BENCH / "libero_anatomy.py"), "--envs",
                                envs, "--suite", SUITE, "--chunks", "2" if setup.cpu else "10",
                                "--json", str(out)], setup.left(), setup.out / "anatomy.log")
    return json.loads(out.read_text()) if out.exists() and part.rc == 0 else {
        "rc": part.rc, "ended": part.tail[-12:]}


# ---------------------------------------------------------------- the table
def fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def last_rows(parts: dict[str, Any], names: tuple[str, ...]) -> list[dict[str, Any]]:
    """The last step of each named part (the steady step of its size)."""
    return [data["rows"][-1] for n in names if (data := parts.get(n)) and data.get("rows")]


def overlap_of(data: dict[str, Any] | None) -> bool:
    return bool(((data or {}).get("work") or {}).get("overlap_bootstrap"))


def anatomy_reset(results: dict[str, Any]) -> float | None:
    return ((results.get("anatomy") or {}).get("seconds") or {}).get("reset, whole (RLinf)")


def print_table(results: dict[str, Any]) -> None:
    """Every measured step; each part's steady step against its forecast; each variant scaled
    to the shipped rollout epochs against the forecast of the shipped epochs."""
    cols = ("env steps", "resets", "rollout calls", "training", "weight sync")
    print("\n| model | run | step | epochs | RLinf time/step s | " + " | ".join(
        f"{c} s" for c in cols) + " | GPU busy | peak GPU MiB | peak host GB |")
    print("|" + "---|" * (len(cols) + 8))
    for model, parts in results.get("models", {}).items():
        for name in ("fast", "resume", "plain"):
            data = parts.get(name) or {}
            for row in data.get("rows", []):
                print(f"| {model} | {name} | {row['step']} | {row['rollout_epochs']} | "
                      f"{fmt(row['step time'])} | " + " | ".join(fmt(row[c]) for c in cols)
                      + f" | {fmt(row['gpu_busy_pct'], '.0f')} % | "
                      f"{fmt(data.get('peak_gpu_mib'), '.0f')} | "
                      f"{fmt(data.get('peak_host_gb'))} |")
    reset = anatomy_reset(results)
    print("\nSteady step (phases of the last step, its checkpoint write left out) against "
          "dexrl's forecast of the same settings:")
    for model, parts in results.get("models", {}).items():
        for name in ("fast", "resume", "plain"):
            data = parts.get(name) or {}
            if not data.get("rows"):
                continue
            row = data["rows"][-1]
            variant = ("fast", "resume") if name != "plain" else ("plain",)
            epoch_reset = per_epoch_reset(last_rows(parts, variant), overlap_of(data)) or reset
            est = scaled([row], row["rollout_epochs"], overlap_of(data), epoch_reset)
            fc = (data.get("forecast") or {}).get("step_s")
            data["steady_step_s"] = est["step"] if est else None
            ratio = f"{fc / est['step']:.2f}" if fc and est else "-"
            write = None
            if est and name == "fast" and row["step time"] is not None:  # it saved at the end
                write = row["step time"] - (est["step"] - est["hidden reset excess"])
                data["checkpoint_write_s"] = write
            print(f"  {model} {name} ({row['rollout_epochs']} epoch(s)): measured "
                  f"{fmt(data['steady_step_s'])} s, forecast {fmt(fc)} s (forecast/measured "
                  f"{ratio}); workers ready after {fmt(data.get('workers_ready_s'), '.0f')} s"
                  + (f"; checkpoint write ≈{write:.1f} s" if write is not None else ""))
    for model, parts in results.get("models", {}).items():
        if (ev := parts.get("eval")) is not None:
            print(f"  {model} eval: exit {ev.get('rc')}, {fmt(ev.get('episodes'), 'd')} "
                  f"episode(s), success {fmt(ev.get('success'), '.2f')}, "
                  f"{fmt(ev.get('wall_s'), '.0f')} s")
    print(f"\nScaled to the shipped {SHIPPED_EPOCHS} rollout epochs (one GPU's share):")
    for model, parts in results.get("models", {}).items():
        for variant, names in (("fast", ("fast", "resume")), ("plain", ("plain",))):
            est = scaled(last_rows(parts, names), SHIPPED_EPOCHS, overlap_of(parts.get(variant)),
                         reset)
            if est is None:
                continue
            parts.setdefault("scaled", {})[variant] = est
            fc = ((parts.get(variant) or {}).get("forecast_shipped") or {}).get("step_s")
            print(f"  {model} {variant}: step {est['step']:.0f} s ("
                  + ", ".join(f"{c} {est[c]:.0f} s" for c in cols)
                  + f"); forecast {fmt(fc, '.0f')} s"
                  + (f" (forecast/measured {fc / est['step']:.2f})" if fc else ""))
        both = parts.get("scaled", {})
        if "fast" in both and "plain" in both:
            parts["speedup"] = both["plain"]["step"] / both["fast"]["step"]
            print(f"  {model}: every fast path on is {parts['speedup']:.2f}x faster than every "
                  "fast path off")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["pi0"], choices=("pi0", "dm0"))
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS,
                        help="what runs, in this order (default: %(default)s)")
    parser.add_argument("--keep-checkpoints", action="store_true",
                        help="keep each model's checkpoints after its parts (default: removed, "
                             "for the next model's disk)")
    parser.add_argument("--rollout-epochs", type=int, default=1,
                        help="per step in the first size (the resume runs twice as many)")
    parser.add_argument("--budget", type=float, default=3600.0, help="seconds for everything")
    parser.add_argument("--cpu", action="store_true", help="the CPU check: tiny policies")
    parser.add_argument("--out", type=Path, default=Path("/tmp/libero-run"))
    parser.add_argument("--ckpt-dir", type=Path, default=Path("/tmp/ckpt"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--fit", action="store_true", help="print the calibration the runs give")
    parser.add_argument("--report", type=Path, default=None, metavar="JSON",
                        help="print the tables of an earlier run's --json again; run nothing")
    parser.add_argument("--fast-extra", nargs="*", default=[], metavar="KEY=VALUE",
                        help="more overrides for the fast runs (e.g. "
                             "rollout.pipeline_stage_num=2)")
    args = parser.parse_args()
    if args.report:
        res = json.loads(args.report.read_text())
        print_table(res)
        if args.fit:
            print_fit(res, "cpu" if res["device"].startswith("CPU") else res["device"])
        return
    began = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    setup = Setup(args.out, args.cpu, args.rollout_epochs, began + args.budget, args.ckpt_dir,
                  args.fast_extra)
    res = setup.results
    res.update(device=device_line(), args={k: str(v) for k, v in vars(args).items()},
               share=list(SHARE), settings=list(CPU_SETTINGS if args.cpu else GPU_SETTINGS),
               models={})
    for model in args.models:
        got = res["models"].setdefault(model, {})
        for name in args.parts:
            if name == "anatomy" and "anatomy" in res or not setup.allows(name):
                continue
            trained = (got.get("fast") or {}).get("rc") == 0
            if name == "anatomy":
                res["anatomy"] = anatomy_part(setup)
            elif name == "train":
                got["fast"] = train_part(setup, model, "fast", f"{model} fast")
            elif name == "resume" and trained:
                got["resume"] = resume_part(setup, model)
            elif name == "eval" and trained:
                got["eval"] = eval_part(setup, model)
            elif name == "plain":
                got["plain"] = train_part(setup, model, "plain", f"{model} plain")
            save(args.json, res)
        if not args.keep_checkpoints:
            for run in setup.out.glob(f"{model}-*/checkpoints"):
                shutil.rmtree(run, ignore_errors=True)
    print_table(res)
    if args.fit:
        from dexrl.training.forecast import device_kind

        print_fit(res, "cpu" if args.cpu else device_kind(False)[0])
    res["wall_s"] = time.time() - began
    save(args.json, res)


def device_line() -> str:
    """The GPU (nvidia-smi) or the CPU, and torch's version."""
    import torch

    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, {os.cpu_count()} CPUs"
    return f"CPU only, torch {torch.__version__}, {os.cpu_count()} CPUs"


def save(path: Path | None, results: dict[str, Any]) -> None:
    """Write the results so far (a call cut off keeps what it measured)."""
    if path:
        path.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
