"""Run RLinf's embodied PPO pipeline from a composed dexrl config: :func:`launch`, the one call
``train``/``resume`` make.

Design notes: docs/design/launch-and-supervision.md.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from dexrl.bridge.launch.events import Progress
from dexrl.bridge.launch.failures import FailureSignal
from dexrl.bridge.launch.output import Output
from dexrl.bridge.launch.spec import LaunchSpec
from dexrl.bridge.launch.stop import Interrupted, StopSignals
from dexrl.bridge.launch.supervisor import Supervisor
from dexrl.bridge.launch.worker_probe import check_registration, first_failure
from dexrl.bridge.registry import EXT_MODULE, registered_model_types
from dexrl.checkpoints.files.steps import last_complete_fact, mark_complete
from dexrl.cluster import NodeRecord, attach, cluster_nodes, lost_node_check, pinned_address
from dexrl.config.compose import renders
from dexrl.config.modes import run_mode
from dexrl.config.owned_keys import check_run_folder
from dexrl.config.run_watch import watch_from
from dexrl.config.settings import Settings
from dexrl.errors import DexrlError, disk_full, disk_full_error, disk_full_folder, one_line
from dexrl.hub.home import dexrl_home
from dexrl.hub.libero_assets import libero_config_dir, use_libero_config_dir
from dexrl.runs.layout import LOG_FILE, WORKER_LOGS
from dexrl.runs.record import use_wandb_run_id
from dexrl.runs.state import begin, watch_private_ray

__all__ = ["BANNER", "Progress", "launch", "worker_env", "gl_backend", "wait_for_nodes"]

BANNER = "[Dexbotic RL] Launching from Dexbotic entrypoint with RLinf as backend."
INTERRUPTED = 130


# Environment --------------------------------------------------------------------------------

def gl_backend(probe: bool) -> str:
    """The headless OpenGL backend for MuJoCo: ``$MUJOCO_GL`` if set, else EGL.

    With ``probe``, EGL is tried in a subprocess first and OSMesa is the fallback; a probe that
    cannot import MuJoCo at all is reported as that, not as a GL failure.
    """
    chosen = os.environ.get("MUJOCO_GL")
    if chosen or not probe:
        return chosen or "egl"
    for backend in ("egl", "osmesa"):
        if _gl_works(backend):
            return backend
    raise DexrlError(
        "no headless OpenGL for LIBERO's renderer: EGL and OSMesa both failed",
        "install Mesa's EGL (apt-get install libegl1) or OSMesa (libosmesa6), "
        "or set MUJOCO_GL to a backend that works",
        code="libero-no-headless-gl",
    )


NO_MUJOCO = 3  # the probe's exit code when MuJoCo itself cannot be imported
_GL_PROBE = f"""
import sys
try:
    import mujoco
except ImportError as exc:
    print(exc, file=sys.stderr)
    sys.exit({NO_MUJOCO})
