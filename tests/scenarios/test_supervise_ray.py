"""Dead-worker detection against a real Ray started without its dashboard (no state API).

``ray start --include-dashboard=false`` is common on shared clusters; the checks must answer
there in well under a second and never delay the progress the main thread delivers. A dead
worker is named in words: its role, rank, pid and node, and how it ended (a signal, an exit).
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from omegaconf import OmegaConf

from dexrl.bridge.launch import deaths, failures
from dexrl.bridge.launch import supervisor as supervising
from dexrl.bridge.launch.deaths import VANISHED, WorkerDeath
from dexrl.bridge.launch.spec import LaunchOptions, LaunchSpec
from dexrl.bridge.launch.supervisor import FailureSignal, Output, Progress, Supervisor
from dexrl.errors import DexrlError

pytestmark = pytest.mark.spawns  # Ray: one private instance for the module


def _spec(run_dir: Path, *, total: int) -> LaunchSpec:
    return LaunchSpec(OmegaConf.create(), run_dir, False, None, total,
                      LaunchOptions(verbose=True, stall_timeout=120))


@pytest.fixture(scope="module")
def ray_without_dashboard() -> Iterator[None]:
    ray.init(include_dashboard=False, num_cpus=2, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


@ray.remote(max_restarts=0)
class DexrlEnv:  # named as dexrl's env worker class, which the check looks for
    def ping(self) -> int:
        return os.getpid()

    def crash(self) -> None:
        os._exit(1)

    def work(self) -> None:
        time.sleep(120)


def _crash_one_and_kill_one() -> None:
    crashed, killed = DexrlEnv.remote(), DexrlEnv.remote()
    ray.get([crashed.ping.remote(), killed.ping.remote()])
    crashed.crash.remote()
    ray.kill(killed)  # killed on purpose: not a failure
    deadline = time.monotonic() + 30
    while not failures.run_worker_deaths() and time.monotonic() < deadline:
        time.sleep(0.2)


def test_a_dead_worker_is_named_without_the_dashboard(ray_without_dashboard: None) -> None:
    _crash_one_and_kill_one()
    start = time.monotonic()
    found = failures.run_worker_deaths()
    assert time.monotonic() - start < 1.0
    assert [d.cls for d in found] == ["DexrlEnv"]  # the one killed with ray.kill is left out
    assert found[0].ended == VANISHED and "{" not in found[0].ended


def _deaths_of(names: list[str], timeout_s: float = 30.0) -> dict[str, WorkerDeath]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = {d.name: d for d in failures.run_worker_deaths() if d.name in names}
        if len(found) == len(names) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_a_killed_worker_is_named_with_its_rank_pid_node_and_signal(
        ray_without_dashboard: None) -> None:
    """Ray's record says "connection error" for SIGKILL and SIGSEGV alike: the signal comes from
    the worker's own log, SIGTERM from Ray's message; nothing of Ray's JSON reaches the words."""
    how = {"EnvGroup:10": signal.SIGKILL, "EnvGroup:11": signal.SIGSEGV,
           "EnvGroup:12": signal.SIGTERM}
    workers = {name: DexrlEnv.options(name=name).remote() for name in how}
    pids = dict(zip(how, ray.get([w.ping.remote() for w in workers.values()]), strict=True))
    calls = [w.work.remote() for w in workers.values()]  # killed mid-call, as in a step
    time.sleep(0.5)
    for name, signum in how.items():
        os.kill(pids[name], signum)
    found = _deaths_of(list(how))
    assert set(found) == set(how)
    assert found["EnvGroup:10"].ended == VANISHED
    assert found["EnvGroup:11"].ended == "killed by SIGSEGV"
    assert found["EnvGroup:12"].ended.startswith("stopped by SIGTERM")
    label = found["EnvGroup:11"].label({found["EnvGroup:11"].node_id: 0})
    assert label.startswith(f"the env worker EnvGroup:11 (rank 11, pid {pids['EnvGroup:11']}, "
                            "node 0, ")
    assert "actorDiedErrorContext" not in label + found["EnvGroup:11"].ended
    del calls


def _death(reason: str) -> object:
    """A death cause as Ray's GCS records it (its own protobuf message)."""
    from ray.core.generated import common_pb2

    cause = common_pb2.ActorDeathCause()
    cause.actor_died_error_context.reason = getattr(common_pb2.ActorDiedErrorContext, reason)
    cause.actor_died_error_context.error_message = f"died: {reason}"
    return cause


