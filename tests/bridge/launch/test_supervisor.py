"""Faults of a long run, injected into the supervisor in-process: diverged steps, a full disk, an
out-of-memory worker and a stop request (the real reproductions: test_run_faults_real.py)."""

from __future__ import annotations

import contextlib
import errno
import io
import math
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from dexrl.bridge.launch import supervisor as supervise
from dexrl.bridge.launch.deaths import VANISHED, WorkerDeath
from dexrl.bridge.launch.events import Progress
from dexrl.bridge.launch.failures import FailureSignal, out_of_memory
from dexrl.bridge.launch.output import Output, _Local, _Routed
from dexrl.bridge.launch.spec import LaunchOptions, LaunchSpec
from dexrl.bridge.launch.stop import Interrupted, StopSignals
from dexrl.bridge.launch.supervisor import Supervisor
from dexrl.checkpoints.files.steps import list_checkpoints, mark_complete
from dexrl.errors import DexrlError
from dexrl.runs.divergence import DivergenceWatch, step_health
from dexrl.runs.layout import MARKER

NAN = math.nan
CLEAN = {"env/return": 0.5, "train/actor/policy_loss": 0.1, "train/critic/value_loss": 0.2,
         "train/actor/grad_norm": 1.0, "train/actor/updates": 4.0,
         "train/actor/updates_skipped": 0.0}


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """No worker died: these faults are injected in-process, with no Ray to ask."""
    monkeypatch.setattr(supervise, "run_worker_deaths", lambda: [])


def _metrics(**changes: float) -> dict[str, float]:
    out = dict(CLEAN)
    out.update({k.replace("__", "/"): v for k, v in changes.items()})
    return out


def _save(run_dir: Path, step: int) -> Path:
    path = run_dir / "checkpoints" / f"global_step_{step}"
    (path / "actor").mkdir(parents=True)
    (path / "actor" / "weights").write_text("w")
    return path


def _supervisor(run_dir: Path, seen: list[Progress], *, watch: DivergenceWatch | None = None,
                stop: StopSignals | None = None, on_checkpoint=mark_complete) -> Supervisor:
    spec = LaunchSpec(OmegaConf.create(), run_dir, False, None, 9,
                      LaunchOptions(verbose=True, stall_timeout=30))
    return Supervisor(spec, failure=FailureSignal(), on_progress=seen.append,
                      output=Output(run_dir / "log", verbose=True), on_checkpoint=on_checkpoint,
                      divergence=watch or DivergenceWatch(), stop=stop)


def _steps(supervisor: Supervisor, run_dir: Path, metrics: list[dict[str, float]],
           *, save_first: bool = True) -> None:
    """RLinf's loop: each step saved and logged (synchronous order unless ``save_first``)."""
    supervisor.workers_ready()
    for step, m in enumerate(metrics, start=1):
        if save_first:
            supervisor.checkpoint_saved(step, _save(run_dir, step))
        supervisor.step_done(step, 9, m)
        if not save_first:
            supervisor.checkpoint_saved(step, _save(run_dir, step))


def _complete(run_dir: Path) -> list[int]:
    return [c.step for c in list_checkpoints(run_dir) if c.complete]


# Which steps can be trusted --------------------------------------------------------------------

def test_step_health_reads_nonfinite_numbers_and_skipped_updates() -> None:
    assert step_health(1, CLEAN).clean
    health = step_health(2, _metrics(train__actor__policy_loss=NAN,
                                     train__actor__updates_skipped=3.0))
    assert not health.clean and not health.all_skipped and not health.rollout_broken
    assert health.summary() == "3/4 optimizer updates skipped, train/actor/policy_loss nan"
    assert step_health(3, _metrics(train__actor__updates_skipped=4.0)).all_skipped
    assert step_health(4, _metrics(env__return=math.inf)).rollout_broken
    # an actor that does not count skipped updates: a non-finite mean norm means one at least
    legacy = {"train/actor/grad_norm": NAN, "env/return": 0.0}
    assert step_health(5, legacy).skipped == 1
    # RLinf's rollout statistics are NaN by design for an empty batch: not a divergence
    assert step_health(6, {**CLEAN, "rollout/advantages_max": NAN}).clean


