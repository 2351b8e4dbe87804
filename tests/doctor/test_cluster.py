"""Check 5: Ray nodes, node ranks, other Ray instances, RAM and /dev/shm (fake facts)."""

from __future__ import annotations

import socket

import pytest
from omegaconf import OmegaConf

from dexrl.cluster import OtherRay, check_address
from dexrl.doctor.cluster import (
    ENV_PROCESS_BYTES,
    GB,
    NodeFacts,
    RayFacts,
    check_node_ranks,
    check_nodes,
    check_other_ray,
    check_placement,
    check_ram,
    check_shm,
    env_processes,
)
from dexrl.errors import DexrlError

GIB = 1024**3


def node(ip: str = "10.0.0.1", gpus: float = 8, rank: str | None = None, mem: float = 1000,
         avail: float = 900, shm: float = 500, error: str | None = None) -> NodeFacts:
    return NodeFacts(ip, 96, gpus, "host", "/venv/bin/python", "3.11.7", rank, int(mem * GB),
                     int(avail * GB), int(shm * GB), error)


def ray(*nodes: NodeFacts, mode: str = "private") -> RayFacts:
    return RayFacts(mode, "10.0.0.1:6379", 4.2, nodes)


def cfg(nodes: int = 1, envs: int = 64, eval_envs: int = 500, val: int = -1,
        only_eval: bool = False) -> object:
    return OmegaConf.create({
        "cluster": {"num_nodes": nodes},
        "runner": {"val_check_interval": val, "only_eval": only_eval},
        "env": {"train": {"total_num_envs": envs}, "eval": {"total_num_envs": eval_envs}}})


def test_nodes_ok() -> None:
    result = check_nodes(ray(node()), cfg(), 8)
    assert result.status == "ok"
    assert "private local Ray started in 4.2 s; 10.0.0.1 (96 CPUs, 8 GPUs)" in result.finding


def test_missing_nodes_fail_instead_of_waiting_forever() -> None:
    result = check_nodes(ray(node(), mode="attached"), cfg(nodes=2), 8)
    assert result.status == "fail"
    assert "1 of cluster.num_nodes=2 nodes are alive" in result.finding
    assert "wait forever" in result.finding
    assert "RLINF_NODE_RANK" in result.fix


def test_node_without_answer_or_gpus_fails_and_extra_nodes_warn() -> None:
    dead = check_nodes(ray(node(), node("10.0.0.2", error="no answer within 60 s")), cfg(2), 8)
    assert dead.status == "fail" and "10.0.0.2 did not run a task" in dead.finding
    short = check_nodes(ray(node(gpus=4), mode="attached"), cfg(), 8)
    assert short.status == "fail" and "offers 4 GPU(s)" in short.finding
    # A private instance has this machine's GPUs: cuda.placement reports a shortage once.
    assert check_nodes(ray(node(gpus=4)), cfg(), 8).status == "ok"
    extra = check_nodes(ray(node(), node("10.0.0.2")), cfg(1), 8)
    assert extra.status == "warn"


def test_node_ranks() -> None:
    assert check_node_ranks(ray(node()), cfg()).status == "ok"
    good = check_node_ranks(ray(node(rank="0"), node("10.0.0.2", rank="1")), cfg(2))
    assert good.status == "ok"
    unset = check_node_ranks(ray(node(rank="0"), node("10.0.0.2")), cfg(2))
    assert unset.status == "fail" and "not set for Ray on 10.0.0.2" in unset.finding
    assert "before `ray start`" in unset.fix
    dup = check_node_ranks(ray(node(rank="1"), node("10.0.0.2", rank="1")), cfg(2))
    assert dup.status == "fail" and "repeats" in dup.finding
    out = check_node_ranks(ray(node(rank="0"), node("10.0.0.2", rank="2")), cfg(2))
    assert out.status == "fail" and "10.0.0.2=2" in out.finding
    word = check_node_ranks(ray(node(rank="head"), node("10.0.0.2", rank="1")), cfg(2))
    assert word.status == "fail"


def test_other_ray_instances() -> None:
    assert check_other_ray(OtherRay((), None, None)).status == "ok"
    other = check_other_ray(OtherRay(("10.0.0.1:6379",), "10.0.0.1:6379", None))
    assert other.status == "warn" and "another Ray instance" in other.finding
    assert "EVERY Ray instance" in other.fix
    assert check_other_ray(OtherRay(("10.0.0.1:6379",), None, "10.0.0.1:6379")).status == "ok"
    stale = check_other_ray(OtherRay((), "10.0.0.9:6379", None))
    assert stale.status == "warn" and "no Ray runs" in stale.finding