@pytest.mark.parametrize("reason", ["OUT_OF_SCOPE", "REF_DELETED"])
def test_a_worker_released_by_its_owner_is_not_a_failure(monkeypatch: pytest.MonkeyPatch,
                                                         reason: str) -> None:
    """At the end of a run the driver drops its workers (Ray: OUT_OF_SCOPE, or REF_DELETED as
    CI's Ray said); a health check that lands then must not report them (seen in the two-node
    resume and in CI's smoke resume)."""
    rows = [{"State": "DEAD", "ActorClassName": "DexrlEnv", "DeathCause": _death(reason)},
            {"State": "DEAD", "ActorClassName": "DexrlEnv", "DeathCause": _death("WORKER_DIED")}]
    monkeypatch.setattr(failures, "job_actors", lambda: rows)
    found = failures.run_worker_deaths()
    assert [d.reason for d in found] == ["WORKER_DIED"]  # the crash stays a failure


def test_a_run_that_finished_is_not_failed_by_a_late_health_check(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Once RLinf's loop has returned, workers its teardown dropped may look dead to the watch;
    the run still finished. The control: the same dead worker while the loop runs fails it."""
    dead = [WorkerDeath("DexrlRollout", "RolloutGroup:0", 42, "10.0.0.2", "n", "WORKER_DIED",
                        VANISHED)]
    monkeypatch.setattr(supervising, "run_worker_deaths", lambda: dead)
    monkeypatch.setattr(supervising, "failed_task_causes", lambda **kw: [])

    def supervisor() -> Supervisor:
        return Supervisor(_spec(tmp_path, total=1), failure=FailureSignal(),
                          on_progress=None, output=Output(tmp_path / "log", verbose=True),
                          health_check_s=0.05)

    finished = supervisor()

    def loop_then_teardown() -> None:
        finished.step_done(1, 1, {})
        time.sleep(0.3)  # the watch trips here, before the main thread sees the loop end

    finished.run(loop_then_teardown)
    assert finished.step == 1
    with pytest.raises(DexrlError, match="rollout worker RolloutGroup:0 .* died during step 1"):
        supervisor().run(lambda: time.sleep(5))


@pytest.mark.slow
def test_ray_reports_a_released_worker_as_released(ray_without_dashboard: None) -> None:
    """The row the test above builds is the one Ray writes when the last handle goes."""
    from dexrl.cluster import job_actors

    def released() -> int:
        return sum(1 for a in job_actors() if a.get("State") == "DEAD"
                   and any(r in str(a.get("DeathCause")) for r in deaths.RELEASED))

    before = released()
    worker = DexrlEnv.remote()
    ray.get(worker.ping.remote())
    del worker
    gc.collect()
    deadline = time.monotonic() + 60
    while released() == before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert released() > before
    assert not [d for d in failures.run_worker_deaths() if d.reason in deaths.RELEASED]


def test_the_supervisor_stops_a_run_whose_worker_died(ray_without_dashboard: None,
                                                      tmp_path: Path) -> None:
    _crash_one_and_kill_one()
    release = threading.Event()
    supervisor = Supervisor(_spec(tmp_path, total=2), failure=FailureSignal(),
                            on_progress=None, output=Output(tmp_path / "log", verbose=True),
                            health_check_s=0.2)
    start = time.monotonic()
    with pytest.raises(DexrlError, match="the env worker .* died during step 1") as err:
        supervisor.run(lambda: release.wait(60))  # RLinf waiting on the dead worker forever
    assert err.value.code == "training-worker-died"
    assert "no checkpoint of this run is complete" in err.value.message
    assert f"`dexrl resume {tmp_path}` starts the run again from step 0" in err.value.hint
    release.set()
    assert time.monotonic() - start < 20


def test_a_slow_health_check_never_delays_progress(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    def slow_cluster() -> list:
        time.sleep(3.0)  # a state query that hangs, as Ray's did without its dashboard
        return []

    monkeypatch.setattr(supervising, "run_worker_deaths", slow_cluster)
    delivered: list[tuple[Progress, float]] = []
    supervisor = Supervisor(_spec(tmp_path, total=8), failure=FailureSignal(),
                            on_progress=lambda p: delivered.append((p, time.monotonic())),
                            output=Output(tmp_path / "log", verbose=True),
                            health_check_s=0.1)
    sent: list[float] = []

    def loop() -> None:
        for step in range(1, 9):
            time.sleep(0.4)
            sent.append(time.monotonic())
            supervisor.step_done(step, 8, {})

    supervisor.run(loop)
    assert [p.step for p, _ in delivered] == list(range(1, 9))
    assert max(at - t for (_, at), t in zip(delivered, sent, strict=True)) < 1.0
