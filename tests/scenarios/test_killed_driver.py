"""SIGKILL of the ``dexrl train`` driver: its private Ray goes at once, the folder tells the story.

``slow``: two smoke runs through the real CLI (a few minutes on 2 cores).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers.smoke import DEXRL, run_process, session_leftovers

from dexrl.runs.state import STATE_FILE
from tests.helpers.checkpoints import latest_checkpoint

pytestmark = pytest.mark.slow
LEFTOVER_LIMIT_S = 15  # Ray's own agents outlived a killed driver by 1-2 minutes


def test_a_killed_driver_leaves_no_ray_behind_and_resume_says_what_happened(
        tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    killed: list[float] = []

    def kill_driver(line: str) -> None:
        if not killed and "checkpoint" in line and "global_step_1" in line:
            pid = json.loads((run_dir / STATE_FILE).read_text())["pid"]
            os.kill(pid, signal.SIGKILL)  # the driver only, as the OOM killer would
            killed.append(time.monotonic())

    train = run_process([DEXRL, "train", "--suite", "libero_spatial", "--model", "pi0", "--smoke",
                         "--run-dir", str(run_dir), "runner.max_steps=3"], run_dir,
                        on_line=kill_driver)
    assert killed and train.returncode == -signal.SIGKILL, train.stderr[-2000:]
    deadline = killed[0] + LEFTOVER_LIMIT_S
    while session_leftovers(train.session) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = session_leftovers(train.session)
    gone_after = time.monotonic() - killed[0]
    assert left == [], f"still running {gone_after:.0f} s after the kill: {left}"

    again = subprocess.run([DEXRL, "train", "--suite", "libero_spatial", "--model", "pi0",
                            "--smoke", "--run-dir", str(run_dir)], capture_output=True, text=True)
    assert again.returncode == 2
    assert "interrupted during step 2" in again.stderr
    assert "the last complete checkpoint is global_step_1" in again.stderr

    # a save of step 2 the kill cut short (if it began) stays: only a live driver moves its own
    resume = run_process([DEXRL, "resume", str(run_dir), "runner.max_steps=2", "--move-aside"],
                         run_dir)
    assert resume.returncode == 0, resume.stderr[-3000:]
    first, second = resume.stdout.splitlines()[:2]
    assert first == f"Resuming {run_dir} from global_step_1"
    assert second.startswith("The last run of this folder was interrupted during step 2")
    assert "starting at step 2 of 2" in resume.stdout
    assert latest_checkpoint(run_dir).name == "global_step_2"
    assert json.loads((run_dir / STATE_FILE).read_text())["status"] == "finished"
    print(f"\nkilled driver: its session was empty {gone_after:.1f} s after the SIGKILL")
