"""What a run folder says about the process that last ran it: running, finished, or interrupted.

Design notes: docs/design/run-folders.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dexrl.checkpoints.files.steps import last_complete
from dexrl.errors import DISK_FULL_ERRNOS
from dexrl.runs import durable

STATE_FILE = "run-state.json"
RESTARTS = "restarts"  # the automatic restarts of the run (--max-restarts), oldest first
PROC = Path("/proc")


# Processes ----------------------------------------------------------------------------------

def start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None when it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[19])


def alive(pid: int, started: int | None) -> bool:
    """Whether ``pid`` still runs and is the same process (same start time)."""
    now = start_time(pid)
    return now is not None and (started is None or now == started)


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, breadth first."""
    tree, out, todo = _children(), [], [pid]
    while todo:
        kids = tree.get(todo.pop(0), [])
        out += kids
        todo += kids
    return out


def kill_tree(procs: list[tuple[int, int | None]]) -> int:
    """SIGKILL each still-identical ``(pid, start time)`` and everything below it; the count."""
    victims: list[int] = []
    for pid, started in procs:
        if alive(pid, started):
            victims += [pid, *descendants(pid)]
    for pid in dict.fromkeys(victims):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(set(victims))


# The state file -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Previous:
    """What the state file says about the last process that ran a folder.

    Attributes:
        status: ``running``, ``finished``, ``failed`` or ``interrupted``.
        step: The last global step that finished.
        pid: The driver's pid.
        host: The driver's host.
        still_running: The driver process is alive (same host, same pid and start time).
    """

    status: str
    step: int
    pid: int
    host: str
    still_running: bool

    @property
    def killed(self) -> bool:
        """It said ``running`` and its process is gone: it was killed (or its machine died)."""
        return self.status == "running" and not self.still_running


STATUSES = ("running", "finished", "failed", "interrupted")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _problem(data: Any) -> str | None:
    """What makes parsed state-file content unusable, None when it is a record this code wrote."""
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("status") not in STATUSES:
        return f"status {data.get('status')!r} is not one of {', '.join(STATUSES)}"
    if not (_int(data.get("step")) and _int(data.get("pid"))
            and isinstance(data.get("host"), str)):
        return "step, pid or host is missing or mistyped"
    started = data.get("pid_start")
    procs = data.get("ray_processes", [])
    if not ((started is None or _int(started)) and isinstance(procs, list) and all(
            isinstance(p, list) and len(p) == 2 and _int(p[0]) and (p[1] is None or _int(p[1]))
            for p in procs)):
        return "pid_start or ray_processes is malformed"
    return None


def load(run_dir: Path) -> tuple[dict[str, Any], str | None]:
    """The state file's content and what is wrong with it.

    ``({}, None)`` when there is none; ``({}, why)`` when it is unreadable or not a record this
    code wrote (garbage, a torn write of an older dexrl, a hand edit).
    """
    path = Path(run_dir) / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError) as exc:
        return {}, f"cannot be read: {exc}"
    try:
        data = json.loads(text)
    except ValueError:
        return {}, "empty" if not text.strip() else "not valid JSON"
    problem = _problem(data)
    return ({}, problem) if problem else (data, None)


def read(run_dir: Path) -> dict[str, Any]:
    """The state file's content ({} when there is none or it is unusable, see :func:`load`)."""
    return load(run_dir)[0]


def _write(run_dir: Path, data: dict[str, Any]) -> None:
    """Replace the record durably; on a full disk, where a new file cannot be made, rewrite the
    existing one in place (a record of about 1 kB fits the block it already has), so a run that
    fails on a full disk still closes its record."""
    path = Path(run_dir) / STATE_FILE
    try:
        durable.write_json(path, data)
    except OSError as exc:
        if exc.errno not in DISK_FULL_ERRNOS or not path.is_file():
            raise
        text = (json.dumps(data, indent=2, default=str) + "\n").encode("utf-8")
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, text)
            os.ftruncate(fd, len(text))
            os.fsync(fd)
        finally:
            os.close(fd)


def previous_run(run_dir: Path) -> Previous | None:
    """The last process that ran ``run_dir``, if the folder recorded one."""
    data = read(run_dir)
    if not data:
        return None
    pid, host = data["pid"], data["host"]
    here = host == socket.gethostname()
    # A closed record (finished, failed, interrupted) is a process done with the folder, though
    # it may live on: a run restarting itself (--max-restarts) hands the folder to a child.
    running = (here and pid > 0 and data["status"] == "running"
               and alive(pid, data.get("pid_start")))
    if not here and data["status"] == "running":
        running = True  # another machine's process: it cannot be checked from here
    return Previous(data["status"], data["step"], pid, host, running)


