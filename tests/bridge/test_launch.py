"""Launch plumbing that needs no training run: node wait, run folder, output routing, watchdog."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from helpers.hidden_packages import env_without
from omegaconf import OmegaConf

from dexrl.bridge.launch import driver as launch
from dexrl.bridge.launch.events import Progress
from dexrl.bridge.launch.failures import FailureSignal, pending_calls
from dexrl.bridge.launch.output import Output
from dexrl.bridge.launch.spec import LaunchOptions, LaunchSpec, start_step
from dexrl.bridge.launch.supervisor import Supervisor
from dexrl.bridge.registry import EXT_MODULE
from dexrl.checkpoints.files.steps import Checkpoint, list_checkpoints, mark_complete
from dexrl.config.owned_keys import check_run_folder, set_run_folder
from dexrl.config.resume_rules import planned_steps
from dexrl.errors import DexrlError
from dexrl.runs.layout import MARKER, checkpoints_dir
from dexrl.runs.opened import load_run_config
from tests.helpers.checkpoints import latest_checkpoint


def _cfg(**runner: object) -> OmegaConf:
    return OmegaConf.create({"cluster": {"num_nodes": 1},
                             "runner": {"max_epochs": 1000, "max_steps": 3, **runner}})


# Nodes ---------------------------------------------------------------------------------------

GCS = "/site/ray/core/src/ray/gcs/gcs_server"
TIMED_OUT = ("The current node timed out during startup. This could happen because some of the "
             "raylet failed to startup or the GCS has become overloaded.")


@pytest.mark.parametrize(("address", "fault", "said"), [
    # a daemon without its executable bit (found on a GPU box)
    (None, OSError(13, os.strerror(13), GCS), "ray-start-failed"),
    (None, Exception(TIMED_OUT), "ray-start-failed"),  # Ray's 30 s, on an overloaded machine
    (None, OSError(28, os.strerror(28), GCS), None),  # a full disk: the CLI's disk-full line
    (None, ValueError("a bug"), None),  # anything else stays a bug's traceback
    ("10.0.0.1:6379", OSError(13, os.strerror(13), GCS), None),  # attached: checked before
])
def test_a_private_ray_that_cannot_start_is_one_error_line(
        monkeypatch: pytest.MonkeyPatch, address: str | None, fault: Exception,
        said: str | None) -> None:
    import rlinf.scheduler

    class Unstartable:
        def __init__(self, **_: object) -> None:
            raise fault

        @staticmethod
        def has_initialized() -> bool:
            return False

    monkeypatch.setattr(rlinf.scheduler, "Cluster", Unstartable)
    cfg = OmegaConf.create({"cluster": {"num_nodes": 1},
                            "runner": {"logger": {"log_path": "/tmp/x"}}})
    if said is None:
        with pytest.raises(type(fault)):
            launch._create_cluster(cfg, address)
        return
    with pytest.raises(DexrlError) as err:
        launch._create_cluster(cfg, address)
    assert err.value.code == said and str(fault).split(":")[0][:20] in err.value.message
    assert ("make install" if isinstance(fault, OSError) else "loaded") in err.value.hint
    assert os.environ.get("RAY_ADDRESS") != "local"


def test_node_wait_returns_once_enough_nodes_joined() -> None:
    counts = iter([1, 1, 2])
    launch.wait_for_nodes(2, timeout_s=5, count_alive=lambda: next(counts), poll_s=0.01)


def test_node_wait_gives_up_naming_the_missing_nodes() -> None:
    start = time.monotonic()
    with pytest.raises(DexrlError) as err:
        launch.wait_for_nodes(3, timeout_s=0.2, count_alive=lambda: 1, poll_s=0.05)
    assert time.monotonic() - start < 2
    assert err.value.code == "ray-nodes-missing"
    assert "only 1 of 3 Ray nodes joined" in err.value.message
    assert "2 missing" in err.value.message and err.value.where == "cluster.num_nodes"


def test_a_private_ray_instance_cannot_hold_several_nodes() -> None:
    cfg = OmegaConf.create({"cluster": {"num_nodes": 2}})
    with pytest.raises(DexrlError, match=r"1 node\(s\) missing") as err:
        launch._check_nodes(cfg, address=None, node_wait_s=60)
    assert err.value.code == "ray-address-needed"
    assert "--ray-address" in err.value.hint


@pytest.mark.slow
def test_attaching_waits_for_real_ray_nodes_then_gives_up(tmp_path: Path) -> None:
    """A one-node Ray cluster started here (our own process) cannot satisfy num_nodes=2."""
    # Token authentication (Ray's default for new clusters) would need the token exported here.
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    head = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, time, ray
            ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level="ERROR")
            print(ray.get_runtime_context().gcs_address, flush=True)
            sys.stdin.read()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )
    try:
        address = head.stdout.readline().strip()
        assert address, "the Ray head did not start"
        cfg = OmegaConf.create({"cluster": {"num_nodes": 2}})
        expected = r"only 1 of 2 Ray nodes joined within 2 s \(1 missing\)"
        with pytest.raises(DexrlError, match=expected):
            launch._check_nodes(cfg, address=address, node_wait_s=2)
    finally:
        head.stdin.close()  # the head exits and shuts its Ray instance down
        head.wait(timeout=60)


def test_ray_address_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert launch._ray_address(None) is None
    monkeypatch.setenv("RAY_ADDRESS", "local")
    assert launch._ray_address(None) is None
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert launch._ray_address(None) == "10.0.0.1:6379"
    assert launch._ray_address("10.0.0.2:6379") == "10.0.0.2:6379"


# Run folder and checkpoints --------------------------------------------------------------------

def _checkpoint(run_dir: Path, step: int, complete: bool) -> Path:
    path = checkpoints_dir(run_dir) / f"global_step_{step}"
    (path / "actor").mkdir(parents=True)
    if complete:
        mark_complete(path, step)
    return path


def _found(path: Path) -> Checkpoint:
    """The checkpoint folder as the run folder lists it (what a launch is given)."""
    return next(c for c in list_checkpoints(path.parents[1]) if c.path == path)


def test_latest_checkpoint_skips_incomplete_ones(tmp_path: Path) -> None:
    with pytest.raises(DexrlError) as err:
        latest_checkpoint(tmp_path)
    assert err.value.code == "checkpoint-none-complete"
    _checkpoint(tmp_path, 2, complete=True)
    _checkpoint(tmp_path, 10, complete=True)
    _checkpoint(tmp_path, 11, complete=False)
    assert latest_checkpoint(tmp_path).name == "global_step_10"


def test_resume_point_must_be_complete_and_before_the_end(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from dexrl.config.resume_rules import check_steps_left

    assert start_step(None) == 0
    assert start_step(_found(_checkpoint(tmp_path, 2, complete=True))) == 2
    with pytest.raises(DexrlError) as err:
        start_step(_found(_checkpoint(tmp_path, 1, complete=False)))
    assert err.value.code == "checkpoint-incomplete"
    cfg = OmegaConf.create({"runner": {"max_steps": 3, "max_epochs": 1000}})
    assert check_steps_left(cfg, 2) == 3
    with pytest.raises(DexrlError, match="already reached step 3 of 3") as err:
        check_steps_left(cfg, start_step(_found(_checkpoint(tmp_path, 3, complete=True))))
    assert err.value.code == "resume-nothing-left"


def test_planned_steps_is_capped_by_epochs() -> None:
    assert planned_steps(_cfg()) == 3
    assert planned_steps(_cfg(max_epochs=2)) == 2
    assert planned_steps(_cfg(max_steps=-1, max_epochs=7)) == 7


def test_run_folder_holds_logs_checkpoints_and_config(tmp_path: Path) -> None:
    cfg = _cfg(logger={"log_path": "../results", "experiment_name": "x"})
    with pytest.raises(RuntimeError, match="set_run_folder"):  # launch refuses an unset config
        check_run_folder(cfg, tmp_path, None)
    set_run_folder(cfg, tmp_path)
    check_run_folder(cfg, tmp_path, None)
    from dexrl.bridge.launch.workers import checkpoint_path

    assert checkpoint_path(cfg, 4) == checkpoints_dir(tmp_path) / "global_step_4"
    with pytest.raises(DexrlError, match="no config.yaml") as err:
        load_run_config(tmp_path / "elsewhere")
    assert err.value.code == "run-no-config"


def test_gl_backend_respects_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    assert launch.gl_backend(probe=True) == "osmesa"
    monkeypatch.delenv("MUJOCO_GL")
    assert launch.gl_backend(probe=False) == "egl"


@pytest.mark.spawns
def test_a_missing_mujoco_is_named_not_reported_as_a_gl_failure(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setenv("PYTHONPATH", env_without(tmp_path, ("mujoco",))["PYTHONPATH"])
    with pytest.raises(DexrlError, match="needs MuJoCo, which does not import: No module named "
                                         "'mujoco'") as err:
        launch.gl_backend(probe=True)
    assert err.value.code == "libero-mujoco-import"
    assert "OpenGL" not in str(err.value) and "mujoco" in err.value.hint


def test_only_configs_that_render_probe_opengl(monkeypatch: pytest.MonkeyPatch) -> None:
    from dexrl.config.compose import compose, renders

    assert not renders(compose("reach_ppo_dexbotic_pi0"))
    assert renders(compose("libero_spatial_ppo_dexbotic_pi0"))
    assert renders(compose("reach_ppo_dexbotic_pi0", ["~env.eval.dexrl_env"]), "eval")
    for var in launch.WORKER_ENV_KEYS:
        monkeypatch.setenv(var, "")  # recorded, so that what _prepare sets is undone
        monkeypatch.delenv(var)
    probes: list[str] = []
    monkeypatch.setattr(launch, "_gl_works", lambda backend: probes.append(backend) or True)
    launch._prepare(compose("reach_ppo_dexbotic_pi0"), smoke=True, ext_module=EXT_MODULE)
    assert probes == []
    monkeypatch.delenv("MUJOCO_GL")
    launch._prepare(compose("libero_spatial_ppo_dexbotic_pi0", ["+smoke=cpu"]), smoke=True,
                    ext_module=EXT_MODULE)
    assert probes == ["egl"]


def test_workers_keep_compiled_code_in_dexrls_home_unless_the_user_chose_a_folder(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """torch's own pick is a folder in /tmp (emptied by reboots and job clean-ups); dexrl's
    lives beside its downloads, so a resume or a new run starts without compiling again."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv("MUJOCO_GL", "egl")
    monkeypatch.setenv("DEXRL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    ours = str(tmp_path / "home" / "compile-cache")
    assert launch.worker_env(probe_gl=False)["TORCHINDUCTOR_CACHE_DIR"] == ours
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", os.path.abspath(default_cache_dir()))
    assert launch.worker_env(probe_gl=False)["TORCHINDUCTOR_CACHE_DIR"] == ours
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert launch.worker_env(probe_gl=False)["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")


def test_prepare_rejects_a_model_type_nobody_registers(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in launch.WORKER_ENV_KEYS:
        monkeypatch.delenv(var, raising=False)  # _prepare sets them; monkeypatch restores them
    monkeypatch.setenv("MUJOCO_GL", "egl")
    cfg = OmegaConf.create({"actor": {"model": {"model_type": "dexrl_nobody"}}})
    with pytest.raises(DexrlError, match="'dexrl_nobody' is not registered") as err:
        launch._prepare(cfg, smoke=False, ext_module=EXT_MODULE)
    assert err.value.code == "rlinf-model-type-unregistered"
    assert err.value.where == "actor.model.model_type"


# Output routing ------------------------------------------------------------------------------

ROUTING_SCRIPT = """
import os, sys, threading
from pathlib import Path
from dexrl.bridge.launch.output import Output
from dexrl.bridge.launch.spec import LaunchOptions, LaunchSpec, start_step

with Output(Path(sys.argv[1]), verbose=False) as out:
    print("python print goes to the log")
    os.write(2, b"C-level stderr goes to the log\\n")
    out.say("said on the terminal")
    with out.terminal():
        worker = threading.Thread(target=lambda: print("another thread goes to the log"))
        worker.start(); worker.join()
print("after the block: terminal again")
"""


@pytest.mark.spawns
def test_output_goes_to_the_log_except_what_dexrl_says(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "driver.log"
    done = subprocess.run([sys.executable, "-c", ROUTING_SCRIPT, str(log)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["said on the terminal", "after the block: terminal again"]
    assert done.stderr == ""
    logged = log.read_text()
    for line in ("python print goes to the log", "C-level stderr goes to the log",
                 "another thread goes to the log"):
        assert line in logged
    assert "said on the terminal" not in logged


# Supervision -----------------------------------------------------------------------------------

class WorkerGroupFuncResult:
    """Looks like RLinf's handle of a worker-group call to the stall diagnosis."""

    def __init__(self, group: str, func: str) -> None:
        self._worker_group = type("Group", (), {"worker_group_name": group})()
        self._func_name = func

    def done(self) -> bool:
        return False


def _supervisor(tmp_path: Path, stall_s: float, seen: list[Progress]) -> Supervisor:
    spec = LaunchSpec(OmegaConf.create(), tmp_path, False, None, 2,
                      LaunchOptions(verbose=True, stall_timeout=stall_s))
    return Supervisor(spec, failure=FailureSignal(), on_progress=seen.append,
                      output=Output(tmp_path / "log", verbose=True), on_checkpoint=mark_complete)


def test_stall_names_the_worker_group_rlinf_waits_on(tmp_path: Path) -> None:
    release = threading.Event()

    def stuck_loop() -> None:
        handle = WorkerGroupFuncResult("EnvGroup", "interact")  # noqa: F841 (read from the frame)
        release.wait(30)

    supervisor = _supervisor(tmp_path, stall_s=1.0, seen=[])
    start = time.monotonic()
    with pytest.raises(DexrlError) as err:
        supervisor.run(stuck_loop)
    release.set()
    assert time.monotonic() - start < 5
    assert err.value.code == "training-stalled"
    assert "no progress for 1 s during start-up" in err.value.message
    assert "EnvGroup.interact" in err.value.message


def test_pending_calls_reads_the_waiting_thread() -> None:
    release, ready = threading.Event(), threading.Event()

    def waiting() -> None:
        handle = WorkerGroupFuncResult("ActorGroup", "run_training")  # noqa: F841
        ready.set()
        release.wait(30)

    thread = threading.Thread(target=waiting, daemon=True)
    thread.start()
    ready.wait(5)
    try:
        assert pending_calls(thread) == ["ActorGroup.run_training"]
    finally:
        release.set()


def test_events_arrive_in_order_and_checkpoints_get_marked(tmp_path: Path) -> None:
    seen: list[Progress] = []
    supervisor = _supervisor(tmp_path, stall_s=30, seen=seen)
    ckpt = tmp_path / "checkpoints" / "global_step_1"
    (ckpt / "actor").mkdir(parents=True)
    (ckpt / "actor" / "weights").write_text("w")
    empty = tmp_path / "checkpoints" / "global_step_2"

    def loop() -> None:
        supervisor.workers_ready()
        supervisor.checkpoint_saved(1, ckpt)  # RLinf saves before it logs the step
        supervisor.step_done(1, 2, {"time/step": 3.0, "env/success_once": 0.5})
        supervisor.checkpoint_saved(2, empty)  # nothing written: never marked
        supervisor.step_done(2, 2, {})

    supervisor.run(loop)
    # the marker is written off RLinf's loop: its event may come after the next step's
    assert sorted((p.kind, p.step) for p in seen) == [("checkpoint", 1), ("ready", 0),
                                                      ("step", 1), ("step", 2)]
    assert [p.kind for p in seen if p.kind != "checkpoint"] == ["ready", "step", "step"]
    assert (ckpt / MARKER).is_file() and not (empty / MARKER).exists()
    assert seen[1].metrics == {"time/step": 3.0, "env/success_once": 0.5}


def test_a_loop_error_becomes_a_dexrl_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dexrl.bridge.launch import supervisor as supervise

    monkeypatch.setattr(supervise, "run_worker_deaths", lambda: [])

    def loop() -> None:
        raise AssertionError("resume_dir /x/actor does not exist.")

    with pytest.raises(DexrlError, match="stopped at step 0: AssertionError: resume_dir") as err:
        _supervisor(tmp_path, stall_s=30, seen=[]).run(loop)
    assert err.value.code == "training-loop-failed"