def test_the_watch_stops_at_the_first_step_that_cannot_be_trusted() -> None:
    watch = DivergenceWatch("stop", skipped_steps=3)
    partial = step_health(1, _metrics(train__actor__updates_skipped=1.0))
    assert watch.observe(partial) is None
    assert watch.observe(step_health(2, CLEAN)) is None  # a clean step resets the count
    assert watch.observe(step_health(3, _metrics(train__actor__updates_skipped=1.0))) is None
    assert watch.observe(step_health(4, _metrics(train__actor__updates_skipped=1.0))) is None
    third = watch.observe(step_health(5, _metrics(train__actor__updates_skipped=1.0)))
    assert third is not None and third.step == 5 and "3 step(s) in a row" in third.reason
    assert DivergenceWatch().observe(step_health(1, _metrics(env__return=NAN))) is not None
    everything = DivergenceWatch().observe(step_health(1, _metrics(
        train__actor__updates_skipped=4.0)))
    assert everything is not None and "every optimizer update was skipped" in everything.reason
    warn = DivergenceWatch("warn", skipped_steps=1)
    assert warn.observe(step_health(1, _metrics(env__return=NAN))) is None
    with pytest.raises(ValueError, match="runner.divergence.action"):
        DivergenceWatch("ignore")


def test_a_diverged_run_stops_and_marks_nothing_after_the_last_clean_step(
        tmp_path: Path) -> None:
    seen: list[Progress] = []
    supervisor = _supervisor(tmp_path, seen)
    steps = [CLEAN, CLEAN, _metrics(train__actor__policy_loss=NAN,
                                    train__actor__updates_skipped=2.0),
             _metrics(env__return=NAN, train__actor__policy_loss=NAN,
                      train__actor__updates_skipped=4.0),
             CLEAN]  # RLinf runs on until the main thread stops it: never marked
    with pytest.raises(DexrlError) as err:
        supervisor.run(lambda: _steps(supervisor, tmp_path, steps))
    assert err.value.code == "training-diverged"
    assert "training diverged at step 4" in err.value.message
    assert "env/return nan" in err.value.message
    assert "the last complete checkpoint is global_step_2" in err.value.message
    assert f"dexrl resume {tmp_path} --step 2" in err.value.hint
    assert _complete(tmp_path) == [1, 2]
    unmarked = [(p.step, p.note) for p in seen if p.kind == "unmarked"]
    assert unmarked[0][0] == 3 and "step 3 was not clean (2/4 optimizer updates" in unmarked[0][1]


def test_without_a_clean_checkpoint_the_hint_starts_again(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path, [])
    with pytest.raises(DexrlError) as err:
        supervisor.run(lambda: _steps(supervisor, tmp_path, [
            _metrics(train__actor__policy_loss=NAN, train__actor__updates_skipped=3.0),
            _metrics(env__return=NAN)]))
    assert "no checkpoint of this run is complete" in err.value.message
    assert "starts the run again from step 0" in err.value.hint
    assert _complete(tmp_path) == []


def test_saving_after_the_step_is_logged_is_marked_too(tmp_path: Path) -> None:
    """RLinf's asynchronous runner logs a step before it saves it."""
    seen: list[Progress] = []
    supervisor = _supervisor(tmp_path, seen, watch=DivergenceWatch("warn"))
    supervisor.run(lambda: _steps(supervisor, tmp_path, [
        CLEAN, _metrics(train__actor__updates_skipped=1.0), CLEAN], save_first=False))
    assert _complete(tmp_path) == [1, 3]
    # markers are written off the training thread: a checkpoint's event may follow the next step
    assert [p.kind for p in seen if p.kind != "checkpoint"] == ["ready", "step", "step",
                                                                "unmarked", "step"]
    assert [p.step for p in seen if p.kind == "checkpoint"] == [1, 3]


def test_warn_goes_on_but_never_vouches_for_an_unclean_step(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path, [], watch=DivergenceWatch("warn", skipped_steps=1))
    supervisor.run(lambda: _steps(supervisor, tmp_path, [
        CLEAN, _metrics(env__return=NAN), CLEAN]))
    assert _complete(tmp_path) == [1, 3]


