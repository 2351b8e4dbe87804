"""Two Ray nodes on this machine (``tests/helpers/ray_cluster.py``): doctor, train and resume
across them.

The head is node 0 and runs the driver and the actor; node 1 runs the env and rollout workers, so
weights and rollouts cross a node boundary (through Ray's object store and gloo over TCP, on one
machine). The doctor case (about 25 s with the cluster's start and stop) runs in ``make test``;
every training case is ``slow``: a two-node smoke run takes minutes on 2 cores.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers.ray_cluster import LocalCluster
from helpers.smoke import DEXRL, run_process

from dexrl.checkpoints.files.steps import is_complete
from tests.helpers.checkpoints import latest_checkpoint

# Actor on node 0, env and rollout on node 1: on nodes without GPUs RLinf's ids are node ranks.
ACROSS = ["cluster.num_nodes=2", "~cluster.component_placement",
          "+cluster.component_placement={actor:0,env\\,rollout:1}"]


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[LocalCluster]:
    cluster = LocalCluster.start(2)
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.mark.slow
def test_doctor_reports_both_nodes_the_round_trip_on_each_and_the_placement(
        two_nodes: LocalCluster, tmp_path: Path) -> None:
    run = run_process([DEXRL, "doctor", "--ray-address", two_nodes.address, "--quick", "--json",
                       "--suite", "libero_spatial", "--model", "pi0", "+smoke=cpu", *ACROSS],
                      tmp_path, env=two_nodes.env)
    rows = {row["id"]: row for row in json.loads(run.stdout)["checks"]}
    ranks = rows["ray.node_rank"]
    assert ranks["status"] == "ok", ranks
    assert sorted(ranks["details"]["ranks"].values()) == ["0", "1"]
    nodes = [n["node_rank"] for n in rows["ray.nodes"]["details"]["nodes"]]
    assert nodes == ["0", "1"]
    trip = rows["extension.roundtrip"]
    assert trip["status"] == "ok", trip
    assert sorted(n["node"].split(" (")[0] for n in trip["details"]["nodes"]) == ["node 0",
                                                                                  "node 1"]
    placement = rows["ray.placement"]
    assert placement["status"] == "ok", placement
    assert "node 0: actor ×1; node 1: env ×1, rollout ×1" in placement["finding"]


def _resume_to_step_2(two_nodes: LocalCluster, run_dir: Path) -> None:
    """``dexrl resume`` on the cluster: it starts at step 2 and checkpoints it."""
    resume = run_process([DEXRL, "resume", str(run_dir), "runner.max_steps=2",
                          "--ray-address", two_nodes.address], run_dir, env=two_nodes.env)
    assert resume.returncode == 0, resume.stderr[-3000:]
    assert "starting at step 2 of 2" in resume.stdout
    assert latest_checkpoint(run_dir).name == "global_step_2"


@pytest.mark.slow
def test_train_across_two_nodes_then_resume_on_the_same_cluster(
        two_nodes: LocalCluster, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    train = run_process([DEXRL, "train", "--suite", "libero_spatial", "--model", "pi0", "--smoke",
                         "--run-dir", str(run_dir), "--ray-address", two_nodes.address, *ACROSS],
                        run_dir, env=two_nodes.env)
    assert train.returncode == 0, train.stderr[-3000:]
    assert "step 1/1 " in train.stdout
    log = (run_dir / "logs" / "driver.log").read_text()
    assert "RLinf is running on a cluster with 2 nodes" in log
    first = latest_checkpoint(run_dir)
    assert first.name == "global_step_1" and is_complete(first)

    start = time.monotonic()
    _resume_to_step_2(two_nodes, run_dir)
    print(f"\ntwo-node train {train.seconds:.0f} s, resume {time.monotonic() - start:.0f} s")


def _scalars(run_dir: Path) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _weights(run_dir: Path, step: int = 1) -> dict[str, torch.Tensor]:
    path = run_dir / "checkpoints" / f"global_step_{step}" / "actor" / "model_state_dict"
    return torch.load(path / "full_weights.pt", map_location="cpu", weights_only=True)


# One update from identical rollouts: 4 reach envs × 2 policy calls = 8 samples, one optimizer step
# (global batch 8, one update epoch), rows of one per micro-batch. Reach has a dense reward, so the
# gradient is not zero (the LIBERO smoke step's is: its reward is 0 throughout).
ONE_UPDATE = ["runner.max_steps=1", "runner.save_interval=1", "env.train.total_num_envs=4",
              "actor.global_batch_size=8", "actor.micro_batch_size=1", "algorithm.update_epoch=1"]
RATIO_TOLERANCE = 1e-5
VALUE_HEAD = ("value_head.weight", "value_head.bias")


def _max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], keys) -> float:
    return max((a[k].float() - b[k].float()).abs().max().item() for k in keys)


@pytest.mark.slow
def test_an_actor_of_world_size_two_matches_one_rank_and_exports(
        two_nodes: LocalCluster, tmp_path: Path) -> None:
    """FSDP2 over two gloo ranks (one per node) against one rank: same rollouts, same update where
    RLinf's maths says they are the same.

    Both runs see identical rollouts (dexrl seeds the rollout's sampling noise). The critic's
    update does not depend on how the data is split, so the value loss and the value head's new
    weights must match. The policy's does: RLinf 0.3.0's embodied actor normalizes the GAE
    advantages over each actor rank's own samples (``calculate_adv_and_returns`` with its default
    ``normalize_advantages=True``; ``algorithm.normalize_advantages`` is not read on this path), so
    two ranks normalize two halves and the policy gradient legitimately differs from one rank's;
    the policy weights are only required to have moved. That the clipped norm is the whole
    gradient's is shown in process by ``tests/bridge/launch/test_grad_norm.py``.

    The first PPO ratio is held to 1 ± 1e-5, not bit-exact 1: the rollout scores all envs of a
    worker in one call and the actor re-scores one row per micro-batch, and the adapter is not
    batch-invariant on the CPU at the 1e-7 level (in process, the same batch gives exactly 1). A
    rank that used wrong or unsynced weights would be off by far more.
    """
    one_dir, two_dir = tmp_path / "one", tmp_path / "two"
    reach = [DEXRL, "train", "--suite", "reach", "--model", "pi0", "--smoke"]
    one = run_process([*reach, "--run-dir", str(one_dir), *ONE_UPDATE], one_dir)
    assert one.returncode == 0, one.stderr[-3000:]
    two = run_process([*reach, "--run-dir", str(two_dir), "--ray-address", two_nodes.address,
                       "cluster.num_nodes=2", "~cluster.component_placement",
                       "+cluster.component_placement={actor:0-1,env\\,rollout:1}",
                       *ONE_UPDATE], two_dir, env=two_nodes.env)
    assert two.returncode == 0, two.stderr[-3000:]
    init = "smoke-checkpoint/model.safetensors"
    assert (one_dir / init).read_bytes() == (two_dir / init).read_bytes()  # same start

    a, b = _scalars(one_dir), _scalars(two_dir)
    assert a["env/return"] == b["env/return"], "the runs saw different rollouts"
    seen = {tag: (a[tag][0], b[tag][0]) for tag in
            ("train/actor/grad_norm", "train/critic/value_loss", "train/actor/ratio")}
    print(f"\none rank vs two ranks: {seen}")
    assert seen["train/critic/value_loss"][1] == pytest.approx(seen["train/critic/value_loss"][0],
                                                               rel=1e-5)
    assert all(abs(r - 1) <= RATIO_TOLERANCE for r in seen["train/actor/ratio"]), seen

    from safetensors.torch import load_file

    before = load_file(one_dir / init)
    wa, wb = _weights(one_dir), _weights(two_dir)
    assert wa.keys() == wb.keys()
    policy = [k for k in wa if k in before]
    moved = {name: _max_diff(w, before, policy) for name, w in (("one", wa), ("two", wb))}
    from dexrl.bridge.policies.flow import init_value_head

    head = torch.nn.Linear(wa["value_head.weight"].shape[1], 1)
    init_value_head(head)  # the start of both runs' value heads (a fixed seed)
    value_moved = _max_diff(wa, {"value_head.weight": head.weight.detach(),
                                 "value_head.bias": head.bias.detach()}, VALUE_HEAD)
    value_diff = _max_diff(wa, wb, VALUE_HEAD)
    print(f"policy weights moved by up to {moved}; value head moved by up to {value_moved:.2e}, "
          f"differs between the runs by {value_diff:.2e}; policy weights differ by "
          f"{_max_diff(wa, wb, policy):.2e}")
    assert min(moved.values()) > 1e-4, "the update changed nothing"
    assert value_moved > 1e-4 and value_diff < 0.01 * value_moved

    out = tmp_path / "exported"
    export = run_process([DEXRL, "export", str(two_dir), "--out", str(out)], tmp_path)
    assert export.returncode == 0, export.stderr[-2000:]
    from dexrl.checkpoints.policy import load_policy

    exported = load_policy(out).network.state_dict()
    assert exported.keys() <= wb.keys()
    assert all(torch.equal(exported[k], wb[k].to(exported[k].dtype)) for k in exported)


@pytest.mark.slow
def test_a_lost_node_ends_the_run_naming_it_and_resume_continues_on_a_new_node(
        two_nodes: LocalCluster, tmp_path: Path) -> None:
    """Kill node 1's raylet in the rollout of step 2; a new node 1 joins; resume goes on."""
    run_dir = tmp_path / "run"
    killed: list[float] = []

    def kill_node_1(line: str) -> None:
        if not killed and "checkpoint" in line and "global_step_1" in line:
            two_nodes.nodes[1].raylet().kill()  # step 2's rollout starts right after the save
            killed.append(time.monotonic())

    train = run_process([DEXRL, "train", "--suite", "libero_spatial", "--model", "pi0", "--smoke",
                         "--run-dir", str(run_dir), "--ray-address", two_nodes.address, *ACROSS,
                         "runner.max_steps=3"], run_dir, env=two_nodes.env, on_line=kill_node_1)
    ended = time.monotonic()
    assert killed, train.stdout[-2000:] + train.stderr[-2000:]
    assert train.returncode == 2, train.stderr[-3000:]
    assert ended - killed[0] < 60, f"the run ended {ended - killed[0]:.0f} s after the kill"
    assert "lost Ray node during step 2: node 1 (" in train.stderr
    assert "EnvGroup (rank 0), RolloutGroup (rank 0)" in train.stderr
    assert latest_checkpoint(run_dir).name == "global_step_1"
    assert not any(is_complete(p) for p in (run_dir / "checkpoints").glob("global_step_[23]"))

    two_nodes.nodes[1].stop()
    two_nodes.add_node(1)
    _resume_to_step_2(two_nodes, run_dir)
    print(f"\nlost node: the run ended {ended - killed[0]:.0f} s after the raylet was killed")