c = mujoco.GLContext(8, 8); c.make_current(); c.free()
"""


def _gl_works(backend: str) -> bool:
    env = {**os.environ, "MUJOCO_GL": backend, "PYOPENGL_PLATFORM": backend}
    try:
        done = subprocess.run([sys.executable, "-c", _GL_PROBE], env=env, capture_output=True,
                              text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return False
    if done.returncode == NO_MUJOCO:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "ImportError"
        raise DexrlError(f"LIBERO's renderer needs MuJoCo, which does not import: {reason}",
                         "reinstall with `make install`, or `pip install 'mujoco>=3.3,<3.4'`",
                         code="libero-mujoco-import")
    return done.returncode == 0


WORKER_ENV_KEYS = ("RLINF_EXT_MODULE", "MUJOCO_GL", "PYOPENGL_PLATFORM", "LIBERO_CONFIG_PATH",
                   "TOKENIZERS_PARALLELISM", "TORCHINDUCTOR_CACHE_DIR")


def worker_env(*, probe_gl: bool, ext_module: str = EXT_MODULE) -> dict[str, str]:
    """Environment variables every RLinf worker needs (values already set by the user win).

    Args:
        probe_gl: Probe the OpenGL backend (:func:`gl_backend`) instead of assuming EGL.
        ext_module: RLinf extension module the workers load.
    """

    gl = gl_backend(probe=probe_gl)
    defaults = (ext_module, gl, gl, str(libero_config_dir()), "false", str(compile_cache_dir()))
    env = {k: os.environ.get(k) or v for k, v in zip(WORKER_ENV_KEYS, defaults, strict=True)}
    env["RLINF_EXT_MODULE"] = ext_module  # the caller's choice, never a stale value
    if env["TORCHINDUCTOR_CACHE_DIR"] == _torch_default_cache_dir():
        env["TORCHINDUCTOR_CACHE_DIR"] = defaults[-1]  # torch's own pick, not the user's
    return env


def compile_cache_dir() -> Path:
    """Where the rollout's compiled code is kept between starts and resumes (torch inductor's
    cache: graphs, kernels, autotuning): ``<dexrl home>/compile-cache``. torch's default is a
    folder in /tmp, which a reboot or a cluster's job clean-up empties; with it gone every start
    compiles again (1-3 minutes per batch size at real size)."""

    return dexrl_home() / "compile-cache"


def _torch_default_cache_dir() -> str | None:
    """The folder torch picks when ``TORCHINDUCTOR_CACHE_DIR`` is unset (torch writes it into the
    environment once it compiles or reads the cache), so that its pick is not taken for the
    user's."""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:
        return None
    return os.path.abspath(default_cache_dir())


def _prepare(cfg: DictConfig, *, smoke: bool, ext_module: str) -> dict[str, str]:
    """Get this process ready to launch (:func:`launch`'s first part): worker environment and
    driver-side registration.

    RLinf copies the driver's environment to its workers, so the variables are set in this
    process's environment for them; dexrl's own code gets them from the return value. RLinf
    loads ``ext_module`` only in workers; its ``validate_cfg`` checks ``model_type`` in the
    driver, hence the ``register()`` call here.

    Args:
        cfg: The composed config (read only: model type for the error message).
        smoke: Probe the OpenGL backend instead of assuming EGL (when the config renders).
        ext_module: RLinf extension module to register (tests pass their own).

    Returns:
        The worker environment (:data:`WORKER_ENV_KEYS`).
    """

    use_libero_config_dir()  # before anything imports libero: that import writes its config
    env = worker_env(probe_gl=smoke and renders(cfg), ext_module=ext_module)
    os.environ.update(env)
    try:
        importlib.import_module(ext_module).register()
    except Exception as exc:
        raise DexrlError(f"cannot register dexrl's policies: {type(exc).__name__}: {exc}",
                         "run `dexrl doctor`; reinstall dexrl if it reports a broken install",
                         where=f"extension module {ext_module}",
                         code="rlinf-register-failed") from None
    model_type = Settings.read(cfg).actor.model.model_type

    if model_type and not registered_model_types([model_type]):
        raise DexrlError(f"model type '{model_type}' is not registered with RLinf",
                         "use a shipped config (`dexrl configs`)", where="actor.model.model_type",
                         code="rlinf-model-type-unregistered")
    return env


# Ray ----------------------------------------------------------------------------------------

def wait_for_nodes(num_nodes: int, timeout_s: float, count_alive: Callable[[], int],
                   *, poll_s: float = 2.0) -> None:
    """Wait until ``count_alive()`` reaches ``num_nodes`` (RLinf itself waits forever)."""
    deadline = time.monotonic() + timeout_s
    while (alive := count_alive()) < num_nodes:
        if time.monotonic() >= deadline:
            missing = num_nodes - alive
            raise DexrlError(
                f"only {alive} of {num_nodes} Ray nodes joined within {timeout_s:.0f} s "
                f"({missing} missing)",
                "start Ray on the missing nodes (`ray start --address=<head>:6379`) or lower "
                "cluster.num_nodes",
                where="cluster.num_nodes",
                code="ray-nodes-missing",
            )
        time.sleep(poll_s)


