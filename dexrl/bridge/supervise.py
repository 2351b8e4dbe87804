"""Watch RLinf's driver loop from outside: progress, stalls, dead workers, and where output goes.

RLinf's loop runs in a background thread (:class:`Supervisor`); the main thread only waits for
its events. That keeps Ctrl-C, a stall watchdog and worker-failure handling in dexrl's hands:
RLinf's own failure path (a ``SIGUSR1`` to the driver, then ``exit``) was seen to hang.

:class:`Output` sends everything the process prints (Python and C level, RLinf's tables and the
worker logs Ray forwards) to a log file, while the main thread can still reach the terminal.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from dexrl.bridge.nodes import job_actors
from dexrl.errors import DexrlError
from dexrl.runs.checkpoints import mark_complete


@dataclass(frozen=True)
class Progress:
    """One event of a run, handed to ``launch(on_progress=...)`` in the main thread (the CLI
    renders it with :class:`dexrl.training.progress.ProgressPrinter`).

    Attributes:
        kind: ``"ready"`` (workers up), ``"step"`` (a global step finished) or ``"checkpoint"``
            (a checkpoint was written and marked complete).
        step: The global step reached (1-based; 0 before the first step of a fresh run).
        total: The step the run stops at.
        elapsed_s: Seconds since launch started.
        metrics: RLinf's metrics for the step (``time/*``, ``env/*``, ``rollout/*``, ``train/*``).
        checkpoint: The checkpoint folder, for ``"checkpoint"`` events.
    """

    kind: str
    step: int
    total: int
    elapsed_s: float
    metrics: Mapping[str, float] = field(default_factory=dict)
    checkpoint: Path | None = None


class _Local(threading.local):
    terminal = False


class _Routed(io.TextIOBase):
    """A text stream that writes to the terminal only from a thread inside ``terminal()``."""

    def __init__(self, log: TextIO, term: TextIO, local: _Local) -> None:
        super().__init__()
        self._log, self._term, self._local = log, term, local

    def _target(self) -> TextIO:
        return self._term if self._local.terminal else self._log

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._log.flush()
        self._term.flush()

    def isatty(self) -> bool:
        return self._target().isatty()

    def fileno(self) -> int:
        return self._target().fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._target(), "encoding", "utf-8")


class Output:
    """Route this process's stdout and stderr to ``log_path`` (unless verbose), reversibly.

    File descriptors 1 and 2 are pointed at the log, so C-level output and streams bound before
    (logging handlers, Ray's) follow. ``sys.stdout``/``sys.stderr`` become routers that reach the
    terminal only inside :meth:`terminal`, from the thread that entered it.
    """

    def __init__(self, log_path: Path, verbose: bool) -> None:
        self.log_path, self.verbose = log_path, verbose
        self._local = _Local()
        self._saved_fds: tuple[int, int] | None = None
        self._saved_streams: tuple[Any, Any] | None = None
        self._terms: list[TextIO] = []

    def __enter__(self) -> Output:
        if self.verbose:
            return self
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved_fds = (os.dup(1), os.dup(2))
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        self._saved_streams = (sys.stdout, sys.stderr)
        self._terms = [_terminal(stream, fd, saved) for stream, fd, saved in
                       zip(self._saved_streams, (1, 2), self._saved_fds, strict=True)]
        sys.stdout = _Routed(sys.__stdout__ or self._terms[0], self._terms[0], self._local)
        sys.stderr = _Routed(sys.__stderr__ or self._terms[1], self._terms[1], self._local)
        return self

    def stream(self, err: bool = False) -> TextIO:
        """The terminal's stdout (or stderr), writable from any thread (e.g. a progress bar)."""
        if self._terms:
            return self._terms[err]
        return sys.stderr if err else sys.stdout

    @contextlib.contextmanager
    def terminal(self) -> Iterator[None]:
        """Within this block, this thread's ``print`` and ``sys.std*`` writes reach the terminal."""
        previous = self._local.terminal
        self._local.terminal = True
        try:
            yield
        finally:
            sys.stdout.flush()
            self._local.terminal = previous

    def say(self, text: str) -> None:
        """Print one line on the terminal."""
        with self.terminal():
            print(text, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._saved_fds is None:
            return
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = self._saved_streams  # type: ignore[misc]
        for std_fd, saved in zip((1, 2), self._saved_fds, strict=True):
            os.dup2(saved, std_fd)
            os.close(saved)
        for term in self._terms:
            if term not in self._saved_streams:  # opened here on a duplicate of fd 1 or 2
                term.close()
        self._terms = []
        self._saved_fds = None


def _terminal(stream: TextIO, fd: int, saved_fd: int) -> TextIO:
    """Where terminal output goes once fd ``fd`` points at the log: a stream on its saved copy,
    or ``stream`` itself when it does not write to ``fd`` (a test runner's capture)."""
    try:
        if stream.fileno() != fd:
            return stream
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation: no file descriptor
        return stream
    return open(os.dup(saved_fd), "w", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115


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


@dataclass
class _Outcome:
    error: BaseException | None = None
    tb: str = ""


NODE_DEATH_WAIT_S = 20.0  # Ray's health check marks a node dead after about 15 s
HEALTH_CHECK_S = 15.0  # between two looks for lost nodes and dead workers


class _HealthWatch:
    """Looks for lost nodes and dead workers every ``interval_s`` on a thread of its own, so a
    slow cluster query never holds up the progress the main thread delivers."""

    def __init__(self, check: Callable[[], bool], interval_s: float) -> None:
        self.tripped = threading.Event()  # a check found a lost node or a dead worker
        self._check, self._interval_s = check, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dexrl-health", daemon=True)

    def __enter__(self) -> _HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                if self._check():
                    self.tripped.set()
                    return
            except Exception as exc:  # a broken check must not end the watch
                print(f"dexrl: the cluster health check failed: {exc!r}", file=sys.stderr)


class Supervisor:
    """Runs ``target`` (RLinf's loop) in a thread and turns what happens into events or errors.

    Also the :class:`dexrl.bridge.workers.RunListener` the runner reports to.
    """

    def __init__(self, *, start_step: int, total: int, stall_timeout_s: float,
                 failure: FailureSignal, on_progress: Callable[[Progress], None] | None,
                 output: Output, log_hint: str,
                 node_check: Callable[[int], DexrlError | None] | None = None,
                 health_check_s: float = HEALTH_CHECK_S) -> None:
        self.step, self.total = start_step, total
        self.stall_timeout_s = stall_timeout_s
        self.failure, self.on_progress, self.output = failure, on_progress, output
        self.log_hint = log_hint
        self.node_check = node_check  # the error naming a lost node, given the step
        self.health_check_s = health_check_s
        self._events: queue.Queue[Progress] = queue.Queue()
        self._t0 = time.monotonic()
        self._thread: threading.Thread | None = None
        self._saved: Progress | None = None
        self._ready = False

    # RunListener (called from the runner thread) ---------------------------------------------
    def workers_ready(self) -> None:
        """Workers are up."""
        self._ready = True
        self._put("ready", self.step)

    def step_done(self, step: int, total: int, metrics: dict[str, Any]) -> None:
        """A global step finished (ignored once a worker failed: RLinf's loop then runs on None)."""
        if self.failure.event.is_set():
            return
        self.step, self.total = step, total
        self._put("step", step, metrics=metrics)
        if self._saved is not None:  # RLinf saves inside the step, before it logs the step
            self._events.put(self._saved)
            self._saved = None

    def checkpoint_saved(self, step: int, path: Path) -> None:
        """RLinf's save returned: mark the checkpoint complete unless a worker failed meanwhile."""
        actor = path / "actor"
        if self.failure.event.is_set() or not actor.is_dir() or not any(actor.iterdir()):
            return
        mark_complete(path, step)
        self._saved = Progress("checkpoint", step, self.total, time.monotonic() - self._t0,
                               checkpoint=path)

    def _put(self, kind: str, step: int, **extra: Any) -> None:
        self._events.put(Progress(kind, step, self.total, time.monotonic() - self._t0, **extra))

    # Main thread ---------------------------------------------------------------------------
    def run(self, target: Callable[[], None]) -> None:
        """Run ``target`` in a thread until it returns; raise DexrlError on failure or stall."""
        outcome = _Outcome()

        def body() -> None:
            try:
                target()
            except BaseException as exc:  # reported by the main thread
                outcome.error, outcome.tb = exc, traceback.format_exc()

        self._thread = threading.Thread(target=body, name="rlinf-runner", daemon=True)
        self._thread.start()
        with _HealthWatch(self._unhealthy, self.health_check_s) as health:
            self._watch(outcome, health)

    def _watch(self, outcome: _Outcome, health: _HealthWatch) -> None:
        last_event = time.monotonic()
        while True:
            with contextlib.suppress(queue.Empty):
                event = self._events.get(timeout=0.5)
                last_event = time.monotonic()
                self._deliver(event)
                continue
            if not self._thread.is_alive():  # workers dropped by the loop's end look dead
                self._drain()
                if self.failure.event.is_set():
                    raise self._worker_failure()
                if outcome.error is not None:
                    raise self._runner_error(outcome)
                return
            if self.failure.event.is_set() or health.tripped.is_set():
                raise self._worker_failure()
            idle = time.monotonic() - last_event
            if idle > self.stall_timeout_s:
                raise self._stall(idle)

    def _unhealthy(self) -> bool:
        """A node of the run is lost or one of its workers died (the health watch's check)."""
        return self._lost_node() is not None or bool(dead_actor_causes())

    def _deliver(self, event: Progress) -> None:
        if self.on_progress is not None:
            with self.output.terminal():
                self.on_progress(event)

    def _drain(self) -> None:
        while not self._events.empty():
            self._deliver(self._events.get_nowait())
        if self._saved is not None:
            self._deliver(self._saved)
            self._saved = None

    def _runner_error(self, outcome: _Outcome) -> DexrlError:
        time.sleep(1.0)  # a worker failure makes RLinf's loop trip over None results: let it land
        if self.failure.event.is_set() or self._unhealthy():
            return self._worker_failure()
        print(outcome.tb, file=sys.stderr)
        exc = outcome.error
        return DexrlError(
            f"RLinf's training loop stopped at step {self.step}: {type(exc).__name__}: {exc}",
            f"the traceback is in {self.log_hint}",
            code="training-loop-failed",
        )

    def _lost_node(self, wait_s: float = 0.0) -> DexrlError | None:
        """The error naming a lost node; Ray marks a node dead some seconds after its workers."""
        if self.node_check is None:
            return None
        deadline = time.monotonic() + wait_s
        while (lost := self.node_check(self.step + 1)) is None and time.monotonic() < deadline:
            time.sleep(2.0)
        return lost

    def _worker_failure(self) -> DexrlError:
        causes = failed_task_causes() or dead_actor_causes()
        # A lost node explains every failure on it; wait for Ray to notice when it may be that.
        maybe_node = not causes or any("node" in c[1].lower() for c in causes)
        lost = self._lost_node(wait_s=NODE_DEATH_WAIT_S if maybe_node else 0.0)
        if lost is not None:
            return lost
        if not causes:
            return DexrlError(f"an RLinf worker failed during step {self.step + 1}",
                              f"the worker's traceback is in {self.log_hint}",
                              code="training-worker-failed")
        name, summary, lines = causes[0]
        return DexrlError(
            f"RLinf worker {name} failed during step {self.step + 1}: {summary}",
            f"fix the cause, then resume from the last checkpoint; full logs in {self.log_hint}",
            details=lines[-8:],
            code="training-worker-failed",
        )

    def _stall(self, idle_s: float) -> DexrlError:
        waiting = pending_calls(self._thread)
        where = "; ".join(waiting) if waiting else "no pending worker call found"
        phase = f"step {self.step + 1}" if self._ready else "start-up"
        return DexrlError(
            f"no progress for {idle_s:.0f} s during {phase}: RLinf is waiting on {where}",
            "one of these worker groups is stuck (the others wait for its data); their output "
            f"is in {self.log_hint}. If steps are just slow, raise the stall timeout",
            details=[f"stall timeout: {self.stall_timeout_s:.0f} s"],
            code="training-stalled",
        )


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
    """(task name, last error line, error lines) of this job's failed Ray tasks.

    Ray reports task events with a delay of about a second, hence the short retry.
    """
    import ray
    from ray.util.state import list_tasks

    job = ray.get_runtime_context().get_job_id()
    deadline = time.monotonic() + wait_s
    while True:
        try:
            tasks = list_tasks(filters=[("state", "=", "FAILED"), ("job_id", "=", job)],
                               detail=True, raise_on_missing_output=False, timeout=5)
        except Exception as exc:
            print(f"dexrl: Ray's state API did not list failed tasks: {exc!r}", file=sys.stderr)
            return []
        causes = []
        for task in tasks:
            lines = [ln for ln in (task.error_message or "").splitlines() if ln.strip()]
            if lines:
                causes.append((task.func_or_class_name or task.name, lines[-1], lines))
        if causes or time.monotonic() > deadline:
            return causes
        time.sleep(0.5)


# The classes dexrl launches (dexrl.bridge.workers); RLinf's own short-lived helper actors die
# on purpose and are not failures.
WORKER_CLASSES = frozenset({"DexrlActor", "DexrlRollout", "DexrlEnv"})
# Ray's reasons for an actor whose owner dropped every handle (ActorDiedErrorContext.Reason):
# OUT_OF_SCOPE, or REF_DELETED once lineage references are gone too (both seen with Ray 2.60).
RELEASED = frozenset({"OUT_OF_SCOPE", "REF_DELETED"})


def dead_actor_causes() -> list[tuple[str, str, list[str]]]:
    """(actor class, death cause, lines) of this run's workers that died while running."""
    from google.protobuf.json_format import MessageToDict

    causes = []
    for actor in job_actors():
        if actor.get("State") != "DEAD" or actor.get("ActorClassName") not in WORKER_CLASSES:
            continue
        death = MessageToDict(actor["DeathCause"]) if actor.get("DeathCause") else None
        cause = json.dumps(death) if death else "unknown cause"
        if "ray.kill" in cause:  # killed on purpose (RLinf's or dexrl's clean-up)
            continue
        if (death or {}).get("actorDiedErrorContext", {}).get("reason") in RELEASED:
            continue  # released by its owner: the driver's own teardown at the end of a run
        causes.append((actor["ActorClassName"], cause[:300], [cause]))
    return causes
