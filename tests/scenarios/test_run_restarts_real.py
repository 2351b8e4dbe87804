"""A day-two failure through the real command, RLinf and Ray on the CPU (reach smoke runs, a few
minutes each): a worker killed mid-step, with --max-restarts (the run restarts itself and
finishes, its curve whole) and without (one line naming the worker), while a second run on the
same machine goes on untouched (each run asks only its own Ray)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from helpers.fault_run import REACH, start, worker_pids

from dexrl.curves import _scalars, event_files
from dexrl.runs.layout import LOG_FILE

pytestmark = pytest.mark.slow
STARTUP_S = 400  # Ray and the workers on a busy 2-core machine


def _errors(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("error:")]


def _kill_env_workers(root: int) -> list[int]:
    pids = worker_pids(root, "DexrlEnv")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return pids


def _logged_steps(run_dir: Path, tag: str = "env/return") -> list[int]:
    """Every TensorBoard step ``tag`` was logged at, over all the run's event files (repeats
    kept: a step logged twice would show twice)."""
    return sorted(step for path in event_files(run_dir) for t, step, _ in _scalars(path)
                  if t == tag)


def test_a_run_whose_worker_was_killed_restarts_and_continues_its_curve(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEXRL_RESTART_BACKOFF_S", "1")
    run = start(tmp_path / "run", "runner.max_steps=4", "runner.save_interval=1",
                args=[*REACH, "--max-restarts", "1"])
    assert run.wait_for("step 2/", STARTUP_S + 120), run.stderr
    assert _kill_env_workers(run.proc.pid), "no DexrlEnv process"
    code = run.finish(2 * STARTUP_S + 300)
    text = "".join(run.stderr)
    assert code == 0, text
    restarts = run.state()["restarts"]
    assert [r["after"] for r in restarts] == ["training-worker-died"], restarts
    assert restarts[0]["from_step"] >= 2
    assert "Restart 1 of 1" in text and "[training-worker-died]" in text
    assert "actorDiedErrorContext" not in text and "Traceback" not in text
    assert run.state()["status"] == "finished" and run.complete_steps()[-1] == 4
    assert _logged_steps(run.run_dir) == [0, 1, 2, 3]  # global steps 1-4, once each
    assert "Restart 1 of 1" in (run.run_dir / LOG_FILE).read_text()


def test_two_runs_on_one_machine_each_fail_or_finish_in_their_own_words(
        tmp_path: Path) -> None:
    """Run A's env worker is killed while run B trains beside it: A names its own dead worker
    (the diagnosis asked A's Ray, never "any Ray on this machine"), B finishes."""
    a = start(tmp_path / "a", "runner.max_steps=30", "runner.save_interval=1")
    b = start(tmp_path / "b", "runner.max_steps=3", "runner.save_interval=1")
    assert a.wait_for("step 1/", 2 * STARTUP_S), a.stderr
    assert _kill_env_workers(a.proc.pid), "no DexrlEnv process in run A"
    code_a, code_b = a.finish(300), b.finish(2 * STARTUP_S + 300)
    errors = _errors(a.stderr)
    assert code_a == 2 and len(errors) == 1, a.stderr
    assert "[training-worker-died]" in errors[0] and "the env worker EnvGroup:0" in errors[0]
    assert "the last complete checkpoint is global_step_" in errors[0]
    assert any(f"`dexrl resume {a.run_dir}` continues from" in line for line in a.stderr)
    log_a = (a.run_dir / LOG_FILE).read_text()
    assert "multiple active Ray instances" not in log_a + "".join(a.stderr)
    assert "Ray's record of the env worker" in log_a  # Ray's own text stays in the log
    assert a.state()["status"] == "failed" and a.state()["error"] == "training-worker-died"
    assert code_b == 0, b.stderr
    assert b.state()["status"] == "finished" and b.complete_steps()[-1] == 3
