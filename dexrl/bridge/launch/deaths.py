"""A dead Ray worker in words: which worker it was (its role, RLinf group and rank, node and pid)
and how it ended (a signal, an exit code, the kernel's or Ray's out-of-memory killer).

Read from Ray's own records rather than from its text: the ``ActorDeathCause`` protobuf of Ray's
actor table (``ActorDiedErrorContext``: pid, actor name, node address, reason; ``OomContext``
when Ray's memory monitor killed it), then, for a worker on this machine, the worker's own log
file (Ray's handler writes ``*** SIGSEGV received`` there) and the kernel log (the OOM killer's
``Killed process PID``). Ray's message says how a worker ended only for a SIGTERM; for a SIGKILL,
an ``os._exit`` or a crash in native code it says "connection error": then the words say which of
those it may have been. Ray's raw text goes to the run's log, never to the error line.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dexrl.cluster import WORKER_NAME

# The classes dexrl launches (dexrl.bridge.launch.workers); RLinf's own short-lived helper actors
# die on purpose and are not failures.
WORKER_CLASSES = frozenset({"DexrlActor", "DexrlRollout", "DexrlEnv", "DexrlAsyncActor",
                            "DexrlAsyncRollout", "DexrlAsyncEnv"})
ROLES = {"DexrlActor": "actor", "DexrlRollout": "rollout", "DexrlEnv": "env"}
# Ray's reasons for an actor whose owner dropped every handle (ActorDiedErrorContext.Reason):
# OUT_OF_SCOPE, or REF_DELETED once lineage references are gone too (both seen with Ray 2.60).
RELEASED = frozenset({"OUT_OF_SCOPE", "REF_DELETED"})
_SIGNAL_IN_LOG = re.compile(r"\*\*\* (SIG[A-Z]+) received")
_EXIT_CODE = re.compile(r"exits with an exit code (-?\d+)")
_KERNEL_OOM = (re.compile(r"Killed process (\d+)"), re.compile(r"oom-kill:.*\bpid=(\d+)"))
VANISHED = ("its process ended without a word to Ray: a SIGKILL, the kernel's OOM killer or a "
            "crash in native code (`dmesg` on its node names an OOM kill)")
KMSG = Path("/dev/kmsg")
_LOG_TAIL = 64 * 1024


def role_of(name: str) -> str:
    """The worker group (``actor``, ``rollout``, ``env``) of a worker class or of one of its
    calls (``DexrlAsyncEnv.interact``); the name's first part for another class."""
    plain = name.replace("Async", "", 1)
    return next((r for cls, r in ROLES.items() if plain.startswith(cls)), name.split(".")[0])


@dataclass(frozen=True)
class WorkerDeath:
    """One of the run's workers that Ray reports dead.

    Attributes:
        cls: Its class (``DexrlEnv``).
        name: Its Ray actor name, RLinf's ``group:rank`` (``EnvGroup:0``).
        pid: Its process id (0 when Ray never learned it).
        node_ip: The address of its node.
        node_id: Ray's id of its node.
        reason: Ray's ``ActorDiedErrorContext.Reason`` (``WORKER_DIED``, ``NODE_DIED`` ...).
        ended: How it ended, in words (``killed by SIGSEGV``).
        raised: It raised an exception (while starting): a failure of its code, not a death.
        out_of_memory: The kernel's OOM killer or Ray's memory monitor killed it.
        raw: Ray's own text, for the log.
    """

    cls: str
    name: str
    pid: int
    node_ip: str
    node_id: str
    reason: str
    ended: str
    raised: bool = False
    out_of_memory: bool = False
    raw: str = ""

    @property
    def role(self) -> str:
        """``actor``, ``rollout`` or ``env``."""
        return role_of(self.cls)

    def label(self, node_ranks: Mapping[str, int] | None = None) -> str:
        """``the env worker EnvGroup:0 (rank 0, pid 8553 on node 0, 10.0.0.2)``."""
        match = WORKER_NAME.match(self.name)
        facts = [f"rank {match['rank']}"] if match else []
        if self.pid:
            facts.append(f"pid {self.pid}")
        rank = (node_ranks or {}).get(self.node_id)
        node = f"node {rank}, {self.node_ip}" if rank is not None else f"node {self.node_ip}"
        facts.append(node if self.node_ip or rank is not None else "node unknown")
        name = f" {self.name}" if self.name else ""
        return f"the {self.role} worker{name} ({', '.join(facts)})"


def worker_deaths(rows: Iterable[Mapping[str, Any]], *, local_node: str | None = None,
                  logs_dir: Path | None = None, kernel_log: str | None = None
                  ) -> list[WorkerDeath]:
    """The run's workers that died while running, from rows of Ray's actor table.

    Workers killed on purpose (``ray.kill``: RLinf's or dexrl's clean-up) and workers released by
    their owner (the driver's teardown at the end of a run) are left out.

    Args:
        rows: This job's actor rows (:func:`dexrl.cluster.job_actors`).
        local_node: Ray's id of this machine's node: its workers' log files and the kernel log
            are read (the others' are on their own machines).
        logs_dir: Ray's session log folder on this machine.
        kernel_log: The kernel log's text (None: read :data:`KMSG` when a local worker vanished).
    """
    deaths = []
    for row in rows:
        if row.get("State") != "DEAD" or row.get("ActorClassName") not in WORKER_CLASSES:
            continue
        death = _death(row, local_node, logs_dir, kernel_log)
        if death is not None:
            deaths.append(death)
    return deaths


