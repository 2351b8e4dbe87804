"""The step forecast: its arithmetic by hand, its inverse (the fit from a measured step), what it
refuses to forecast, and what ``train --dry-run`` prints of it."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from dexrl.cli import app
from dexrl.training.calibrations import CALIBRATIONS, Calibration
from dexrl.training.forecast import (
    StepWork,
    choose,
    duration,
    fit,
    interpolate,
    step_phases,
)

runner = CliRunner()
SPATIAL_PI0 = ["--suite", "libero_spatial", "--model", "pi0"]
CAL = Calibration(
    device="test", model_type="dexbotic_pi0", env="libero", size="real", measured="today",
    basis="by hand",
    env_step_s=((1, 0.04), (8, 0.05)), reset_s=3.0,
    call_s={"eager": ((1, 0.2), (8, 0.2)), "compiled+graphed": ((1, 0.03), (8, 0.08))},
    train_sample_s=0.004, prefix_sample_s=0.006, sync_s=0.5, startup_s=60.0,
    first_step_extra_s=10.0, compile_s=100.0, save_gb_per_s=1.0)
WORK = StepWork(envs=8, stages=1, rollout_epochs=2, chunk_steps=48, actions_per_chunk=5,
                samples=768, update_epochs=4, prefix_passes=1.0)


def test_interpolation_is_piecewise_linear_flat_below_and_extended_above() -> None:
    points = ((1, 1.0), (8, 2.4), (64, 8.0))
    assert interpolate(points, 0.5) == 1.0
    assert interpolate(points, 1) == 1.0
    assert interpolate(points, 4.5) == pytest.approx(1.7)
    assert interpolate(points, 36) == pytest.approx(5.2)
    assert interpolate(points, 120) == pytest.approx(13.6)
    assert interpolate(((8, 0.3),), 64) == 0.3


def test_a_synchronous_step_is_its_phases_one_after_another() -> None:
    phases = step_phases(WORK, CAL)
    # 2 epochs x 48 chunk steps x 5 actions at 8 envs: 480 env steps of 50 ms.
    assert phases["env steps"] == pytest.approx(2 * 48 * 5 * 0.05)
    assert phases["resets"] == pytest.approx(2 * 3.0)
    # 49 calls per epoch (the last for the bootstrap value) at batch 8.
    assert phases["rollout calls"] == pytest.approx(2 * 49 * 0.2)
    assert phases["overlap"] == pytest.approx(0.0)
    assert phases["training"] == pytest.approx(768 * (4 * 0.004 + 0.006))
    assert phases["weight sync"] == 0.5


def test_stages_overlap_env_steps_with_calls_and_the_bootstrap_overlaps_training() -> None:
    staged = dataclasses.replace(WORK, stages=2, rollout_path="compiled+graphed")
    phases = step_phases(staged, CAL)
    env = 5 * interpolate(CAL.env_step_s, 4)  # one stage's 4 envs, 5 actions
    call = interpolate(CAL.call_s["compiled+graphed"], 4)
    chunk = max(2 * env, 2 * call) + min(env, call)
    assert phases["env steps"] + phases["rollout calls"] - 2 * 2 * call + phases["overlap"] \
        == pytest.approx(2 * 48 * chunk)
    assert phases["resets"] == pytest.approx(2 * 2 * 3.0)  # each stage resets in turn
    ahead = step_phases(dataclasses.replace(staged, overlap_bootstrap=True), CAL)
    assert ahead["overlap"] == pytest.approx(phases["overlap"] - 2 * 3.0)


def test_the_fit_reproduces_the_step_it_was_fitted_to() -> None:
    work = dataclasses.replace(WORK, rollout_path="compiled+graphed", envs=6)
    measured = {"env steps": 31.0, "resets": 9.0, "rollout calls": 7.5, "training": 20.0,
                "weight sync": 0.7}
    fitted = fit(work, measured, CAL, measured_on="now", basis="a run")
    again = step_phases(work, fitted)
    assert {k: again[k] for k in measured} == pytest.approx(measured)
    assert fitted.basis == "a run" and fitted.compile_s == CAL.compile_s
    assert (8, 0.05) in fitted.env_step_s  # other batch sizes keep their figures
    assert fitted.prefix_sample_s / fitted.train_sample_s == pytest.approx(
        CAL.prefix_sample_s / CAL.train_sample_s)


def test_calibrations_are_chosen_by_device_model_size_and_env() -> None:
    assert choose("NVIDIA H100 80GB HBM3", "dexbotic_pi0", 3.2e9).device == "H100"
    assert choose("NVIDIA H100 80GB HBM3", "dexbotic_dm0", 2.6e9).model_type == "dexbotic_dm0"
    assert choose("NVIDIA GeForce RTX 4090", "dexbotic_pi0", 3.2e9) is None
    assert choose("NVIDIA H100", "dexbotic_pi0", 5e4) is None  # a tiny model: not measured
    assert choose("cpu", "dexbotic_pi0", 5e4).env == "libero"
    assert choose("cpu", "dexbotic_pi0", 5e4, "reach") is None
    for cal in CALIBRATIONS:  # every figure a positive number, every entry says its basis
        assert cal.basis and cal.measured and cal.reset_s > 0 and cal.train_sample_s > 0
        assert all(y > 0 for points in cal.call_s.values() for _, y in points)


def test_durations_read_in_the_unit_that_fits() -> None:
    assert duration(0.5) == "0.5 s"
    assert duration(42) == "42 s"
    assert duration(270) == "4.5 min"
    assert duration(20 * 3600) == "20.0 h"


def _plan(*args: str) -> dict:
    result = runner.invoke(app, ["train", *args, "--dry-run", "--json"],
                           env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_dry_run_forecasts_the_shipped_run_on_the_measured_gpu(cwd) -> None:
    doc = _plan(*SPATIAL_PI0, "--gpus-per-node", "8")
    forecast = doc["forecast"]
    assert forecast["available"], forecast
    assert forecast["calibration"]["device"] == "H100"
    phases = forecast["phases_s"]
    assert forecast["step_s"] == pytest.approx(sum(phases.values()))
    assert forecast["run_s"] == pytest.approx(
        forecast["startup_s"] + forecast["first_step_extra_s"] + 300 * forecast["step_s"]
        + forecast["checkpoints_s"])
    assert 60 < forecast["step_s"] < 1200  # minutes, not seconds or hours, per step
    text = runner.invoke(app, ["train", *SPATIAL_PI0, "--gpus-per-node", "8", "--dry-run"],
                         env={"COLUMNS": "250"}).stdout
    assert "global step ≈" in text and "whole run ≈" in text and "basis:" in text


def test_faster_paths_forecast_a_shorter_step(cwd) -> None:
    plain = _plan(*SPATIAL_PI0, "+fast_paths=off")["forecast"]
    fast = _plan(*SPATIAL_PI0, "+fast_paths=gpu")["forecast"]
    assert fast["phases_s"]["rollout calls"] < plain["phases_s"]["rollout calls"]
    assert fast["phases_s"]["training"] < plain["phases_s"]["training"]  # the prefix cache
    assert fast["step_s"] < plain["step_s"]


def test_other_envs_are_not_forecast_from_libero_and_other_suites_say_so(cwd) -> None:
    reach = _plan("--suite", "reach", "--model", "pi0", "--smoke")["forecast"]
    assert not reach["available"] and "with reach on cpu" in reach["reason"]
    goal = _plan("--suite", "libero_goal", "--model", "pi0", "--smoke")["forecast"]
    assert goal["available"] and any("libero_spatial" in n for n in goal["notes"])
    spatial = _plan(*SPATIAL_PI0, "--smoke")["forecast"]["notes"]
    assert not any("libero_spatial" in n for n in spatial)


@pytest.mark.parametrize(("args", "reason"), [
    (["--mode", "async"], "synchronous steps only"),
    (["--noise", "flow_noise"], "one scored denoising step"),
    (["actor.model.dexbotic.train_expert_only=false"], "train_expert_only"),
])
def test_what_was_never_measured_is_not_forecast(cwd, args: list[str], reason: str) -> None:
    forecast = _plan(*SPATIAL_PI0, *args)["forecast"]
    assert not forecast["available"] and reason in forecast["reason"]


def test_a_config_the_model_cannot_read_gets_a_reason_not_a_failure(cwd) -> None:
    from omegaconf import open_dict

    from dexrl.config.checks import Facts
    from dexrl.config.compose import compose
    from dexrl.training.forecast import make_forecast
    from dexrl.training.plan import make_plan

    cfg = compose("libero_spatial_ppo_dexbotic_pi0")
    plan = make_plan(cfg, Facts("libero_spatial", 8))
    with open_dict(cfg):
        cfg.env.train.max_steps_per_rollout_epoch = None
    reason = make_forecast(cfg, plan, "NVIDIA H100 80GB HBM3")
    assert isinstance(reason, str) and "does not say what a step does" in reason
