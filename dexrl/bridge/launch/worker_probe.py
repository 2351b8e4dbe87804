"""Prove that RLinf's Ray workers load dexrl's extension module and see dexrl's model types.

RLinf 0.3.0 imports ``$RLINF_EXT_MODULE`` inside each Ray worker and, when that fails, only logs
a warning; the run then dies much later with "model type not supported". :func:`check_registration`
runs RLinf's own loader in a real Ray worker (a remote task with the environment RLinf workers
get), records what it logs, and checks that every expected model type resolves there. ``train``
fails fast on the result; ``dexrl doctor`` reports it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dexrl.bridge.registry import EXT_MODULE, registered_model_types
from dexrl.cluster import live_nodes
from dexrl.errors import DexrlError
from dexrl.versions import installed_versions

EXT_MODULE_VAR = "RLINF_EXT_MODULE"


@dataclass(frozen=True)
class RoundTrip:
    """What a Ray worker saw when it loaded the extension module.

    Attributes:
        ok: The module loaded, ``register()`` ran and every expected model type resolved.
        message: One line saying what happened (the failure, when not ok).
        ext_module: The module named by ``RLINF_EXT_MODULE``.
        model_types: The expected model types that resolved in the worker.
        node: Address of the node the worker ran on.
        traceback: The failure's traceback without locals, when there was an exception.
        details: Extra lines for the error (e.g. the versions that differ).
        python: The worker's interpreter.
        versions: (distribution, version) pairs installed in the worker.
    """

    ok: bool
    message: str
    ext_module: str
    model_types: tuple[str, ...] = ()
    node: str = ""
    traceback: str = ""
    details: tuple[str, ...] = field(default=())
    python: str = ""
    versions: tuple[tuple[str, str | None], ...] = ()

    def raise_for_failure(self) -> None:
        """Raise a :class:`DexrlError` describing the failure; do nothing when ok."""
        if self.ok:
            return
        tail = [line for line in self.traceback.splitlines() if line.strip()][-6:]
        raise DexrlError(
            f"RLinf workers cannot use dexrl's policies: {self.message}",
            f"check that `python -c 'import {self.ext_module}'` works with the Python the Ray "
            "workers use (the same virtual environment on every node), then run `dexrl doctor`",
            where=f"{EXT_MODULE_VAR}={self.ext_module}" + (f" on {self.node}" if self.node else ""),
            details=[*self.details, *tail],
            code="rlinf-workers-cannot-load",
        )


class _Records(logging.Handler):
    """Keeps what RLinf's loader logs at WARNING and above."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _exception_of(record: logging.LogRecord) -> BaseException | None:
    if record.exc_info and record.exc_info[1] is not None:
        return record.exc_info[1]
    # RLinf logs an ImportError as a plain warning with the exception among the arguments.
    args = record.args if isinstance(record.args, tuple) else ()
    return next((a for a in args if isinstance(a, BaseException)), None)


def interpreter_facts() -> tuple[str, tuple[tuple[str, str | None], ...]]:
    """This process's interpreter and the versions of the packages a run depends on."""
    return sys.executable, tuple(sorted(installed_versions().items()))


def probe(model_types: Sequence[str]) -> RoundTrip:
    """:func:`load_and_resolve`, plus the worker's interpreter and package versions."""
    python, installed = interpreter_facts()
    return dataclasses.replace(load_and_resolve(model_types), python=python, versions=installed)


def compare_with_driver(result: RoundTrip) -> RoundTrip:
    """Fail a result whose worker runs another interpreter or other package versions.

    Ray freezes a node's environment at ``ray start``: a worker may run a different Python than
    the driver, and then loads different code.
    """
    if not result.ok or not result.python:
        return result
    python, installed = interpreter_facts()
    differ = [f"{name}: driver {ours}, worker {theirs}"
              for (name, ours), (_, theirs) in zip(installed, result.versions, strict=False)
              if ours != theirs]
    if result.python != python:
        differ.insert(0, f"python: driver {python}, worker {result.python}")
    if not differ:
        return result
    return dataclasses.replace(
        result, ok=False, details=tuple(differ),
        message="the Ray worker runs a different interpreter or package versions than the driver",
    )


