"""Issue 33's faults and a dead worker in an async PPO run (``--mode async``), through the real
command and RLinf's async runner: the same lines, exit codes and run folders as a synchronous run
(about 2–4 minutes each)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from helpers.fault_run import ctrl_c_twice, start, worker_pids

pytestmark = pytest.mark.slow
STARTUP_S = 400  # Ray and the workers on a busy 2-core machine
ASYNC = ["train", "--suite", "reach", "--model", "pi0", "--smoke", "--mode", "async"]


def _errors(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("error:")]


def test_a_diverged_async_run_stops_with_one_line(tmp_path: Path) -> None:
    run = start(tmp_path / "run", "runner.max_steps=6", "runner.save_interval=1",
                "actor.optim.lr=1e12", "actor.optim.value_lr=1e12", args=ASYNC)
    code = run.finish(STARTUP_S + 300)
    errors = _errors(run.stderr)
    assert code == 2, run.stderr
    assert len(errors) == 1 and "[training-diverged]" in errors[0], run.stderr
    assert "Traceback" not in "".join(run.stderr)
    assert run.state()["status"] == "failed"
    assert run.complete_steps() == []


def test_ctrl_c_twice_stops_an_async_run_resumably(tmp_path: Path) -> None:
    run = start(tmp_path / "run", "runner.max_steps=20", "runner.save_interval=1", args=ASYNC)
    # RLinf's async runner prints a step before it saves it: wait for step 2's checkpoint.
    assert run.wait_for("checkpoints/global_step_2", STARTUP_S + 120), run.stderr
    ctrl_c_twice(run)
    code = run.finish(90)
    assert code == 130, run.stderr
    assert run.state()["status"] == "interrupted"
    assert _errors(run.stderr) == [] and "Traceback" not in "".join(run.stderr)
    complete = run.complete_steps()
    assert complete and complete[-1] >= 2
    for step in run.all_steps():
        assert step in complete or step > complete[-1]


def test_a_dead_async_env_worker_ends_the_run_with_its_name(tmp_path: Path) -> None:
    run = start(tmp_path / "run", "runner.max_steps=30", "runner.save_interval=1", args=ASYNC)
    assert run.wait_for("step 1/", STARTUP_S + 120), run.stderr
    pids = worker_pids(run.proc.pid, "DexrlAsyncEnv")
    assert pids, "no DexrlAsyncEnv process"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    started = time.monotonic()
    code = run.finish(240)
    errors = _errors(run.stderr)
    assert code == 2, run.stderr
    assert len(errors) == 1 and "DexrlAsyncEnv" in errors[0], run.stderr
    assert "Traceback" not in "".join(run.stderr)
    assert time.monotonic() - started < 180
    assert run.state()["status"] == "failed"