def _ray_address(ray_address: str | None) -> str | None:
    address = ray_address or os.environ.get("RAY_ADDRESS")
    return address if address and address != "local" else None


def _check_nodes(cfg: DictConfig, address: str | None, node_wait_s: float) -> None:
    num_nodes = int(cfg.cluster.num_nodes)
    if address is None:
        if num_nodes > 1:
            raise DexrlError(
                f"cluster.num_nodes={num_nodes}, but without a Ray address dexrl starts a private "
                f"single-node Ray instance ({num_nodes - 1} node(s) missing)",
                "start Ray on every node and pass --ray-address <head>:6379 (or set RAY_ADDRESS)",
                where="cluster.num_nodes",
                code="ray-address-needed",
            )
        return
    import ray


    try:
        wait_for_nodes(num_nodes, node_wait_s, attach(address))
    except ConnectionError as exc:
        raise DexrlError(f"cannot reach the Ray cluster at {address}: {exc}",
                         "check the address and that `ray start --head` runs there; Ray 2.60 "
                         "heads use token authentication by default: export RAY_AUTH_MODE=token "
                         "(or start the head with RAY_AUTH_MODE=disabled)",
                         code="ray-unreachable") from None
    finally:
        ray.shutdown()  # only disconnects: RLinf's Cluster must make the first connection


def _ray_start_fix(exc: BaseException) -> str | None:
    """The hint when ``exc`` is Ray failing to start its processes, else None: a daemon that
    cannot be executed (an OSError) or its node start-up timeout (a bare Exception,
    ray/_private/node.py)."""
    if isinstance(exc, OSError):
        return ("check Ray's installation (`dexrl doctor`; its daemons under ray/core must be "
                "executable) or reinstall with `make install`")
    if type(exc) is Exception and "timed out during startup" in str(exc):
        return ("Ray gives its raylet 30 s to register: retry when the machine is less loaded "
                "(`uptime`), and check Ray with `dexrl doctor`")
    return None


def _create_cluster(cfg: DictConfig, address: str | None) -> Any:
    """RLinf's Cluster on the chosen Ray: attached when asked, else a private local instance."""
    from rlinf.scheduler import Cluster

    if Cluster.has_initialized():
        raise RuntimeError("launch() runs once per process: RLinf's Cluster already exists")
    previous = os.environ.get("RAY_ADDRESS")
    # RLinf calls ray.init(address="auto"), which joins any Ray on this machine; "local" makes
    # it start a fresh instance owned by this process instead.
    os.environ["RAY_ADDRESS"] = address or "local"
    try:
        log_dir = None
        if cfg.runner.get("per_worker_log", False):
            log_dir = os.path.join(cfg.runner.logger.log_path, WORKER_LOGS)
        return Cluster(cluster_cfg=cfg.cluster, distributed_log_dir=log_dir)
    except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception on its start timeout
        fix = _ray_start_fix(exc)
        if address is not None or fix is None or disk_full(exc):
            raise
        raise DexrlError(f"Ray could not start its local instance: {one_line(exc)}", fix,
                         code="ray-start-failed") from None
    finally:
        if previous is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = previous


def _stop_ray() -> None:
    """Kill this run's actors (attached clusters outlive the driver), then disconnect."""
    import ray

    if not ray.is_initialized():
        return
    try:
        for name in ray.util.list_named_actors():
            try:
                ray.kill(ray.get_actor(name), no_restart=True)
            except Exception:  # already gone
                continue
    finally:
        ray.shutdown()


