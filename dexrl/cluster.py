"""Ray nodes: connecting to a cluster and counting its live nodes (``train``, ``resume``,
``doctor`` and the launch), and a lost node: which node it was and which RLinf worker groups it
took with it.

RLinf learns of a dead node only through the calls that never return from it (or through Ray's
actor-death errors, which name an actor id, not a node). :func:`lost_node_check` compares the
nodes RLinf's ``Cluster`` started with against Ray's live nodes; :func:`lost_node_error` is the
pure part that names the node by ``RLINF_NODE_RANK`` and lists the worker groups placed there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from dexrl.errors import DexrlError, one_line
from dexrl.subproc import ProbeError, run_probe

# RLinf names a worker actor "<group name>:<rank>" (scheduler/manager/worker_manager.py).
WORKER_NAME = re.compile(r"^(?P<group>[^:]+):(?P<rank>\d+)$")


@dataclass(frozen=True)
class NodeRecord:
    """One node of the run's cluster, as RLinf's ``Cluster`` ranked it.

    Attributes:
        rank: ``RLINF_NODE_RANK`` (RLinf's node rank).
        node_id: Ray's node id.
        ip: The node's address.
    """

    rank: int
    node_id: str
    ip: str

    def label(self) -> str:
        """``node 1 (10.0.0.2, Ray id 3f2a9c1e)``."""
        return f"node {self.rank} ({self.ip}, Ray id {self.node_id[:8]})"


def groups_on(node_id: str, actors: Iterable[tuple[str, str]]) -> list[str]:
    """RLinf worker groups with ranks on ``node_id``: ``["EnvGroup (rank 0)", ...]``.

    Args:
        node_id: Ray's node id.
        actors: (actor name, node id) of the run's actors, alive or dead.
    """
    ranks: dict[str, list[int]] = {}
    for name, where in actors:
        match = WORKER_NAME.match(name or "")
        if where == node_id and match:
            ranks.setdefault(match["group"], []).append(int(match["rank"]))
    return [f"{group} (rank{'s' if len(r) > 1 else ''} {', '.join(map(str, sorted(r)))})"
            for group, r in sorted(ranks.items())]


def lost_node_error(lost: Sequence[NodeRecord], actors: Iterable[tuple[str, str]], step: int,
                    run_dir: str) -> DexrlError:
    """The error a run ends with when ``lost`` nodes left the cluster during ``step``."""
    actors = list(actors)
    parts = []
    for node in lost:
        groups = groups_on(node.node_id, actors)
        placed = ", ".join(groups) if groups else "no worker group found there"
        parts.append(f"{node.label()} with {placed}")
    first = lost[0]
    return DexrlError(
        f"lost Ray node during step {step}: {'; '.join(parts)}",
        f"restart Ray on that node (`RLINF_NODE_RANK={first.rank} ray start "
        f"--address=<head>:<port>`), then `dexrl resume {run_dir}` continues from the last "
        "complete checkpoint",
        code="ray-node-lost",
    )


def cluster_nodes(cluster: object) -> list[NodeRecord]:
    """The nodes of RLinf's ``Cluster``, by rank."""
    out = []
    for rank in range(int(cluster.num_nodes)):  # type: ignore[attr-defined]
        info = cluster.get_node_info(rank)  # type: ignore[attr-defined]
        out.append(NodeRecord(int(info.node_rank), str(info.ray_id), str(info.node_ip)))
    return out


def own_address() -> str:
    """The GCS address of the Ray cluster this process is connected to (its run's own)."""
    import ray

    return str(ray.get_runtime_context().gcs_address)


@contextlib.contextmanager
def pinned_address() -> Iterator[str]:
    """Point ``$RAY_ADDRESS`` at the connected cluster (:func:`own_address`) for the block.

    Ray's state API (``ray.util.state``, which dexrl's failure diagnosis and RLinf's log
    collector call) takes ``$RAY_ADDRESS`` over any address it is given, and without one looks
    for any Ray on this machine: with a second run's Ray there it fails ("Found multiple active
    Ray instances") or asks the wrong one. Set from the main thread before the run's threads
    start; the previous value comes back after.
    """
    previous = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = address = own_address()
    try:
        yield address
    finally:
        if previous is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = previous


def job_actors() -> list[dict]:
    """This job's actors, alive or dead, as rows of Ray's GCS actor table.

    Read from ``ray._private.state.actors`` (Ray's debugging view of the GCS), not the state API,
    which goes through the dashboard: a head started without it (``--include-dashboard=false``)
    still answers, in milliseconds.
    """
    import ray
    from ray._private import state

    job = ray.get_runtime_context().get_job_id()
    try:
        actors = state.actors()
    except Exception as exc:
        print(f"dexrl: Ray's actor table could not be read: {exc!r}", file=sys.stderr)
        return []
    return [a for a in actors.values() if a.get("JobID") == job]


def _run_actors() -> list[tuple[str, str]]:
    """(name, node id) of this job's actors, alive or dead."""
    return [(a.get("Name") or "", a.get("Address", {}).get("NodeID") or "") for a in job_actors()]


def lost_node_check(nodes: Sequence[NodeRecord], run_dir: str
                    ) -> Callable[[int], DexrlError | None]:
    """A check the supervisor calls: the error naming lost nodes, or None while all are alive."""

    def check(step: int) -> DexrlError | None:
        try:
            alive = {n["NodeID"] for n in live_nodes()}
        except Exception as exc:  # the head itself is gone: nothing more to learn
            print(f"dexrl: Ray did not list its nodes: {exc!r}", file=sys.stderr)
            return None
        lost = [n for n in nodes if n.node_id not in alive]
        return lost_node_error(lost, _run_actors(), step, run_dir) if lost else None

    return check


@dataclass(frozen=True)
class OtherRay:
    """Ray instances found on this machine before doctor started its own.

    Attributes:
        running: GCS addresses of running instances.
        recorded: The address ``ray start`` last recorded (what ``address="auto"`` tries first).
        attach: The address doctor was asked to attach to, if any.
    """

    running: tuple[str, ...]
    recorded: str | None
    attach: str | None


def other_ray_instances(attach: str | None) -> OtherRay:
    """Look for Ray instances already on this machine (before starting one)."""
    from ray._private import services

    return OtherRay(tuple(sorted(services.find_gcs_addresses())),
                    services.find_bootstrap_address(None), attach)


ADDRESS_FIX = ("check the head's address and port (`ray status` on the head), or drop "
               "--ray-address/RAY_ADDRESS to use a private local instance")


def check_address(address: str, timeout: float = 5.0, connect_timeout: float = 60.0) -> None:
    """Fail fast on a Ray address that is not a working Ray cluster (bad input: exit 2).

    A TCP check first; then a real connection in a child interpreter, because ``ray.init`` waits
    forever on a port that accepts connections but is not Ray's.

    Raises:
        DexrlError: nothing listens there, ``auto`` finds no Ray here, or Ray does not answer.
    """
    if address == "auto" and not other_ray_instances(address).running:
        raise DexrlError("--ray-address auto: no Ray instance runs on this machine",
                         "start one with `ray start --head` or drop --ray-address",
                         where="--ray-address", code="ray-no-local-instance")
    if address not in ("auto", "local"):
        host, _, port = address.removeprefix("ray://").rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
                pass
        except (OSError, ValueError) as exc:
            raise DexrlError(f"cannot reach the Ray cluster at {address}: "
                             f"{one_line(exc, typed=False)}", ADDRESS_FIX,
                             where="--ray-address", code="ray-unreachable") from None
    try:
        run_probe(connect, {"address": address}, timeout=connect_timeout)
    except ProbeError as exc:
        auth = "auth" in str(exc).lower()
        raise DexrlError(f"no working Ray cluster at {address}: {exc}",
                         "export RAY_AUTH_MODE=token with the cluster's token in ~/.ray/auth_token"
                         if auth else ADDRESS_FIX, where="--ray-address",
                         code="ray-not-working") from None


def live_nodes() -> list[dict[str, Any]]:
    """Ray's records of the connected cluster's live nodes (``NodeID``, resources, ...)."""
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def attach(address: str) -> Callable[[], int]:
    """Connect this process to the Ray cluster at ``address``; returns a live-node counter."""
    import ray

    ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    return lambda: len(live_nodes())


def connect(address: str) -> dict[str, Any]:
    """Child-side probe: connect to ``address`` and count alive nodes (no shutdown: os._exit)."""
    return {"alive": attach(address)()}