# A full disk ---------------------------------------------------------------------------------

def _enospc(path: Path) -> OSError:
    return OSError(errno.ENOSPC, "No space left on device", str(path))


def test_a_full_disk_while_marking_is_one_error_naming_the_last_complete_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    def mark(path: Path, step: int) -> None:
        if step == 2:
            raise _enospc(path / MARKER)
        mark_complete(path, step)

    supervisor = _supervisor(tmp_path, [], on_checkpoint=mark)
    with pytest.raises(DexrlError) as err:
        supervisor.run(lambda: _steps(supervisor, tmp_path, [CLEAN, CLEAN, CLEAN]))
    assert err.value.code == "disk-full"
    assert f"cannot write to {tmp_path / 'checkpoints' / 'global_step_2'}" in err.value.message
    assert "the last complete checkpoint is global_step_1" in err.value.message
    assert f"dexrl resume {tmp_path}" in err.value.hint
    assert _complete(tmp_path) == [1]


def test_a_worker_whose_disk_filled_up_is_a_disk_full_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "OSError: [Errno 28] No space left on device: '/x/global_step_3/actor/model.pt'"
    monkeypatch.setattr(supervise, "failed_task_causes",
                        lambda **kw: [("DexrlActor.save_checkpoint", text, [text])])
    supervisor = _supervisor(tmp_path, [])

    def loop() -> None:
        _steps(supervisor, tmp_path, [CLEAN])
        supervisor.failure.event.set()

    with pytest.raises(DexrlError) as err:
        supervisor.run(loop)
    assert err.value.code == "disk-full"
    assert "global_step_1" in err.value.message and "during step 2" in err.value.message


def test_the_log_writer_survives_its_disk_being_full() -> None:
    class FullDisk(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    terminal = io.StringIO()
    routed = _Routed(FullDisk(), terminal, _Local())
    assert routed.write("lost\n") == 5
    routed.flush()
    local = _Local()
    local.terminal = True
    _Routed(FullDisk(), terminal, local).write("on the terminal\n")
    assert terminal.getvalue() == "on the terminal\n"


# Out of memory -------------------------------------------------------------------------------

CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
            "a total capacity of 79.19 GiB of which 1.02 GiB is free.")


def test_an_out_of_memory_worker_names_its_group_and_the_settings_that_cut_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervise, "failed_task_causes",
                        lambda **kw: [("DexrlActor.run_training", CUDA_OOM,
                                       ["Traceback", CUDA_OOM])])
    supervisor = _supervisor(tmp_path, [])

    def loop() -> None:
        _steps(supervisor, tmp_path, [CLEAN, CLEAN])
        supervisor.failure.event.set()

    with pytest.raises(DexrlError) as err:
        supervisor.run(loop)
    assert err.value.code == "training-out-of-memory"
    assert err.value.where == "worker group actor"
    assert "ran out of GPU memory during step 3" in err.value.message
    assert "actor.micro_batch_size" in err.value.hint and "prefix_cache" in err.value.hint


def test_out_of_memory_kinds_and_groups() -> None:
    host = "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory."
    assert out_of_memory([("DexrlEnv.interact", host, [host])])[:2] == ("env", "host")
    assert out_of_memory([("DexrlAsyncEnv.interact", host, [host])])[:2] == ("env", "host")
    assert out_of_memory([("DexrlRollout.generate", CUDA_OOM, [CUDA_OOM])])[:2] == (
        "rollout", "GPU")
    assert out_of_memory([("DexrlActor.run_training", "ValueError: x", ["ValueError: x"])]) is None


# Stopping ------------------------------------------------------------------------------------