def test_env_process_count() -> None:
    assert env_processes(cfg(envs=64)) == 64
    assert env_processes(cfg(envs=64, val=10)) == 564
    assert env_processes(cfg(envs=64, only_eval=True)) == 500
    reach = cfg(envs=32)
    reach.env.train.dexrl_env = reach.env.eval.dexrl_env = "reach"  # runs in the env worker
    assert env_processes(reach) == 0
    reach.runner.val_check_interval = 10
    assert env_processes(reach) == 0


def test_ram() -> None:
    assert check_ram(ray(node()), None).status == "skip"
    fits = check_ram(ray(node(mem=512, avail=400)), cfg(envs=64))
    assert fits.status == "ok"
    assert "64 LIBERO env process(es) per node need ≈141 GB" in fits.finding
    tight = check_ram(ray(node(mem=512, avail=100)), cfg(envs=64))
    assert tight.status == "warn"
    oom = check_ram(ray(node(mem=24, avail=20)), cfg(envs=64))
    assert oom.status == "fail" and "OOM" in oom.finding
    assert f"≈{int(24 * GB // ENV_PROCESS_BYTES)} fit" in oom.fix
    two = check_ram(ray(node(mem=100), node("10.0.0.2", mem=100)), cfg(nodes=2, envs=64))
    assert "32 LIBERO env process(es) per node" in two.finding


def test_shm() -> None:
    assert check_shm(ray(node(avail=100, shm=50))).status == "ok"
    small = check_shm(ray(node(avail=100, shm=0.064)))
    assert small.status == "warn"
    assert "--shm-size=28g" in small.fix


def test_unreachable_address_is_bad_input() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(DexrlError, match="cannot reach the Ray cluster at 127.0.0.1") as err:
        check_address(f"127.0.0.1:{port}", timeout=2)
    assert err.value.code == "ray-unreachable"
    with pytest.raises(DexrlError):
        check_address("not-an-address", timeout=2)


@pytest.mark.spawns
def test_a_port_that_is_not_ray_is_bad_input_not_a_hang() -> None:
    """ray.init waits forever on such a port; the check gives up after its timeout."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with pytest.raises(DexrlError,
                           match="no working Ray cluster at .*no answer within 3 s") as err:
            check_address(f"127.0.0.1:{sock.getsockname()[1]}", timeout=2, connect_timeout=3)
        assert err.value.code == "ray-not-working"


def test_ray_that_does_not_start_is_a_fail_row(monkeypatch: pytest.MonkeyPatch) -> None:
    from dexrl.doctor import cluster
    from dexrl.doctor.context import Budget, Context

    def refuse(_address: str | None) -> tuple[str, float]:
        raise ConnectionError("AuthenticationError: token mismatch")

    monkeypatch.setattr(cluster, "start_ray", refuse)
    monkeypatch.setattr(cluster, "other_ray_instances", lambda a: OtherRay((), None, a))
    rows = list(cluster.run(Context(Budget(60), ray_address="10.0.0.1:6379")))
    assert [(r.id, r.status) for r in rows] == [("ray.stale", "ok"), ("ray.nodes", "fail")]
    assert "Ray did not start: ConnectionError: AuthenticationError" in rows[1].finding
    assert "RAY_AUTH_MODE=token" in rows[1].fix


def test_placement_per_node_by_rank() -> None:
    placed = OmegaConf.create({"cluster": {"num_nodes": 2, "component_placement": {
        "actor": "0", "env,rollout": "1"}}})
    cpu = ray(node(gpus=0, rank="0"), node("10.0.0.2", gpus=0, rank="1"), mode="attached")
    row = check_placement(cpu, placed)
    assert row.status == "ok"
    assert row.finding == ("placement ids are node ranks (no GPUs): node 0: actor ×1; "
                           "node 1: env ×1, rollout ×1")
    gpu = check_placement(ray(node(gpus=8, rank="0"), mode="attached"), OmegaConf.create(
        {"cluster": {"num_nodes": 2, "component_placement": {"actor": "0-7", "env": "8-15"}}}))
    assert gpu.status == "fail" and "node 1 is not in the cluster" in gpu.finding
    assert check_placement(cpu, None).status == "skip"