def _node_check(nodes: Sequence[NodeRecord], address: str | None, run_dir: Path
                ) -> Callable[[int], DexrlError | None] | None:
    """Watch the nodes of an attached cluster (a private one lives and dies with this process)."""
    if address is None:
        return None

    return lost_node_check(nodes, str(run_dir))


# Launch -------------------------------------------------------------------------------------

def _validate(cfg: DictConfig) -> DictConfig:
    from rlinf.config import validate_cfg

    try:
        return validate_cfg(cfg)
    except (AssertionError, NotImplementedError, ValueError) as exc:
        raise DexrlError(f"RLinf rejected the config: {one_line(exc, typed=False)}",
                         "fix the key it names; `dexrl validate ... --print` shows the config",
                         code="rlinf-config-rejected",
                         ) from None


def _check_workers_register(cfg: DictConfig, ext_module: str, env: Mapping[str, str]) -> None:
    types = sorted({str(cfg.actor.model.model_type)})
    failure = first_failure(check_registration(types, ext_module, env=env))
    if failure is not None:
        failure.raise_for_failure()


def _pipeline(cfg: DictConfig, cluster: Any, listener: Supervisor) -> Callable[[], None]:
    def run() -> None:
        from rlinf.utils.placement import HybridComponentPlacement

        from dexrl.bridge.launch.workers import WORKERS

        actor, rollout, env, runner_cls = WORKERS[run_mode(cfg)]
        placement = HybridComponentPlacement(cfg, cluster)
        groups = {}
        for role, cls, group_cfg in (("actor", actor, cfg.actor),
                                     ("rollout", rollout, cfg.rollout),
                                     ("env", env, cfg.env)):
            groups[role] = cls.create_group(cfg).launch(
                cluster, name=group_cfg.group_name,
                placement_strategy=placement.get_strategy(role))
        runner = runner_cls(cfg=cfg, listener=listener, **groups)
        runner.init_workers()
        runner.run()

    return run


def launch(spec: LaunchSpec, on_progress: Callable[[Progress], None] | None = None) -> int:
    """Prepare this process, record the launch in the run folder and train with RLinf until step
    ``spec.total``.

    In order: the worker environment and the driver-side registration of dexrl's policies
    (:func:`_prepare`); the run's W&B id and ``run-state.json`` (kept current every step and
    closed at the end, ``finished``, ``interrupted`` or ``failed``); then RLinf's pipeline under
    the supervisor.

    Args:
        spec: The launch (:class:`~dexrl.bridge.launch.spec.LaunchSpec`): config, run folder
            (created; RLinf's log path), the step it stops at, the checkpoint it continues from,
            the Ray cluster to attach to (else ``$RAY_ADDRESS``; without either, a private
            local Ray instance is started and stopped with the run), ``--verbose`` (RLinf's and
            the workers' output on the terminal instead of the log) and the stall timeout.
        on_progress: Called in the calling thread for every :class:`Progress` event; its
            prints reach the terminal.

    Returns:
        0 when the run finished; 130 when interrupted with Ctrl-C (SIGINT), 143 with SIGTERM:
        the run stays resumable (:mod:`dexrl.bridge.launch.stop`).

    Raises:
        DexrlError: a policy that does not register, missing nodes, unregistered policies in
            workers, a config RLinf rejects, a failed worker (out of memory included), a stall,
            a diverged step (``training-diverged``), a full disk (``disk-full``). Ray is
            stopped and ``run-state.json`` closed (``failed``) before it propagates.
    """
    spec = replace(spec, run_dir=Path(os.path.abspath(spec.run_dir)))
    run_dir = spec.run_dir
    check_run_folder(spec.cfg, run_dir, spec.resume_from.path if spec.resume_from else None)
    start_step = spec.start_step
    stop = StopSignals(say=lambda text: print(text, file=sys.stderr, flush=True))
    stop.install()
    tracker = None
    status, error = "failed", None
    try:
        env = _prepare(spec.cfg, smoke=spec.smoke, ext_module=spec.ext_module)
        run_dir.mkdir(parents=True, exist_ok=True)
        use_wandb_run_id(run_dir)
        tracker = begin(run_dir, start_step)

        def show(event: Progress) -> None:
            if on_progress is not None:
                on_progress(event)
            if event.kind == "step":
                tracker.step_done(event.step)

        code = _supervised(spec, env, on_progress=show, stop=stop)
        status = "finished" if code == 0 else "interrupted"
        return code
    except KeyboardInterrupt as exc:  # Interrupted, or a Ctrl-C before the handler was in
        status = "interrupted"
        return exc.exit_code if isinstance(exc, Interrupted) else INTERRUPTED
    except DexrlError as exc:
        error = exc.code  # run-state.json says how it failed (--max-restarts reads it)
        raise
    except OSError as exc:
        if not disk_full(exc):
            raise
        error = "disk-full"
        raise _disk_full(exc, run_dir) from None
    finally:
        stop.may_raise = False  # closing the record must not be cut short by a second signal
        if tracker is not None:
            _close_record(tracker, status, error)
        stop.restore()