def test_a_stop_request_ends_supervision_and_leaves_later_saves_unmarked(
        tmp_path: Path) -> None:
    stop = StopSignals(say=lambda text: None)
    stop.may_raise = False
    seen: list[Progress] = []
    supervisor = _supervisor(tmp_path, seen, stop=stop)
    release = threading.Event()

    def loop() -> None:
        _steps(supervisor, tmp_path, [CLEAN])
        stop._handle(signal.SIGINT, None)  # Ctrl-C while step 2 saves
        supervisor.checkpoint_saved(2, _save(tmp_path, 2))
        supervisor.step_done(2, 9, CLEAN)
        release.wait(30)  # RLinf's loop does not notice: the supervisor must

    with pytest.raises(Interrupted) as err:
        supervisor.run(loop)
    release.set()
    assert err.value.exit_code == 130
    assert _complete(tmp_path) == [1]
    assert ("unmarked", 2) in [(p.kind, p.step) for p in seen]


def test_the_first_signal_stops_and_later_ones_only_say_so() -> None:
    said: list[str] = []
    stop = StopSignals(say=said.append)
    with pytest.raises(Interrupted) as err:
        stop._handle(signal.SIGTERM, None)
    assert err.value.exit_code == 143 and stop.requested.is_set()
    stop._handle(signal.SIGINT, None)  # no raise: the clean-up must finish
    stop._handle(signal.SIGINT, None)
    assert said[0].startswith("SIGTERM received: stopping the run")
    assert said[1:] == ["already stopping: the run folder is being closed, please wait"]
    with pytest.raises(Interrupted):
        stop.check()


# The launch around the supervisor --------------------------------------------------------------

@pytest.fixture
def quick_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``launch`` with its preparation and supervised part replaced by ``body``."""
    from dexrl.bridge.launch import driver
    from dexrl.config.compose import compose
    from dexrl.config.owned_keys import set_run_folder

    cfg = compose("reach_ppo_dexbotic_pi0")
    run_dir = tmp_path / "run"
    set_run_folder(cfg, run_dir)
    monkeypatch.setattr(driver, "_prepare", lambda cfg, **kw: {})

    def go(body) -> int:
        monkeypatch.setattr(driver, "_supervised", lambda *a, **kw: body(run_dir))
        return driver.launch(LaunchSpec(cfg, run_dir, False, None, 3))

    return go, run_dir


def _status(run_dir: Path) -> str:
    from dexrl.runs.state import read

    return read(run_dir)["status"]


def test_a_full_disk_in_the_driver_is_one_error_and_a_closed_record(quick_launch) -> None:
    go, run_dir = quick_launch

    def body(run_dir: Path) -> int:
        raise _enospc(run_dir / "run-state.json")

    with pytest.raises(DexrlError) as err:
        go(body)
    assert err.value.code == "disk-full" and str(run_dir) in err.value.message
    assert "no checkpoint of this run is complete" in err.value.message
    assert _status(run_dir) == "failed"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_launch_exits_128_plus_the_signal(quick_launch, signum: int,
                                                         code: int) -> None:
    """The handlers found before the launch are given back, whatever they were: Python's
    default in a terminal, SIG_IGN in a background job (``nohup``, a scheduler, ``make test &``).
    Handlers of the test's own stand in for them, so the check cannot pass by accident."""
    go, run_dir = quick_launch

    def body(run_dir: Path) -> int:
        raise Interrupted(signum)

    def before_int(signum: int, frame: object) -> None: ...
    def before_term(signum: int, frame: object) -> None: ...

    with _handlers({signal.SIGINT: before_int, signal.SIGTERM: before_term}):
        assert go(body) == code
        assert _status(run_dir) == "interrupted"
        assert signal.getsignal(signal.SIGINT) is before_int  # handlers given back
        assert signal.getsignal(signal.SIGTERM) is before_term


def test_after_a_stop_late_signals_stay_harmless() -> None:
    said: list[str] = []
    stop = StopSignals(say=said.append)
    with _handlers({}):
        stop.install()
        with pytest.raises(Interrupted):
            signal.raise_signal(signal.SIGINT)
        stop.restore()  # the launch is over, the process about to print and exit
        signal.raise_signal(signal.SIGINT)  # pressed once more: no KeyboardInterrupt
        assert said == ["SIGINT received: stopping the run (workers, then Ray; a few seconds)"]


@contextlib.contextmanager
def _handlers(during: dict[int, object]) -> Iterator[None]:
    """Set ``during``'s handlers for the block, then give SIGINT and SIGTERM back the handlers
    they had before it (Python's default, or SIG_IGN when the tests run in the background)."""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        for signum, handler in during.items():
            signal.signal(signum, handler)
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


