"""Watch RLinf's driver loop from outside: progress, stalls, dead workers, diverged steps and
stop requests.

RLinf's loop runs in a background thread (:class:`Supervisor`); the main thread only waits for
its events. That keeps Ctrl-C, a stall watchdog and worker-failure handling in dexrl's hands:
RLinf's own failure path (a ``SIGUSR1`` to the driver, then ``exit``) was seen to hang. Where the
output goes is :mod:`~dexrl.bridge.launch.output`; what a failure was,
:mod:`~dexrl.bridge.launch.failures`.
"""

from __future__ import annotations

import contextlib
import queue
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dexrl.bridge.launch.deaths import WorkerDeath
from dexrl.bridge.launch.events import Progress
from dexrl.bridge.launch.failures import (
    FailureSignal,
    disk_full_cause,
    failed_task_causes,
    out_of_memory,
    pending_calls,
    run_worker_deaths,
)
from dexrl.bridge.launch.output import Output
from dexrl.bridge.launch.spec import LaunchSpec
from dexrl.bridge.launch.stop import Interrupted, StopSignals
from dexrl.checkpoints.files.steps import last_complete, last_complete_fact
from dexrl.errors import DexrlError, disk_full, disk_full_error, disk_full_folder
from dexrl.runs.divergence import Divergence, DivergenceWatch, StepHealth, step_health


@dataclass
class _Outcome:
    error: BaseException | None = None
    tb: str = ""


# The settings that cut each worker group's memory (docs/failures.md#out-of-memory).
OOM_FIXES = {
    "actor": "lower actor.micro_batch_size, set actor.enable_offload=true, lower "
             "actor.model.dexbotic.prefix_cache.device_gb, or spread the actor over more GPUs "
             "(cluster.component_placement); then resume",
    "rollout": "lower env.train.total_num_envs (the rollout batch), set rollout.enable_offload=true"
               " or rollout.enable_cuda_graph=false; then resume",
    "env": "lower env.train.total_num_envs (each LIBERO env is a process of about 2 GB) or "
           "give the env workers GPUs of their own (cluster.component_placement); then resume",
}
# A worker call that failed because a peer died (Ray's error, a collective's broken connection):
# the death is the story, and Ray's actor table may record it a little after the call failed.
_KNOCK_ON = ("ActorDiedError", "The actor is dead", "actor died", "Connection reset by peer",
             "Connection closed by peer", "DistBackendError")
KNOCK_ON_WAIT_S = 3.0
NODE_DEATH_WAIT_S = 20.0  # Ray's health check marks a node dead after about 15 s
HEALTH_CHECK_S = 15.0  # between two looks for lost nodes and dead workers


