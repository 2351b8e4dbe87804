"""Check 5, Ray: a private local instance or the cluster asked for, and what each node offers.

Never joins a Ray instance it was not told to (``address="local"`` starts a private one; RLinf's
own ``address="auto"`` would silently join any instance on the machine), never runs ``ray stop``,
and shuts down only what it started. Per-node facts come from a zero-CPU task pinned to each node.
"""

from __future__ import annotations

import logging
import math
import os
import platform
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from omegaconf import DictConfig

from dexrl.cluster import OtherRay, live_nodes, other_ray_instances
from dexrl.config.compose import renders
from dexrl.config.settings import settings_of
from dexrl.doctor import GIB, CheckResult, cuda, extension, fail, guarded, ok, skip, warn
from dexrl.doctor.context import NO_CONFIG_FIX, Context
from dexrl.errors import one_line
from dexrl.training.plan import by_node, placement, render_by_node

GB = 1e9
ENV_PROCESS_BYTES = 2.2 * GB  # RSS of one LIBERO env subprocess, measured (rlinf-notes)
OBJECT_STORE_FRACTION = 0.3  # Ray sizes its object store at 30 % of memory, capped by /dev/shm
NODE_RANK_VAR = "RLINF_NODE_RANK"
RANK_FIX = (f"export {NODE_RANK_VAR}=<0..N-1> (0 on the head) before `ray start` on every node, "
            "then restart Ray there")


@dataclass(frozen=True)
class NodeFacts:
    """One Ray node: what Ray reports, plus what a task on it saw (``None``: no answer).

    Attributes:
        ip: The node's address.
        cpus: Ray's CPU resource.
        gpus: Ray's GPU resource.
        error: Why the task on the node gave no facts.
    """

    ip: str
    cpus: float
    gpus: float
    hostname: str | None = None
    executable: str | None = None
    python: str | None = None
    node_rank: str | None = None
    mem_total: int | None = None
    mem_available: int | None = None
    shm_total: int | None = None
    error: str | None = None
    node_id: str = ""

    @property
    def address(self) -> str:
        """The address, with Ray's node id when known (several nodes may share one address)."""
        return f"{self.ip}/{self.node_id[:8]}" if self.node_id else self.ip

    @property
    def label(self) -> str:
        """The node's name in findings: its ``RLINF_NODE_RANK`` when set, else its address."""
        return f"node {self.node_rank} ({self.ip})" if self.node_rank is not None else self.address


@dataclass(frozen=True)
class RayFacts:
    """The Ray cluster doctor used.

    Attributes:
        mode: ``private`` (started here) or ``attached``.
        address: The GCS address.
        start_s: Seconds to start or attach.
        nodes: Every alive node.
    """

    mode: str
    address: str
    start_s: float
    nodes: tuple[NodeFacts, ...]


def start_ray(address: str | None) -> tuple[str, float]:
    """Start a private local Ray instance, or attach to ``address``; ``ray.shutdown()`` undoes it.

    Returns:
        (``private`` or ``attached``, seconds it took).
    """
    import ray

    start = time.monotonic()
    quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False,
                             "namespace": "dexrl-doctor"}
    if address:
        ray.init(address=address, **quiet)
    else:
        ray.init(address="local", include_dashboard=False, **quiet)
    return ("attached" if address else "private"), time.monotonic() - start


def node_report() -> dict[str, Any]:
    """Task-side probe: what a Ray worker on this node sees."""
    mem: dict[str, int] = {}
    with open("/proc/meminfo") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                mem[key] = int(value.split()[0]) * 1024
    shm = os.statvfs("/dev/shm")
    return {"hostname": socket.gethostname(), "executable": sys.executable,
            "python": platform.python_version(), "node_rank": os.environ.get(NODE_RANK_VAR),
            "mem_total": mem.get("MemTotal"), "mem_available": mem.get("MemAvailable"),
            "shm_total": shm.f_frsize * shm.f_blocks}