def _close_record(tracker: Any, status: str, error: str | None = None) -> None:
    """Close ``run-state.json``; a full disk keeps its last content (it says ``running`` for a
    process that is gone: the next command reads that as a killed run) and must not mask the
    failure being reported."""
    try:
        tracker.end(status, error)
    except OSError as exc:
        print(f"dexrl: could not close {tracker.run_dir}/run-state.json: {exc}", file=sys.stderr)


def _disk_full(exc: OSError, run_dir: Path) -> DexrlError:
    return disk_full_error(disk_full_folder(exc, run_dir), facts=[last_complete_fact(run_dir)],
                           hint=f"free space on that disk, then `dexrl resume {run_dir}`")


def _supervised(spec: LaunchSpec, env: Mapping[str, str], *,
                on_progress: Callable[[Progress], None], stop: StopSignals) -> int:
    """Ray, RLinf's cluster and pipeline under the supervisor, output routed to the log."""
    cfg, run_dir = spec.cfg, spec.run_dir
    address = _ray_address(spec.options.ray_address)
    output = Output(run_dir / LOG_FILE, spec.options.verbose)
    failure = FailureSignal()
    t0 = time.monotonic()

    def phase(name: str) -> None:  # start-up timings, for the log
        print(f"dexrl: {name} after {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)

    own_ray = contextlib.ExitStack()
    with output:
        stop.say_with(output.say)  # its lines reach the terminal, not the log
        output.say(BANNER)
        try:
            _check_nodes(cfg, address, spec.node_wait_s)
            cluster = _create_cluster(cfg, address)
            stop.install()  # Ray's init installed a SIGTERM handler of its own
            own_ray.enter_context(pinned_address())  # state API calls: this run's Ray only
            nodes = cluster_nodes(cluster)
            if address is None:  # reaped at once should this process be killed
                watch_private_ray(run_dir)
            phase("Ray and RLinf's cluster up")
            failure.install()
            _check_workers_register(cfg, spec.ext_module, env)
            phase("extension module checked in the workers")
            cfg = _validate(cfg)
            phase("config validated by RLinf")
            supervisor = Supervisor(spec, failure=failure, output=output,
                                    on_progress=on_progress,
                                    node_check=_node_check(nodes, address, run_dir),
                                    on_checkpoint=mark_complete,
                                    divergence=watch_from(cfg), stop=stop,
                                    node_ranks={n.node_id: n.rank for n in nodes})
            stop.check()
            stop.may_raise = False  # from here the supervisor polls the request
            supervisor.run(_pipeline(cfg, cluster, supervisor))
        except KeyboardInterrupt as exc:
            stop.may_raise = False
            return exc.exit_code if isinstance(exc, Interrupted) else INTERRUPTED
        finally:
            stop.may_raise = False
            _stop_ray()
            own_ray.close()
    return 0