def _knock_on(text: str) -> bool:
    """Whether a failed call's error text says a peer worker died."""
    return any(marker in text for marker in _KNOCK_ON)


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

    Reads from ``spec`` the steps, the stall timeout, the run folder and where the log is.

    Also the :class:`dexrl.bridge.launch.workers.RunListener` the runner reports to.
    """

    def __init__(self, spec: LaunchSpec, *, failure: FailureSignal, output: Output,
                 on_progress: Callable[[Progress], None] | None = None,
                 node_check: Callable[[int], DexrlError | None] | None = None,
                 on_checkpoint: Callable[[Path, int], None] = lambda path, step: None,
                 divergence: DivergenceWatch | None = None,
                 stop: StopSignals | None = None,
                 health_check_s: float = HEALTH_CHECK_S,
                 node_ranks: Mapping[str, int] | None = None) -> None:
        self.step, self.total = spec.start_step, spec.total
        self.stall_timeout_s = spec.options.stall_timeout
        self.failure, self.on_progress, self.output = failure, on_progress, output
        self.log_hint = spec.log_hint
        self.node_check = node_check  # the error naming a lost node, given the step
        self.on_checkpoint = on_checkpoint  # a saved checkpoint of a clean step (folder, step)
        self.health_check_s = health_check_s
        self.node_ranks = dict(node_ranks or {})  # Ray's node id -> RLinf's node rank
        self.run_dir = spec.run_dir
        self.divergence, self.stop = divergence, stop
        self._events: queue.Queue[Progress] = queue.Queue()
        self._t0 = time.monotonic()
        self._thread: threading.Thread | None = None
        self._saves: dict[int, Path] = {}  # written, waiting for their step's metrics
        self._health: dict[int, StepHealth] = {}
        self._diverged: Divergence | None = None
        self._ready = False
        # Marking reads every byte of the step (its checksums): one thread, off RLinf's loop.
        self._marks = ThreadPoolExecutor(1, thread_name_prefix="dexrl-mark")
        self._mark_error: tuple[Path, BaseException] | None = None

    # RunListener (called from the runner thread) ---------------------------------------------
    def workers_ready(self) -> None:
        """Workers are up."""
        self._ready = True
        self._put("ready", self.step)

    def step_done(self, step: int, total: int, metrics: dict[str, Any]) -> None:
        """A global step finished (ignored once a worker failed: RLinf's loop then runs on None).

        Its metrics decide whether its checkpoint is marked complete and whether the run
        diverged (:mod:`dexrl.runs.divergence`).
        """
        if self.failure.event.is_set():
            return
        self.step, self.total = step, total
        health = step_health(step, metrics)
        self._health = {s: h for s, h in self._health.items() if s > step - 4}
        self._health[step] = health
        if self.divergence is not None and self._diverged is None:
            self._diverged = self.divergence.observe(health)
        self._put("step", step, metrics=metrics)
        self._settle(step)

    def checkpoint_saved(self, step: int, path: Path) -> None:
        """RLinf's save returned: the checkpoint is marked complete (``on_checkpoint``) once its
        step's metrics show a clean step, unless a worker failed meanwhile or the actor saved
        nothing. RLinf's synchronous loop saves before it logs the step, its asynchronous one
        after: either order works."""
        actor = path / "actor"
        if self.failure.event.is_set() or not actor.is_dir() or not any(actor.iterdir()):
            return
        self._saves[step] = path
        self._settle(step)

    def _settle(self, step: int) -> None:
        """Mark (or leave unmarked, saying why) the checkpoint of ``step`` once both its save
        and its metrics are in."""
        health = self._health.get(step)
        if health is None or step not in self._saves:
            return
        path = self._saves.pop(step)
        why = self._unmarked_reason(health)
        if why is None:
            try:
                self._marks.submit(self._mark, path, step)
                return
            except RuntimeError:  # the launch is ending (shut down): the save stays unmarked
                why = "the run is ending"
        self._put("unmarked", step, checkpoint=path, note=why)

    def _mark(self, path: Path, step: int) -> None:
        """``on_checkpoint`` in the marking thread; its failure is raised by the main thread
        (and no later step is marked: the run is failing)."""
        if self._mark_error is not None:
            return
        try:
            self.on_checkpoint(path, step)
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            self._mark_error = (path, exc)
            return
        self._put("checkpoint", step, checkpoint=path)

    def _mark_failure(self, path: Path, exc: BaseException) -> DexrlError:
        if disk_full(exc):
            return self._disk_full(disk_full_folder(exc, self.run_dir))
        return DexrlError(f"could not mark {path.name} complete: {type(exc).__name__}: {exc}",
                          f"{last_complete_fact(self.run_dir)}; fix the cause, then "
                          f"`dexrl resume {self.run_dir} --move-aside`", where=str(path),
                          code="checkpoint-mark-failed")

    def _unmarked_reason(self, health: StepHealth) -> str | None:
        if self.stop is not None and self.stop.requested.is_set():
            return "the run is stopping"
        if not health.clean:
            return f"step {health.step} was not clean ({health.summary()})"
        if self._diverged is not None:
            return f"the run diverged at step {self._diverged.step}"
        return None

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
            try:
                self._watch(outcome, health)
            finally:  # a marker being written is finished before the launch ends
                self._marks.shutdown(wait=True)

    def _watch(self, outcome: _Outcome, health: _HealthWatch) -> None:
        last_event = time.monotonic()
        while True:
            with contextlib.suppress(queue.Empty):
                event = self._events.get(timeout=0.5)
                last_event = time.monotonic()
                self._deliver(event)
                continue
            self._check_stops()
            if self._mark_error is not None:
                raise self._mark_failure(*self._mark_error)
            if not self._thread.is_alive():  # workers dropped by the loop's end look dead
                self._marks.shutdown(wait=True)
                self._drain()
                if self._mark_error is not None:
                    raise self._mark_failure(*self._mark_error)
                self._check_stops()
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

    def _check_stops(self) -> None:
        """Raise for a requested stop (first: Ctrl-C makes workers fail too) or a divergence."""
        if self.stop is not None and self.stop.signum is not None:
            self._drain()
            raise Interrupted(self.stop.signum)
        if self._diverged is not None:
            self._drain()
            raise self._divergence_error(self._diverged)

    def _divergence_error(self, diverged: Divergence) -> DexrlError:
        last = last_complete(self.run_dir)
        run = self.run_dir
        where = last_complete_fact(self.run_dir)
        if last is not None:
            hint = (f"lower the learning rate (actor.optim.lr, actor.optim.value_lr), then "
                    f"`dexrl resume {run} --step {last.step} actor.optim.lr=... "
                    "--allow-changes`")
        else:
            hint = ("lower the learning rate (actor.optim.lr, actor.optim.value_lr), then "
                    f"`dexrl resume {run} actor.optim.lr=... --allow-changes` (it starts the "
                    "run again from step 0)")
        return DexrlError(
            f"training diverged at step {diverged.step}: {diverged.reason}; {where}",
            f"{hint}; runner.divergence.action=warn only reports such steps",
            code="training-diverged",
        )

    def _unhealthy(self) -> bool:
        """A node of the run is lost or one of its workers died (the health watch's check)."""
        return self._lost_node() is not None or bool(run_worker_deaths())

    def _deliver(self, event: Progress) -> None:
        if self.on_progress is not None:
            with self.output.terminal():
                self.on_progress(event)

    def _drain(self) -> None:
        while not self._events.empty():
            self._deliver(self._events.get_nowait())

    def _runner_error(self, outcome: _Outcome) -> DexrlError:
        time.sleep(1.0)  # a worker failure makes RLinf's loop trip over None results: let it land
        exc = outcome.error
        if disk_full(exc):
            return self._disk_full(disk_full_folder(exc, self.run_dir))
        if self.failure.event.is_set() or self._unhealthy():
            return self._worker_failure()
        print(outcome.tb, file=sys.stderr)
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
        deaths = run_worker_deaths()
        causes = failed_task_causes(wait_s=0.0 if deaths else 10.0)
        if not deaths and any(_knock_on("\n".join([text, *lines])) for _, text, lines in causes):
            time.sleep(KNOCK_ON_WAIT_S)  # a peer's death, which Ray records a moment later
            deaths = run_worker_deaths()
        # A lost node explains every failure on it; wait for Ray to notice when it may be that.
        maybe_node = (not causes and not deaths) or any(d.reason == "NODE_DIED" for d in deaths) \
            or any("node" in c[1].lower() for c in causes)
        lost = self._lost_node(wait_s=NODE_DEATH_WAIT_S if maybe_node else 0.0)
        if lost is not None:
            return lost
        for death in deaths:  # Ray's own words stay in the log
            print(f"dexrl: Ray's record of {death.label(self.node_ranks)}: {death.raw}",
                  file=sys.stderr)
        if not causes and not deaths:
            return DexrlError(f"an RLinf worker failed during step {self.step + 1}",
                              f"the worker's traceback is in {self.log_hint}",
                              code="training-worker-failed")
        if any(disk_full_cause("\n".join(lines)) for _, _, lines in causes) or (
                any("file write failed" in text for _, text, _ in causes)
                and self._disk_nearly_full()):  # torch.save's stream writer names no errno
            return self._disk_full(str(self.run_dir / "checkpoints"))
        memory = out_of_memory(causes)
        if memory is not None:
            role, kind, (name, summary, lines) = memory
            return self._out_of_memory(role, kind, f"{name}: {summary}", lines[-4:])
        killed = next((d for d in deaths if d.out_of_memory), None)
        if killed is not None:
            return self._out_of_memory(killed.role, "host",
                                       f"{killed.label(self.node_ranks)}: {killed.ended}", [])
        died = [d for d in deaths if not d.raised]
        if died:
            return self._death_error(died)
        if causes:
            name, summary, lines = causes[0]
            return DexrlError(
                f"RLinf worker {name} failed during step {self.step + 1}: {summary}; "
                f"{last_complete_fact(self.run_dir)}",
                f"fix the cause (its traceback is in {self.log_hint}), then "
                f"{self._resume_command()}",
                details=lines[-8:],
                code="training-worker-failed",
            )
        first = deaths[0]
        return DexrlError(
            f"{first.label(self.node_ranks)} failed during step {self.step + 1}: {first.ended}; "
            f"{last_complete_fact(self.run_dir)}",
            f"fix the cause (its traceback is in {self.log_hint}), then "
            f"{self._resume_command()}",
            code="training-worker-failed",
        )

    def _out_of_memory(self, role: str, kind: str, what: str, details: list[str]
                       ) -> DexrlError:
        return DexrlError(
            f"the {role} worker group ran out of {kind} memory during step {self.step + 1} "
            f"({what})",
            OOM_FIXES.get(role, OOM_FIXES["actor"]),
            where=f"worker group {role}",
            details=details,
            code="training-out-of-memory",
        )

    def _death_error(self, died: list[WorkerDeath]) -> DexrlError:
        """A worker process that ended (not one that raised): which, how, and how to go on."""
        first, others = died[0], died[1:]
        return DexrlError(
            f"{first.label(self.node_ranks)} died during step {self.step + 1}: {first.ended}; "
            f"{last_complete_fact(self.run_dir)}",
            f"{self._resume_command()} (or pass --max-restarts N to train or resume to restart "
            f"by itself); Ray's report is in {self.log_hint}",
            details=[f"also dead: {d.label(self.node_ranks)}: {d.ended}" for d in others],
            code="training-worker-died",
        )

    def _resume_command(self) -> str:
        """The exact command that goes on from the last complete checkpoint."""
        last = last_complete(self.run_dir)
        if last is None:
            return (f"`dexrl resume {self.run_dir}` starts the run again from step 0 (no "
                    "checkpoint is complete)")
        return f"`dexrl resume {self.run_dir}` continues from {last.path.name}"

    def _disk_nearly_full(self) -> bool:
        """Under 64 MiB free where the run writes its checkpoints."""
        try:
            return shutil.disk_usage(self.run_dir).free < 64 * 2**20
        except OSError:
            return False

    def _disk_full(self, folder: str) -> DexrlError:
        resume = f"`dexrl resume {self.run_dir}`"
        return disk_full_error(f"{folder} during step {self.step + 1}",
                               facts=[last_complete_fact(self.run_dir)],
                               hint=f"free space on that disk, then {resume}")

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


