"""A dead worker in words, from rows of Ray's actor table built with Ray's own protobuf messages
(the real Ray's rows: tests/scenarios/test_supervise_ray.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray.core.generated import common_pb2

from dexrl.bridge.launch.deaths import VANISHED, worker_deaths

HERE = "aa" * 28  # Ray's id of this machine's node
THERE = "bb" * 28
CONNECTION = ("The actor is dead because its worker process has died. Worker exit type: "
              "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error "
              "code 2. End of file. Some common causes include: (1) the process was killed by "
              "the OOM killer due to high memory usage")
SIGTERM = ("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
           "Worker exit detail: Worker exits unexpectedly. Worker exits with an exit code 1. The "
           "process receives a SIGTERM.")


def _row(message: str = CONNECTION, *, reason: str = "WORKER_DIED", pid: int = 4242,
         node: str = HERE, cls: str = "DexrlEnv", name: str = "EnvGroup:1",
         cause: common_pb2.ActorDeathCause | None = None) -> dict:
    if cause is None:
        cause = common_pb2.ActorDeathCause()
        ctx = cause.actor_died_error_context
        ctx.reason = getattr(common_pb2.ActorDiedErrorContext, reason)
        ctx.error_message, ctx.pid, ctx.name = message, pid, name
        ctx.node_ip_address, ctx.class_name = "10.0.0.2", cls
    return {"State": "DEAD", "ActorClassName": cls, "Name": name, "Pid": pid,
            "Address": {"NodeID": node, "IPAddress": "10.0.0.2"}, "DeathCause": cause}


def _one(row: dict, **kw: object) -> object:
    kw.setdefault("local_node", HERE)
    kw.setdefault("kernel_log", "")
    found = worker_deaths([row], **kw)  # type: ignore[arg-type]
    assert len(found) == 1
    return found[0]


def test_a_worker_is_named_by_role_group_rank_pid_and_node() -> None:
    death = _one(_row())
    assert death.label() == "the env worker EnvGroup:1 (rank 1, pid 4242, node 10.0.0.2)"
    assert death.label({HERE: 0}) == "the env worker EnvGroup:1 (rank 1, pid 4242, node 0, " \
        "10.0.0.2)"
    assert _one(_row(cls="DexrlAsyncActor", name="ActorGroup:3")).role == "actor"
    assert "actor_died_error_context" in death.raw  # Ray's own record, for the log


def test_how_a_worker_ended_in_words(tmp_path: Path) -> None:
    assert _one(_row(SIGTERM)).ended == "stopped by SIGTERM (exit code 1)"
    assert _one(_row(CONNECTION)).ended == VANISHED
    exited = CONNECTION.replace("unexpectedly exits with a connection error code 2. End of file",
                                "exits with an exit code 3")
    assert _one(_row(exited)).ended == "exited with code 3"
    (tmp_path / "worker-abc-ffffffff-4242.err").write_text(
        ":actor_name:DexrlEnv\n*** SIGSEGV received at time=1 on cpu 1 ***\nFatal Python error")
    assert _one(_row(), logs_dir=tmp_path).ended == "killed by SIGSEGV"
    assert _one(_row(pid=4243), logs_dir=tmp_path).ended == VANISHED  # another pid's log
    node = _one(_row("node gone", reason="NODE_DIED"))
    assert node.ended == "its node died" and node.reason == "NODE_DIED"


def test_the_kernel_oom_killer_and_rays_memory_monitor_are_out_of_memory() -> None:
    kernel = ("Out of memory: Killed process 4242 (ray::DexrlEnv) total-vm:1kB\n"
              "oom-kill:constraint=CONSTRAINT_NONE,task=ray::DexrlEnv,pid=4242,uid=0\n")
    death = _one(_row(), kernel_log=kernel)
    assert death.out_of_memory and "kernel's OOM killer" in death.ended
    assert not _one(_row(pid=4243), kernel_log=kernel).out_of_memory  # another process
    # the control: a worker on another machine is never judged by this machine's kernel log
    assert not _one(_row(node=THERE), kernel_log=kernel).out_of_memory
    cause = common_pb2.ActorDeathCause()
    cause.oom_context.error_message = "Task was killed due to the node running low on memory."
    monitor = _one(_row(cause=cause))
    assert monitor.out_of_memory and "Ray's memory monitor" in monitor.ended


def test_a_worker_that_raised_while_starting_is_a_failure_not_a_death() -> None:
    cause = common_pb2.ActorDeathCause()
    cause.creation_task_failure_context.formatted_exception_string = (
        "Traceback (most recent call last):\n  File x\nzipfile.BadZipFile: File is not a zip file")
    death = _one(_row(cause=cause))
    assert death.raised and death.ended.endswith("zipfile.BadZipFile: File is not a zip file")


@pytest.mark.parametrize(("message", "reason"), [
    ("The actor was killed by ray.kill", "RAY_KILL"),  # RLinf's or dexrl's clean-up
    ("released", "OUT_OF_SCOPE"), ("released", "REF_DELETED"),  # the driver's teardown
])
def test_workers_ended_on_purpose_are_not_deaths(message: str, reason: str) -> None:
    assert worker_deaths([_row(message, reason=reason)], kernel_log="") == []
    assert worker_deaths([{**_row(), "ActorClassName": "NodeProbe"}], kernel_log="") == []
    assert worker_deaths([{**_row(), "State": "ALIVE"}], kernel_log="") == []