# A dead worker -------------------------------------------------------------------------------

def _dead(ended: str = VANISHED, **changes: object) -> WorkerDeath:
    fields = dict(cls="DexrlEnv", name="EnvGroup:0", pid=4242, node_ip="10.0.0.2", node_id="n1",
                  reason="WORKER_DIED", ended=ended)
    fields.update(changes)
    return WorkerDeath(**fields)  # type: ignore[arg-type]


def _fail_after_two_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          deaths: list[WorkerDeath], tasks: list | None = None) -> DexrlError:
    monkeypatch.setattr(supervise, "run_worker_deaths", lambda: deaths)
    monkeypatch.setattr(supervise, "failed_task_causes", lambda **kw: tasks or [])
    supervisor = _supervisor(tmp_path, [])
    supervisor.node_ranks = {"n1": 1}

    def loop() -> None:
        _steps(supervisor, tmp_path, [CLEAN, CLEAN])
        supervisor.failure.event.set()

    with pytest.raises(DexrlError) as err:
        supervisor.run(loop)
    return err.value


def test_a_dead_worker_is_one_line_naming_it_the_last_checkpoint_and_the_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    # the env's death makes the actor's call fail too: the death is the story, not that failure
    knock_on = [("DexrlActor.run_training", "RuntimeError: channel closed", ["x"])]
    err = _fail_after_two_steps(tmp_path, monkeypatch, [_dead("killed by SIGSEGV")], knock_on)
    assert err.code == "training-worker-died"
    assert err.message == ("the env worker EnvGroup:0 (rank 0, pid 4242, node 1, 10.0.0.2) died "
                           "during step 3: killed by SIGSEGV; the last complete checkpoint is "
                           "global_step_2")
    assert f"`dexrl resume {tmp_path}` continues from global_step_2" in err.hint
    assert "--max-restarts" in err.hint
    assert "Ray's record of the env worker" in capsys.readouterr().err  # Ray's text: the log


def test_a_worker_the_oom_killer_took_is_out_of_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    err = _fail_after_two_steps(tmp_path, monkeypatch, [
        _dead("killed by the kernel's OOM killer (out of host memory)", out_of_memory=True)])
    assert err.code == "training-out-of-memory" and err.where == "worker group env"
    assert "ran out of host memory during step 3" in err.message
    assert "env.train.total_num_envs" in err.hint


def test_a_worker_that_raised_while_starting_is_a_worker_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    err = _fail_after_two_steps(tmp_path, monkeypatch, [
        _dead("raised while starting: zipfile.BadZipFile: bad", raised=True)])
    assert err.code == "training-worker-failed"  # deterministic: never restarted by itself
    assert "zipfile.BadZipFile" in err.message and "global_step_2" in err.message


def test_a_call_that_failed_for_a_dead_peer_waits_for_the_death_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray records a death a moment after the calls to the dead worker fail: a failure that
    says so looks again; the control, a plain exception, is reported as it is."""
    looks: list[int] = []

    def deaths() -> list[WorkerDeath]:
        looks.append(1)
        return [] if len(looks) == 1 else [_dead()]

    monkeypatch.setattr(supervise, "KNOCK_ON_WAIT_S", 0.0)
    peer = [("DexrlActor.run_training", "ray.exceptions.ActorDiedError: The actor died", ["x"])]
    err = _fail_after_two_steps(tmp_path, monkeypatch, [], peer)
    monkeypatch.setattr(supervise, "run_worker_deaths", deaths)
    supervisor = _supervisor(tmp_path, [])
    supervisor.step = 2
    assert supervisor._worker_failure().code == "training-worker-died"
    assert err.code == "training-worker-failed"  # no death on record at all: the failure it is
    looks.clear()
    monkeypatch.setattr(supervise, "failed_task_causes",
                        lambda **kw: [("DexrlActor.run_training", "ValueError: x", ["x"])])
    assert supervisor._worker_failure().code == "training-worker-failed" and len(looks) == 1