def _death(row: Mapping[str, Any], local_node: str | None, logs_dir: Path | None,
           kernel_log: str | None) -> WorkerDeath | None:
    cause = row.get("DeathCause")
    ctx = cause.actor_died_error_context if cause is not None else None
    reason = _reason_name(ctx.reason) if ctx is not None else "UNSPECIFIED"
    message = ctx.error_message if ctx is not None else ""
    if reason == "RAY_KILL" or "ray.kill" in message or reason in RELEASED:
        return None
    address = row.get("Address") or {}
    pid = int((ctx.pid if ctx is not None else 0) or row.get("Pid") or 0)
    node_id = str(address.get("NodeID") or "")
    local = local_node is not None and node_id == local_node
    raw = str(cause).strip() if cause is not None else "no death cause recorded"
    ended, raised, oom = _how_it_ended(cause, reason, message, pid if local else 0,
                                       logs_dir, kernel_log)
    return WorkerDeath(str(row.get("ActorClassName")), str(row.get("Name") or ""), pid,
                       str((ctx.node_ip_address if ctx is not None else "")
                           or address.get("IPAddress") or ""),
                       node_id, reason, ended, raised, oom, raw)


def _reason_name(reason: int) -> str:
    from ray.core.generated import common_pb2

    try:
        return common_pb2.ActorDiedErrorContext.Reason.Name(reason)
    except ValueError:
        return "UNSPECIFIED"


def _how_it_ended(cause: Any, reason: str, message: str, local_pid: int,
                  logs_dir: Path | None, kernel_log: str | None) -> tuple[str, bool, bool]:
    """(words, raised, out of memory) for one death cause; ``local_pid`` is the worker's pid
    when it ran on this machine (its log and the kernel log are here), else 0."""
    if cause is None:
        return "Ray recorded no cause", False, False
    if cause.HasField("oom_context"):
        return "killed by Ray's memory monitor: its node ran low on memory", False, True
    if cause.HasField("creation_task_failure_context"):
        text = cause.creation_task_failure_context.formatted_exception_string
        last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "an exception")
        return f"raised while starting: {last.strip()}", True, False
    if reason == "NODE_DIED":
        info = cause.actor_died_error_context.node_death_info.reason_message
        return "its node died" + (f" ({info})" if info else ""), False, False
    if reason == "OWNER_DIED":
        return "its owner (the driver) died", False, False
    kernel = (kernel_log if kernel_log is not None else _read_kernel_log()) if local_pid else ""
    if local_pid and _oom_killed(local_pid, kernel):
        return "killed by the kernel's OOM killer (out of host memory)", False, True
    signal_name = (_signal_in_worker_log(logs_dir, local_pid) if local_pid and logs_dir
                   else None)
    if signal_name is not None:
        return f"killed by {signal_name}", False, False
    code = _EXIT_CODE.search(message)
    if "receives a SIGTERM" in message:
        return f"stopped by SIGTERM (exit code {code[1]})" if code else "stopped by SIGTERM", \
            False, False
    if code is not None:
        return f"exited with code {code[1]}", False, False
    if "connection error" in message or "End of file" in message:
        return VANISHED, False, False
    first = message.split(". ")[0].strip() or f"Ray's reason: {reason}"
    return first, False, False


def _oom_killed(pid: int, kernel_log: str) -> bool:
    return any(int(m[1]) == pid for pattern in _KERNEL_OOM for m in pattern.finditer(kernel_log))


def _read_kernel_log() -> str:
    """The kernel's ring buffer, as far as this process may read it ("" when it may not)."""
    records = []
    with contextlib.suppress(OSError):
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
        try:
            while True:
                try:
                    record = os.read(fd, 8192)
                except OSError as exc:
                    if exc.errno == errno.EPIPE:  # a record overwritten while reading: go on
                        continue
                    break  # EAGAIN: the end of the buffer
                if not record:
                    break
                records.append(record.decode("utf-8", "replace").partition(";")[2])
        finally:
            os.close(fd)
    return "".join(records)


def _signal_in_worker_log(logs_dir: Path, pid: int) -> str | None:
    """The fatal signal Ray's handler wrote into the worker's ``worker-*-PID.err`` file."""
    for path in logs_dir.glob(f"worker-*-{pid}.err"):
        try:
            with path.open("rb") as handle:
                handle.seek(max(0, path.stat().st_size - _LOG_TAIL))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        found = _SIGNAL_IN_LOG.findall(text)
        if found:
            return found[-1]
    return None