def story(run_dir: Path) -> list[str]:
    """What happened to the folder's last run when it did not close its record, or what is wrong
    with the record and what dexrl assumes then (else [])."""
    problem = load(run_dir)[1]
    if problem is not None:
        # Safe to go on: the record only guards against a second live driver and names what a
        # killed one left. A live driver rewrites it whole (durably) after every step, so an
        # unusable record was left by a process that died writing it, or by a hand.
        return [f"{Path(run_dir) / STATE_FILE} is unusable ({problem}): dexrl assumes the last "
                "run of this folder ended and no dexrl process runs it now (the checkpoints say "
                "where it got to; the file is rewritten at launch)"]
    prev = previous_run(run_dir)
    if prev is None or not prev.killed:
        return []
    complete = last_complete(run_dir)
    last = (f"the last complete checkpoint is {complete.path.name}" if complete is not None
            else "it left no complete checkpoint")
    return [f"the last run of this folder was interrupted during step {prev.step + 1} (process "
            f"{prev.pid} on {prev.host} ended without closing the run, e.g. killed); {last}"]


class Tracker:
    """Keeps ``run-state.json`` current for one launch (created by :func:`begin`)."""

    def __init__(self, run_dir: Path, step: int) -> None:
        self.run_dir = Path(run_dir)
        self.data: dict[str, Any] = {
            "schema": 1, "status": "running", "step": step, "pid": os.getpid(),
            "pid_start": start_time(os.getpid()), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        restarts = read(self.run_dir).get(RESTARTS)
        if restarts:  # the run's automatic restarts so far (record_restart) stay on record
            self.data[RESTARTS] = restarts
        _write(self.run_dir, self.data)

    def _update(self, **fields: Any) -> None:
        self.data.update(fields)
        # launch adds the private Ray's processes to the same file: keep them
        _write(self.run_dir, {**read(self.run_dir), **self.data})

    def step_done(self, step: int) -> None:
        """A global step finished."""
        self._update(step=step)

    def end(self, status: str, error: str | None = None) -> None:
        """Close the record: ``finished``, ``failed`` (with the error's code, ``error``) or
        ``interrupted``."""
        extra = {"error": error} if error else {}
        self._update(status=status, ended=time.strftime("%Y-%m-%dT%H:%M:%S%z"), **extra)


def record_restart(run_dir: Path, restart: dict[str, Any]) -> None:
    """Add one automatic restart (``--max-restarts``) to the record's ``restarts`` list."""
    data = read(run_dir)
    data[RESTARTS] = [*data.get(RESTARTS, []), restart]
    _write(run_dir, data)


def begin(run_dir: Path, step: int) -> Tracker:
    """Reap what a killed earlier run of the folder left, then record this run as running."""
    reap_recorded(run_dir)
    return Tracker(run_dir, step)


# The private Ray instance -------------------------------------------------------------------

def watch_private_ray(run_dir: Path) -> None:
    """Record this process's Ray processes and start a reaper that kills them once it is gone.

    Call right after the private Ray instance started: its gcs_server, raylet and agents are
    below this process then; the reaper also follows the workers started later.
    """
    me = os.getpid()
    # The whole tree: Ray's agents are the raylet's children and are orphaned, not ended, when
    # the raylet goes down with the driver.
    procs = [(pid, start_time(pid)) for pid in descendants(me)]
    procs = [(pid, started) for pid, started in procs if started is not None]
    data = read(run_dir)
    data["ray_processes"] = procs
    _write(run_dir, data)
    args = [sys.executable, "-m", "dexrl.runs.state", str(me), str(start_time(me))]
    args += [f"{pid}:{started}" for pid, started in procs]
    subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def reap_recorded(run_dir: Path) -> int:
    """Kill the private Ray processes an earlier, dead driver of ``run_dir`` left; the count."""
    data = read(run_dir)
    prev = previous_run(run_dir)
    if prev is None or prev.still_running or data.get("host") != socket.gethostname():
        return 0
    return kill_tree([(int(p), s) for p, s in data.get("ray_processes", [])])


def _reaper(driver: int, driver_start: int, procs: list[tuple[int, int | None]],
            poll_s: float = 1.0) -> None:
    known = dict(procs)
    while alive(driver, driver_start):
        for pid in descendants(driver):  # workers and agents started since
            known.setdefault(pid, start_time(pid))
        if not any(alive(p, s) for p, s in known.items()):
            return  # the driver stopped its Ray itself
        time.sleep(poll_s)
    kill_tree(list(known.items()))


if __name__ == "__main__":  # the reaper: python -m dexrl.runs.state DRIVER START PID:START ...
    pairs = [item.split(":") for item in sys.argv[3:]]
    _reaper(int(sys.argv[1]), int(sys.argv[2]), [(int(p), int(s)) for p, s in pairs])
