"""The measured figures the step forecast (:mod:`dexrl.training.forecast`) is built from, per
device kind and policy, each with what measured it and when.

``bench/libero_run.py`` prints a new entry fitted to a whole run's phases (``--fit``); where an
entry still comes from parts measured apart, its ``basis`` says so. Sources and method:
docs/performance.md#the-step-forecast.
"""

from __future__ import annotations

from dataclasses import dataclass

Points = tuple[tuple[float, float], ...]  # (x, seconds), x ascending


@dataclass(frozen=True)
class Calibration:
    """Seconds of the units of work a global step is made of, on one device for one policy.

    Attributes:
        device: Matched in the GPU's name (``H100``), or ``cpu``.
        model_type: The policy (``dexbotic_pi0``).
        env: The env it stepped: RLinf's ``env_type`` (``libero``), or a dexrl task's name.
        size: ``real`` or ``tiny`` (``--smoke``'s random checkpoints).
        measured: When.
        basis: What measured it, in one line.
        env_step_s: (envs stepping together on one GPU, seconds per env step of all of them).
        reset_s: One group of envs reset together (RLinf's LiberoEnv.reset: the scene, its init
            state, the settle steps).
        call_s: Rollout path -> (batch, seconds per rollout call), at ``denoise_steps``.
        train_sample_s: One sample's forward and backward in one PPO epoch, prefix cached.
        prefix_sample_s: One sample's frozen-prefix pass.
        sync_s: One weight sync, actor to rollout.
        startup_s: Command start to the first step (Ray, workers, both model loads).
        first_step_extra_s: What the first step adds (env processes, first scene builds).
        compile_s: Compiling and capturing the rollout at one batch size, cold cache.
        save_gb_per_s: Checkpoint write rate.
        denoise_steps: The denoising steps the rollout calls ran.
        attention: The attention the calls and training ran (``eager`` or ``sdpa``).
    """

    device: str
    model_type: str
    env: str
    size: str
    measured: str
    basis: str
    env_step_s: Points
    reset_s: float
    call_s: dict[str, Points]
    train_sample_s: float
    prefix_sample_s: float
    sync_s: float
    startup_s: float
    first_step_extra_s: float
    compile_s: float
    save_gb_per_s: float
    denoise_steps: int = 4
    attention: str = "eager"


# LIBERO on one H100 machine (16 cores), zero actions, two 256² cameras, one process per env:
# 1 env ≈ 46 ms a step (median 37.6–54.9), 8 envs 156.6 steps/s together, 16 envs 255.1
# (shared/gpu/libero.md); a reset with its init state 1.6–5.1 s, plus RLinf's settle steps.
_H100_ENV = ((1, 0.046), (8, 8 / 156.6), (16, 16 / 255.1))
_H100_PARTS = ("parts measured apart on H100s, not yet a whole step "
               "(docs/performance.md#the-step-forecast); checkpoint writes assumed at 1 GB/s")

CALIBRATIONS: tuple[Calibration, ...] = (
    Calibration(
        device="H100", model_type="dexbotic_pi0", env="libero", size="real", measured="2026-11",
        basis=_H100_PARTS, env_step_s=_H100_ENV, reset_s=4.0,
        # docs/performance.md: eager 177–226 ms at batches 1 and 8 over three sessions (median
        # 193), 724 ms at 64; compiled+graphed 29–37 ms at 1, 77–79 ms at 8.
        call_s={"eager": ((1, 0.193), (8, 0.193), (64, 0.724)),
                "compiled": ((1, 0.064), (8, 0.087), (64, 0.518)),
                "graphed": ((1, 0.041), (8, 0.101), (64, 0.605)),
                "compiled+graphed": ((1, 0.033), (8, 0.078))},
        # A micro-batch of 32 over 4 epochs: 336.3 ms recomputing the prefix, 169.8 ms with the
        # cache -> the prefix 222 ms, the rest 114 ms per 32 samples.
        train_sample_s=0.114 / 32, prefix_sample_s=0.222 / 32,
        sync_s=0.5, startup_s=70.0, first_step_extra_s=20.0, compile_s=120.0,
        save_gb_per_s=1.0),
    Calibration(
        device="H100", model_type="dexbotic_dm0", env="libero", size="real", measured="2026-11",
        basis=_H100_PARTS + "; DM0's weight sync and start-up taken as π0's",
        env_step_s=_H100_ENV, reset_s=4.0,
        # docs/performance.md: eager 205–368 ms at 1 (two sessions), 417–424 at 8, 2.06–2.26 s
        # at 64; graphed 81 / 283–292 ms; compiled 215 ms at 8, 1.44 s at 64; compiled+graphed
        # 61 ms at 1 (at 8 not measured: compiled's 215 ms taken).
        call_s={"eager": ((1, 0.286), (8, 0.420), (64, 2.132)),
                "compiled": ((8, 0.215), (64, 1.437)),
                "graphed": ((1, 0.081), (8, 0.287)),
                "compiled+graphed": ((1, 0.061), (8, 0.215))},
        # 1,023 ms recomputing, 385 ms cached -> the prefix 851 ms, the rest 172 ms per 32.
        train_sample_s=0.172 / 32, prefix_sample_s=0.851 / 32,
        sync_s=0.5, startup_s=70.0, first_step_extra_s=20.0, compile_s=205.0,
        save_gb_per_s=1.0),
    # --smoke's tiny random policies on this project's 2-core CPU machines (Mesa's llvmpipe
    # renders LIBERO): `bench/libero_run.py --cpu --fit` in a Python holding only torch, numpy,
    # numba, OpenCV, scipy and the bundles of bench/gpu_bundle.py; 2 envs, episodes of 10 steps,
    # 1 and 2 rollout epochs. Compilation: the CPU reach run's first rollout (docs/performance.md).
    Calibration(
        device="cpu", model_type="dexbotic_pi0", env="libero", size="tiny", measured="2026-11-27",
        basis="bench/libero_run.py --cpu, whole runs on a 2-core CPU", env_step_s=((2, 0.2315),),
        reset_s=8.91, call_s={"eager": ((2, 0.0149),)}, train_sample_s=0.0334,
        prefix_sample_s=0.0651, sync_s=0.29, startup_s=16.0, first_step_extra_s=31.1,
        compile_s=126.0, save_gb_per_s=1.0, attention="sdpa"),
    Calibration(
        device="cpu", model_type="dexbotic_dm0", env="libero", size="tiny", measured="2026-11-27",
        basis="bench/libero_run.py --cpu, whole runs on a 2-core CPU (compilation: π0's)",
        env_step_s=((2, 0.2304),), reset_s=8.73, call_s={"eager": ((2, 0.0114),)},
        train_sample_s=0.0160, prefix_sample_s=0.0792, sync_s=0.30, startup_s=27.0,
        first_step_extra_s=48.2, compile_s=126.0, save_gb_per_s=1.0, attention="sdpa"),
)