def probe_nodes(timeout: float) -> list[NodeFacts]:
    """Run :func:`node_report` on every alive node, each pinned to its node."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    alive = live_nodes()
    task = ray.remote(num_cpus=0, max_retries=0)(node_report)
    pin = [NodeAffinitySchedulingStrategy(n["NodeID"], soft=False) for n in alive]
    refs = [task.options(scheduling_strategy=p).remote() for p in pin]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    facts = []
    for node, ref in zip(alive, refs, strict=True):
        base = {"ip": node.get("NodeManagerAddress", "?"),
                "cpus": float(node["Resources"].get("CPU", 0)),
                "gpus": float(node["Resources"].get("GPU", 0)), "node_id": node["NodeID"]}
        if ref not in ready:
            facts.append(NodeFacts(**base, error=f"no answer from a task within {timeout:.0f} s"))
            continue
        try:
            facts.append(NodeFacts(**base, **ray.get(ref)))
        except Exception as exc:  # the worker died or could not start
            facts.append(NodeFacts(**base, error=one_line(exc, typed=False)[:200]))
    return sorted(facts, key=_rank_order)


def _rank_order(n: NodeFacts) -> tuple[int, str]:
    rank = (n.node_rank or "").strip()
    return (int(rank) if rank.isdigit() else 1 << 30, n.ip)


# Checks -------------------------------------------------------------------------------------

def planned_nodes(cfg: DictConfig | None, alive: int) -> int:
    """``cluster.num_nodes`` of the config (without one: the nodes that are there)."""
    if cfg is None:
        return alive
    return int(settings_of(cfg).cluster.num_nodes or 1)


def check_nodes(r: RayFacts, cfg: DictConfig | None, gpus_per_node: int | None) -> CheckResult:
    """Alive nodes against ``cluster.num_nodes``; GPUs per node against the placement."""
    want = planned_nodes(cfg, len(r.nodes))
    shown = "; ".join(f"{n.label} ({n.cpus:g} CPUs, {n.gpus:g} GPUs)" for n in r.nodes)
    how = (f"private local Ray started in {r.start_s:.1f} s" if r.mode == "private"
           else f"attached to {r.address} in {r.start_s:.1f} s")
    facts = {"mode": r.mode, "address": r.address, "nodes": [asdict(n) for n in r.nodes]}
    dead = [n for n in r.nodes if n.error]
    if len(r.nodes) < want:
        return fail("ray.nodes", f"{len(r.nodes)} of cluster.num_nodes={want} nodes are alive "
                    f"({how}): RLinf's Cluster would wait forever for the rest",
                    "start Ray on the missing nodes (`ray start --address=<head:port>` with "
                    f"{NODE_RANK_VAR} set) or lower cluster.num_nodes", **facts)
    if dead:
        return fail("ray.nodes", f"{dead[0].label} did not run a task: {dead[0].error}",
                    "check that node's raylet (`ray status`, its logs under /tmp/ray) and "
                    "restart Ray there", **facts)
    # A private instance sees this machine's GPUs, which cuda.placement checks already.
    short = [n for n in r.nodes[:want]
             if r.mode == "attached" and gpus_per_node and n.gpus < gpus_per_node]
    if short:
        return fail("ray.nodes", f"{how}; {short[0].label} offers {short[0].gpus:g} GPU(s) to "
                    f"Ray, the placement needs {gpus_per_node} per node",
                    "start Ray with the node's GPUs visible (`ray start ... --num-gpus N`) or "
                    "change cluster.component_placement", **facts)
    if len(r.nodes) > want:
        return warn("ray.nodes", f"{how}; {len(r.nodes)} nodes alive, cluster.num_nodes={want}: "
                    "RLinf uses only the first ones", "set cluster.num_nodes to the nodes you "
                    "mean to use", **facts)
    return ok("ray.nodes", f"{how}; {shown}", **facts)


def check_node_ranks(r: RayFacts, cfg: DictConfig | None) -> CheckResult:
    """With several nodes, every node sets a unique ``RLINF_NODE_RANK`` in 0..N-1."""
    want = planned_nodes(cfg, len(r.nodes))
    ranks = {n.address: n.node_rank for n in r.nodes}
    if want <= 1 and len(r.nodes) <= 1:
        return ok("ray.node_rank", f"one node: {NODE_RANK_VAR} is not needed", ranks=ranks)
    unset = [ip for ip, v in ranks.items() if v is None]
    if unset:
        return fail("ray.node_rank", f"{NODE_RANK_VAR} is not set for Ray on {', '.join(unset)}",
                    RANK_FIX, ranks=ranks)
    bad = [f"{ip}={v}" for ip, v in ranks.items() if not (v or "").strip().isdigit()
           or int(v) >= len(r.nodes)]
    if bad:
        return fail("ray.node_rank", f"{NODE_RANK_VAR} must be 0..{len(r.nodes) - 1}: "
                    f"{', '.join(bad)}", RANK_FIX, ranks=ranks)
    values = [int(v) for v in ranks.values() if v is not None]
    if len(set(values)) != len(values):
        return fail("ray.node_rank", f"{NODE_RANK_VAR} repeats across nodes: {ranks}", RANK_FIX,
                    ranks=ranks)
    return ok("ray.node_rank", f"{NODE_RANK_VAR} unique on {len(values)} nodes", ranks=ranks)


def check_placement(r: RayFacts, cfg: DictConfig | None) -> CheckResult:
    """The worker groups each node (by ``RLINF_NODE_RANK``) gets from the config's placement."""
    if cfg is None:
        return skip("ray.placement", "no config to place", NO_CONFIG_FIX)
    gpus = int(min((n.gpus for n in r.nodes), default=0))
    try:
        placed = placement(cfg, gpus)
    except ValueError as exc:  # the config check names the bad placement
        return skip("ray.placement", f"cluster.component_placement does not parse: {exc}",
                    "fix cluster.component_placement (`dexrl validate` explains)")
    nodes = by_node(placed)
    facts = {"by_node": {str(k): v for k, v in nodes.items()}, "gpus_per_node": gpus}
    unit = "node ranks (no GPUs)" if gpus == 0 else f"GPU ids ({gpus} per node)"
    finding = f"placement ids are {unit}: " + "; ".join(render_by_node(placed))
    absent = [k for k in nodes if k >= len(r.nodes)]
    if absent and gpus == 0:
        return skip("ray.placement", f"no GPUs in the cluster, and as node ranks the placement "
                    f"needs node {absent[0]}", "cuda.placement and ray.nodes say what is missing",
                    **facts)
    if absent:
        return fail("ray.placement", f"{finding}; node {absent[0]} is not in the cluster",
                    "start Ray on that node or change cluster.component_placement", **facts)
    return ok("ray.placement", finding, **facts)