def load_and_resolve(model_types: Sequence[str]) -> RoundTrip:
    """Load ``$RLINF_EXT_MODULE`` the way RLinf's workers do, then resolve ``model_types``.

    Runs in the process it is called in; :func:`check_registration` calls it in a Ray worker.
    """
    import ray
    from rlinf.scheduler.cluster.utils import load_user_extension_module

    ext_module = os.environ.get(EXT_MODULE_VAR, "")
    node = ray.util.get_node_ip_address() if ray.is_initialized() else ""
    if node and os.environ.get("RLINF_NODE_RANK"):  # several nodes may share one address
        node = f"node {os.environ['RLINF_NODE_RANK']} ({node})"
    if not ext_module:
        return RoundTrip(False, f"{EXT_MODULE_VAR} is not set in the worker", "", node=node)
    recorder = _Records()
    log = logging.getLogger("dexrl.roundtrip")
    log.addHandler(recorder)
    log.propagate = False
    try:
        load_user_extension_module(logger=log)
    finally:
        log.removeHandler(recorder)
    if recorder.records:
        record = recorder.records[0]
        exc = _exception_of(record)
        message, text = record.getMessage(), ""
        if exc is not None:
            text = "".join(traceback.format_exception(exc))
            if str(exc) not in message:
                message = f"{message}: {type(exc).__name__}: {exc}"
        return RoundTrip(False, message, ext_module, node=node, traceback=text)
    resolved = tuple(registered_model_types(list(model_types)))
    missing = [t for t in model_types if t not in resolved]
    if missing:
        return RoundTrip(
            False, f"model type(s) {', '.join(missing)} not registered after register()",
            ext_module, resolved, node,
        )
    return RoundTrip(True, f"{ext_module} registered {', '.join(resolved) or 'nothing'}",
                     ext_module, resolved, node)


def check_registration(
    model_types: Sequence[str],
    ext_module: str = EXT_MODULE,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 120.0,
) -> list[RoundTrip]:
    """Run :func:`probe` in a Ray worker on every alive node.

    Uses the Ray instance this process is connected to; without one, starts a private local
    instance for the check and shuts it down afterwards (it never joins another Ray instance).

    Args:
        model_types: Model types that must resolve in the workers.
        ext_module: The extension module the workers are told to load.
        env: Further environment variables RLinf workers get (GL backend, LIBERO paths, ...).
        timeout_s: How long to wait for the workers.

    Returns:
        One result per node.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    private = not ray.is_initialized()
    if private:
        ray.init(address="local", num_cpus=1, include_dashboard=False,
                 logging_level=logging.ERROR, log_to_driver=False)
    try:
        runtime_env = {"env_vars": {**(env or {}), EXT_MODULE_VAR: ext_module}}
        remote_probe = ray.remote(num_cpus=0, max_retries=0)(probe)
        nodes = live_nodes()
        refs = [
            remote_probe.options(
                runtime_env=runtime_env,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            ).remote(list(model_types))
            for n in nodes
        ]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        results = []
        for node, ref in zip(nodes, refs, strict=True):
            address = node.get("NodeManagerAddress", "")
            if ref not in ready:
                results.append(RoundTrip(False, f"no answer from a Ray worker in {timeout_s:.0f} s",
                                         ext_module, node=address))
                continue
            try:
                results.append(compare_with_driver(ray.get(ref)))
            except Exception as exc:  # the worker itself could not start or run the probe
                results.append(RoundTrip(False, f"the Ray worker failed: {type(exc).__name__}",
                                         ext_module, node=address, traceback=str(exc)))
        return results
    finally:
        if private:
            ray.shutdown()


def first_failure(results: Sequence[RoundTrip]) -> RoundTrip | None:
    """The first failed result, if any."""
    return next((r for r in results if not r.ok), None)
