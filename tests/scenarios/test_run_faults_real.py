"""The fault reproductions of issue 33 through the real command and RLinf pipeline: a diverged run,
Ctrl-C pressed twice to the whole process group, SIGTERM, an interruption before the first
checkpoint, and a run folder on a disk that fills up (about 1–3 minutes each)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.fault_run import ctrl_c_twice, start

pytestmark = pytest.mark.slow
STARTUP_S = 400  # Ray and the workers on a busy 2-core machine


def _errors(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("error:")]


def test_a_diverged_run_stops_with_one_line_and_nothing_marked(tmp_path: Path) -> None:
    run = start(tmp_path / "run", "runner.max_steps=6", "runner.save_interval=1",
                "actor.optim.lr=1e12", "actor.optim.value_lr=1e12")
    code = run.finish(STARTUP_S + 300)
    errors = _errors(run.stderr)
    assert code == 2, run.stderr
    assert len(errors) == 1 and "[training-diverged]" in errors[0], run.stderr
    assert "Traceback" not in "".join(run.stderr)
    assert "training diverged at step 2" in errors[0]
    assert "no checkpoint of this run is complete" in errors[0]
    assert run.complete_steps() == []  # step 1 skipped updates: its weights are not vouched for
    assert run.state()["status"] == "failed"
    assert any("updates skipped" in line for line in run.stdout)


def _ctrl_c_after(step: int, tmp_path: Path, *, twice: bool = True,
                  signum: int = signal.SIGINT) -> tuple[int, object]:
    run = start(tmp_path / "run", "runner.max_steps=20", "runner.save_interval=1")
    assert run.wait_for(f"step {step}/", STARTUP_S + 120), run.stderr
    if twice:
        ctrl_c_twice(run)
    else:
        run.signal_driver(signum)
    code = run.finish(90)  # the stop itself takes seconds; Ray's shutdown a few more
    return code, run


def test_ctrl_c_twice_to_the_process_group_leaves_a_resumable_run(tmp_path: Path) -> None:
    code, run = _ctrl_c_after(2, tmp_path)
    assert code == 130, run.stderr
    assert run.state()["status"] == "interrupted"
    assert _errors(run.stderr) == [] and "Traceback" not in "".join(run.stderr)
    complete = run.complete_steps()
    assert complete and complete[-1] >= 2
    for step in run.all_steps():  # a save cut short is never vouched for
        assert step in complete or step > complete[-1]
    assert f"continues from global_step_{complete[-1]}" in "".join(run.stdout)
    dry = subprocess.run([sys.executable, "-m", "dexrl", "resume", str(run.run_dir),
                          "--dry-run"], capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0 and f"from global_step_{complete[-1]}" in dry.stdout, dry.stderr


def test_sigterm_from_a_scheduler_stops_the_run_the_same_way(tmp_path: Path) -> None:
    code, run = _ctrl_c_after(1, tmp_path, twice=False, signum=signal.SIGTERM)
    assert code == 143, run.stderr
    assert run.state()["status"] == "interrupted"
    assert any("SIGTERM received" in line for line in run.stdout + run.stderr)


def test_interrupted_before_the_first_checkpoint_resume_starts_again(tmp_path: Path) -> None:
    run = start(tmp_path / "run", "runner.max_steps=20", "runner.save_interval=1")
    assert run.wait_for("[Dexbotic RL]", 120), run.stderr
    ctrl_c_twice(run)
    assert run.finish(90) == 130, run.stderr
    assert run.state()["status"] == "interrupted" and run.complete_steps() == []
    assert "starts it again from step 0" in "".join(run.stdout)
    dry = subprocess.run([sys.executable, "-m", "dexrl", "resume", str(run.run_dir),
                          "--dry-run"], capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert "again from step 0" in dry.stdout


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2.6 MB tmpfs: room for the smoke run's folder and two of its checkpoints."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2600k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_ends_in_one_line_and_a_resumable_folder(small_disk: Path) -> None:
    run = start(small_disk / "run", "runner.max_steps=8", "runner.save_interval=1")
    code = run.finish(STARTUP_S + 300)
    errors = _errors(run.stderr)
    assert code == 2, run.stderr
    assert len(errors) == 1 and "[disk-full]" in errors[0], run.stderr
    assert "Traceback" not in "".join(run.stderr + run.stdout)
    complete = run.complete_steps()
    assert complete, errors
    assert f"the last complete checkpoint is global_step_{complete[-1]}" in errors[0]
    assert "each checkpoint needs about" in errors[0]
    assert run.state()["status"] == "failed"  # closed in place on the full disk