def check_other_ray(o: OtherRay) -> CheckResult:
    """Leftover Ray instances on this machine break runs (NCCL errors, joined by accident)."""
    others = [a for a in o.running if a != o.attach]
    facts = {"running": list(o.running), "recorded": o.recorded}
    if others:
        return warn("ray.stale", f"another Ray instance runs on this machine "
                    f"({', '.join(others)}): leftover sessions cause NCCL errors, and RLinf's "
                    "address='auto' joins them",
                    "if it is a leftover, stop it from the shell that started it (`ray stop` ends "
                    "EVERY Ray instance on the machine); to use it on purpose pass --ray-address",
                    **facts)
    if o.recorded and o.recorded not in o.running:
        return warn("ray.stale", f"/tmp/ray/ray_current_cluster names {o.recorded}, where no Ray "
                    "runs: address='auto' tries that dead address first",
                    "delete /tmp/ray/ray_current_cluster", **facts)
    return ok("ray.stale", "no other Ray instance on this machine", **facts)


def env_processes(cfg: DictConfig) -> int:
    """LIBERO env processes a run keeps alive: train envs, plus eval envs when eval is on (dexrl's
    own tasks run inside the env worker: none)."""
    s = settings_of(cfg)
    only_eval = bool(s.runner.only_eval)
    eval_on = (s.runner.val_check_interval or -1) > 0 or only_eval
    train_on = not only_eval and renders(cfg, "train")
    total = int(s.env.train.total_num_envs or 0) if train_on else 0
    return total + (int(s.env.eval.total_num_envs or 0) if eval_on and renders(cfg, "eval")
                    else 0)


