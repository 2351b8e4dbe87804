"""What went wrong in a run's Ray workers: RLinf's failure signal caught as a flag, the worker
calls a stalled loop waits on, and the causes of failed tasks and dead workers."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from dexrl.bridge.launch.deaths import WorkerDeath, role_of, worker_deaths
from dexrl.cluster import job_actors, own_address
from dexrl.errors import disk_full_in_text


class FailureSignal:
    """Replaces RLinf's ``SIGUSR1`` handler (kill everything, ``exit``) with a flag.

    RLinf's result-waiting threads send ``SIGUSR1`` to the driver when a worker call raised. The
    handler stays installed after the run: a late signal from such a thread must not kill the
    process (``SIGUSR1``'s default action).
    """

    def __init__(self) -> None:
        self.event = threading.Event()

    def install(self) -> None:
        """Install the handler (main thread only, after RLinf's Cluster installed its own)."""
        signal.signal(signal.SIGUSR1, lambda signum, frame: self.event.set())


def pending_calls(thread: threading.Thread | None) -> list[str]:
    """Unfinished RLinf worker-group calls held by ``thread``'s frames, innermost first.

    RLinf's ``WorkerGroupFuncResult`` has no public accessors for what it waits on; its
    attributes are read defensively.
    """
    if thread is None or thread.ident is None:
        return []
    frame = sys._current_frames().get(thread.ident)
    seen: list[str] = []
    while frame is not None:
        for value in list(frame.f_locals.values()):
            label = _describe_call(value)
            if label and label not in seen:
                seen.append(label)
        frame = frame.f_back
    return seen


def _describe_call(value: Any) -> str | None:
    if type(value).__name__ != "WorkerGroupFuncResult" or value.done():
        return None
    group = getattr(getattr(value, "_worker_group", None), "worker_group_name", "?")
    name = f"{group}.{getattr(value, '_func_name', '?')}"
    refs = list(getattr(value, "_remote_results", []) or [])
    if not refs:
        return name
    import ray

    with contextlib.suppress(Exception):
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        pending = [str(rank) for rank, ref in enumerate(refs) if ref not in ready]
        return f"{name} (ranks {', '.join(pending)} unfinished)"
    return name


def failed_task_causes(wait_s: float = 10.0) -> list[tuple[str, str, list[str]]]:
    """(task name, last error line, error lines) of this job's failed Ray tasks (not those
    that failed because their worker died: :func:`run_worker_deaths` tells of those).

    Ray reports task events with a delay of about a second, hence the short retry.
    """
    import ray
    from ray.util.state import list_tasks

    job = ray.get_runtime_context().get_job_id()
    deadline = time.monotonic() + wait_s
    while True:
        try:  # this run's Ray, by its address: another one on the machine must not be asked
            tasks = list_tasks(address=own_address(),
                               filters=[("state", "=", "FAILED"), ("job_id", "=", job)],
                               detail=True, raise_on_missing_output=False, timeout=5)
        except Exception as exc:
            print(f"dexrl: Ray's state API did not list failed tasks: {exc!r}", file=sys.stderr)
            return []
        causes = []
        for task in tasks:
            if task.error_type == "ACTOR_DIED":  # the dead worker's story: run_worker_deaths
                continue
            lines = [ln for ln in (task.error_message or "").splitlines() if ln.strip()]
            if lines and not _polled_empty(lines[-1]):
                causes.append((task.func_or_class_name or task.name, lines[-1], lines))
        if causes or time.monotonic() > deadline:
            return causes
        time.sleep(0.5)


def _polled_empty(last_line: str) -> bool:
    """An empty channel polled with ``get_nowait``: RLinf's async runner drains its metric
    channels that way and catches the ``QueueEmpty``, which Ray still records as a failed task."""
    return last_line.strip().endswith("QueueEmpty")


def run_worker_deaths() -> list[WorkerDeath]:
    """This run's workers that died while running (:func:`~dexrl.bridge.launch.deaths.
    worker_deaths` of this job's actors), their logs and the kernel log read on this machine."""
    import ray

    logs_dir = None
    with contextlib.suppress(Exception):  # Ray's node object: private, read defensively
        logs_dir = Path(ray._private.worker._global_node.get_logs_dir_path())
    return worker_deaths(job_actors(), local_node=ray.get_runtime_context().get_node_id(),
                         logs_dir=logs_dir)


# What a worker's error text says about a full disk (OSError's, torch's stream writer's).
_DISK_FULL = ("No space left on device", "[Errno 28]", "Disk quota exceeded", "[Errno 122]")
# ... and about memory: CUDA's allocator, Python's MemoryError, Ray's memory monitor (which kills
# the worker and says "OutOfMemoryError" / "low on memory").
_GPU_OOM = ("CUDA out of memory", "CUDA error: out of memory", "torch.OutOfMemoryError",
            "torch.cuda.OutOfMemoryError")
_HOST_OOM = ("MemoryError", "running low on memory", "OutOfMemoryError", "Cannot allocate memory")


def disk_full_cause(text: str) -> bool:
    """Whether a worker's error text is a full disk."""
    return any(marker in text for marker in _DISK_FULL) or disk_full_in_text(text) is not None


def out_of_memory(causes: list[tuple[str, str, list[str]]]
                  ) -> tuple[str, str, tuple[str, str, list[str]]] | None:
    """(worker group, ``"GPU"`` or ``"host"``, the cause) of the first cause that is an
    out-of-memory error, None when none is."""
    for cause in causes:
        name, _, lines = cause
        text = "\n".join(lines)
        kind = ("GPU" if any(m in text for m in _GPU_OOM)
                else "host" if any(m in text for m in _HOST_OOM) else None)
        if kind is not None:
            return role_of(name), kind, cause
    return None
