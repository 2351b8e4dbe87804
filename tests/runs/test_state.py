"""Run-state records: a killed driver is recognised, and its private Ray processes are reaped.

Stand-in processes (``sleep``) play the driver and its Ray children; no Ray is started.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dexrl.checkpoints.files.steps import mark_complete
from dexrl.runs.state import (
    STATE_FILE,
    alive,
    begin,
    descendants,
    previous_run,
    read,
    start_time,
    story,
)
from helpers.killed_run import write_killed_run


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def spawn(procs: list[subprocess.Popen[bytes]], cmd: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["sh", "-c", cmd])
    procs.append(proc)
    return proc


def wait_gone(pids: list[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(alive(p, None) and not _zombie(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _zombie(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def test_a_live_run_a_finished_run_and_a_killed_run_are_told_apart(tmp_path: Path) -> None:
    tracker = begin(tmp_path, 0)
    state = tmp_path / STATE_FILE
    state.write_text(json.dumps({**read(tmp_path), "ray_processes": [[7, 8]]}))
    tracker.step_done(1)
    assert read(tmp_path)["ray_processes"] == [[7, 8]]  # launch's record is kept
    now = previous_run(tmp_path)
    assert now is not None and now.still_running and not now.killed and now.step == 1
    tracker.end("finished")
    assert story(tmp_path) == []

    for step in (1, 2):
        (tmp_path / "checkpoints" / f"global_step_{step}").mkdir(parents=True)
    mark_complete(tmp_path / "checkpoints" / "global_step_1", 1)
    write_killed_run(tmp_path, 2)
    prev = previous_run(tmp_path)
    assert prev is not None and prev.killed
    [line] = story(tmp_path)
    assert line.startswith("the last run of this folder was interrupted during step 3 (process ")
    assert line.endswith("the last complete checkpoint is global_step_1")


def test_the_next_launch_reaps_what_a_killed_driver_left(
        tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    ray = spawn(procs, "sleep 60 & sleep 60")  # a "raylet" with a "worker" below it
    time.sleep(0.3)
    below = descendants(ray.pid)
    assert below
    other = spawn(procs, "sleep 60")  # not recorded: must survive
    write_killed_run(tmp_path, 1, [(ray.pid, start_time(ray.pid)), (other.pid, 12345)])
    begin(tmp_path, 1)
    assert wait_gone([ray.pid, *below])
    assert other.poll() is None


@pytest.mark.spawns
def test_the_reaper_kills_the_private_ray_as_soon_as_the_driver_is_gone(
        procs: list[subprocess.Popen[bytes]]) -> None:
    driver = spawn(procs, "sleep 60")
    ray = spawn(procs, "sleep 60 & sleep 60")
    time.sleep(0.3)
    below = descendants(ray.pid)
    reaper = subprocess.Popen([sys.executable, "-m", "dexrl.runs.state", str(driver.pid),
                               str(start_time(driver.pid)),
                               f"{ray.pid}:{start_time(ray.pid)}"])
    time.sleep(1.5)
    assert ray.poll() is None  # the driver lives: nothing is touched
    driver.kill()
    driver.wait()
    assert wait_gone([ray.pid, *below], timeout=5)
    assert reaper.wait(timeout=5) == 0


def test_a_full_disk_still_closes_the_record_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from dexrl.runs import durable, state

    tracker = state.Tracker(tmp_path, 3)

    def full(path: Path, data: object) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(durable, "write_json", full)
    tracker.end("failed")
    assert state.read(tmp_path)["status"] == "failed"
    assert [p.name for p in tmp_path.iterdir()] == [state.STATE_FILE]

    def broken(path: Path, data: object) -> Path:
        raise OSError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(durable, "write_json", broken)
    with pytest.raises(PermissionError):  # other failures are not hidden
        tracker.end("finished")


def test_a_closed_record_frees_the_folder_and_restarts_stay_on_record(tmp_path: Path) -> None:
    """A run restarting itself (--max-restarts) lives on while its child resumes the folder: its
    closed record must not read as a second live driver; the control: while it says running."""
    from dexrl.runs.state import record_restart

    tracker = begin(tmp_path, 2)
    assert previous_run(tmp_path).still_running  # this very process, running the folder
    tracker.end("failed", "training-worker-died")
    assert not previous_run(tmp_path).still_running
    assert read(tmp_path)["error"] == "training-worker-died"
    record_restart(tmp_path, {"attempt": 1, "after": "training-worker-died"})
    begin(tmp_path, 2)  # the restarted launch's record keeps the run's restarts
    assert read(tmp_path)["restarts"] == [{"attempt": 1, "after": "training-worker-died"}]
    assert read(tmp_path)["status"] == "running" and "error" not in read(tmp_path)