def check_ram(r: RayFacts, cfg: DictConfig | None) -> CheckResult:
    """Host RAM on each node against ~2.2 GB per LIBERO env process the config starts there."""
    facts = {"env_process_gb": ENV_PROCESS_BYTES / GB}
    if cfg is None:
        return skip("ray.ram", "no config: the number of env processes is unknown", NO_CONFIG_FIX,
                    **facts)
    nodes = planned_nodes(cfg, len(r.nodes))
    total = env_processes(cfg)
    per_node = math.ceil(total / nodes)
    need = per_node * ENV_PROCESS_BYTES
    facts.update(env_processes=total, per_node=per_node, need_bytes=need)
    fits = max(1, int(min(n.mem_total or 0 for n in r.nodes) // ENV_PROCESS_BYTES)) * nodes
    head = f"{per_node} LIBERO env process(es) per node need ≈{need / GB:.0f} GB"
    for n in r.nodes:
        if n.mem_total is not None and need > n.mem_total:
            return fail("ray.ram", f"{head}, {n.label} has {n.mem_total / GB:.0f} GB: the "
                        "raylet OOM-kills workers", f"lower env.train.total_num_envs (≈{fits} "
                        "fit), or add nodes", **facts)
    for n in r.nodes:
        if n.mem_available is not None and need > n.mem_available:
            return warn("ray.ram", f"{head}, {n.label} has {n.mem_available / GB:.0f} GB "
                        f"available of {n.mem_total / GB:.0f} GB", "stop other memory users "
                        "there or lower env.train.total_num_envs", **facts)
    low = min((n.mem_available or 0) for n in r.nodes)
    return ok("ray.ram", f"{head}; at least {low / GB:.0f} GB available per node", **facts)


def check_shm(r: RayFacts) -> CheckResult:
    """/dev/shm must hold Ray's object store (30 % of memory); smaller means spilling to disk."""
    for n in r.nodes:
        if n.shm_total is None or n.mem_available is None:
            continue
        want = OBJECT_STORE_FRACTION * n.mem_available
        if n.shm_total < want:
            return warn("ray.shm", f"{n.label}: /dev/shm is {n.shm_total / GIB:.1f} GiB, under "
                        f"the {want / GIB:.1f} GiB Ray's object store wants: it is capped and "
                        "spills to disk",
                        f"enlarge /dev/shm (docker: --shm-size={math.ceil(want / GIB)}g)",
                        shm_total=n.shm_total)
    sizes = ", ".join(f"{n.shm_total / GIB:.0f}" for n in r.nodes if n.shm_total is not None)
    return ok("ray.shm", f"/dev/shm GiB per node: {sizes or 'unknown'}")


# Area ---------------------------------------------------------------------------------------

def run(ctx: Context) -> Iterator[CheckResult]:
    """Look for other Ray instances, start or attach, probe nodes, run the extension round trip."""
    import ray

    yield guarded("ray.stale", check_other_ray, other_ray_instances(ctx.ray_address))
    try:
        mode, start_s = start_ray(ctx.ray_address)
    except Exception as exc:  # Ray itself could not start or connect
        ray.shutdown()  # whatever half-started goes too
        auth = "auth" in str(exc).lower()
        yield fail("ray.nodes", f"Ray did not start: {one_line(exc)}",
                   "export RAY_AUTH_MODE=token and the cluster's token (~/.ray/auth_token) to "
                   "attach to a token-protected cluster" if auth else
                   "read the Ray logs under /tmp/ray/session_latest/logs; free memory and disk "
                   "there (Ray needs both to start)")
        return
    try:
        start = time.monotonic()
        nodes = probe_nodes(ctx.budget.timeout(60.0))
        address = ray.get_runtime_context().gcs_address
        facts = RayFacts(mode, address, start_s, tuple(nodes))
        per_node = cuda.gpus_needed_per_node(ctx.cfg) if ctx.cfg is not None else None
        yield guarded("ray.nodes", check_nodes, facts, ctx.cfg, per_node).timed(
            start_s + time.monotonic() - start)
        yield guarded("ray.node_rank", check_node_ranks, facts, ctx.cfg)
        yield guarded("ray.placement", check_placement, facts, ctx.cfg)
        yield guarded("ray.ram", check_ram, facts, ctx.cfg)
        yield guarded("ray.shm", check_shm, facts)
        types = extension.model_types(ctx.cfg)
        start = time.monotonic()
        results = extension.probe_roundtrip(types, ctx.budget.timeout(180.0))
        yield guarded("extension.roundtrip", extension.check_roundtrip, results, types).timed(
            time.monotonic() - start)
    finally:
        ray.shutdown()  # a private instance stops with it; an attached cluster is only left
