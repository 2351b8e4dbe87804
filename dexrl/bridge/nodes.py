"""A lost Ray node: which node it was and which RLinf worker groups it took with it.

RLinf learns of a dead node only through the calls that never return from it (or through Ray's
actor-death errors, which name an actor id, not a node). :func:`lost_node_check` compares the
nodes RLinf's ``Cluster`` started with against Ray's live nodes; :func:`lost_node_error` is the
pure part that names the node by ``RLINF_NODE_RANK`` and lists the worker groups placed there.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from dexrl.errors import DexrlError

# RLinf names a worker actor "<group name>:<rank>" (scheduler/manager/worker_manager.py).
_WORKER_NAME = re.compile(r"^(?P<group>[^:]+):(?P<rank>\d+)$")


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
        match = _WORKER_NAME.match(name or "")
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
    )


def cluster_nodes(cluster: object) -> list[NodeRecord]:
    """The nodes of RLinf's ``Cluster``, by rank."""
    out = []
    for rank in range(int(cluster.num_nodes)):  # type: ignore[attr-defined]
        info = cluster.get_node_info(rank)  # type: ignore[attr-defined]
        out.append(NodeRecord(int(info.node_rank), str(info.ray_id), str(info.node_ip)))
    return out


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
        import ray

        try:
            alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        except Exception as exc:  # the head itself is gone: nothing more to learn
            print(f"dexrl: Ray did not list its nodes: {exc!r}", file=sys.stderr)
            return None
        lost = [n for n in nodes if n.node_id not in alive]
        return lost_node_error(lost, _run_actors(), step, run_dir) if lost else None

    return check
