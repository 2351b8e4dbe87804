"""Two Ray nodes on this machine (``tests/ray_cluster.py``): doctor, train and resume across them.

The head is node 0 and runs the driver and the actor; node 1 runs the env and rollout workers, so
weights and rollouts cross a node boundary (through Ray's object store and gloo over TCP, on one
machine). Every test is ``slow``: a two-node smoke run takes minutes on 2 cores.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from dexrl.bridge.launch import is_complete, latest_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ray_cluster import LocalCluster  # noqa: E402
from test_smoke import DEXRL, run_process  # noqa: E402

pytest.importorskip("rlinf")
pytest.importorskip("libero.libero")

pytestmark = pytest.mark.slow

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
    resume = run_process([DEXRL, "resume", str(run_dir), "runner.max_steps=2",
                          "--ray-address", two_nodes.address], run_dir, env=two_nodes.env)
    assert resume.returncode == 0, resume.stderr[-3000:]
    assert "starting at step 2 of 2" in resume.stdout
    assert latest_checkpoint(run_dir).name == "global_step_2"
    print(f"\ntwo-node train {train.seconds:.0f} s, resume {time.monotonic() - start:.0f} s")


def _scalars(run_dir: Path) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _weights(run_dir: Path, step: int = 1) -> dict[str, torch.Tensor]:
    path = run_dir / "checkpoints" / f"global_step_{step}" / "actor" / "model_state_dict"
    return torch.load(path / "full_weights.pt", map_location="cpu", weights_only=True)


@pytest.mark.xfail(strict=True, reason="seen here: the smoke update has zero gradient (rewards, "
                   "advantages and losses 0, grad_norm 0.0 in both runs), so the weights moved "
                   "only by weight decay (6e-8) and cannot show a difference; and the first ratio "
                   "is not exactly 1 in either run (batch composition, see the docstring)")
def test_an_actor_of_world_size_two_matches_one_rank_and_exports(
        two_nodes: LocalCluster, tmp_path: Path) -> None:
    """FSDP2 over two gloo ranks (one per node) against one rank, same data, one update.

    Two envs: RLinf splits each env worker's trajectories over the actor ranks. All four samples
    form one optimizer step in both runs. Seen here (machine shared): both runs train from the same
    start, the export loads with ``load_policy``, full weights equal (max |Δw| 0.0), but
    vacuously: every reward, advantage and loss of the smoke step is 0 and grad_norm 0.0, so the
    update is weight decay alone (the ``moved`` check fails first). The
    first ratio was 1.0000014 (one rank) and 1.0000019 (two ranks) here, 0.9999986 and 0.9999993
    in earlier runs: the rollout scores both envs in one call, the actor re-scores one row per
    micro-batch, and the adapter is not batch-invariant at the 1e-7 level (in process: same batch
    exact, rows of a batch of 2 alone differ by up to 9e-7 in log-prob;
    ``test_rows_of_different_calls_can_be_trained_together``). One env per env and rollout
    worker on each node (``{actor:0,env:0-1,rollout:0-1}``, rows of one per call) still gave
    1.0000001 with one actor rank (unexplained; exact in process), and with ``actor:0-1`` actor
    rank 1 aborted in gloo in its first update ("Received data size doesn't match expected size",
    6144 vs 1536 bytes).
    """
    both = ["runner.max_steps=1", "env.train.total_num_envs=2", "actor.global_batch_size=4",
            "actor.micro_batch_size=1"]
    one_dir, two_dir = tmp_path / "one", tmp_path / "two"
    one = run_process([DEXRL, "train", "--suite", "libero_spatial", "--model", "pi0", "--smoke",
                       "--run-dir", str(one_dir), *both], one_dir)
    assert one.returncode == 0, one.stderr[-3000:]
    two = run_process([DEXRL, "train", "--suite", "libero_spatial", "--model", "pi0", "--smoke",
                       "--run-dir", str(two_dir), "--ray-address", two_nodes.address,
                       "cluster.num_nodes=2", "~cluster.component_placement",
                       "+cluster.component_placement={actor:0-1,env\\,rollout:1}", *both],
                      two_dir, env=two_nodes.env)
    assert two.returncode == 0, two.stderr[-3000:]
    init = "smoke-checkpoint/model.safetensors"
    assert (one_dir / init).read_bytes() == (two_dir / init).read_bytes()  # same start

    a, b = _weights(one_dir), _weights(two_dir)
    assert a.keys() == b.keys()
    diff = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    out = tmp_path / "exported"
    export = run_process([DEXRL, "export", str(two_dir), "--out", str(out)], tmp_path)
    assert export.returncode == 0, export.stderr[-2000:]
    from safetensors.torch import load_file

    from dexrl.models import load_policy

    before, after = load_file(two_dir / init), load_file(out / "model.safetensors")
    moved = max((after[k].float() - before[k].float()).abs().max().item()
                for k in before if k in after)
    # Adam's first step moves every trained weight by about the learning rate (5e-6): the
    # difference between the runs must be far below that, or equality would mean nothing.
    assert moved > 1e-6, "the update changed nothing"
    assert diff < 0.01 * moved, f"1 vs 2 ranks differ by {diff:g} (update size {moved:g})"
    policy = load_policy(out)
    assert sum(p.numel() for p in policy.network.parameters()) > 0
    print(f"\nworld size 2 vs 1: max |Δw| {diff:.2e}; the update moved weights by up to "
          f"{moved:.2e}")
    ratios = {d.name: _scalars(d)["train/actor/ratio"] for d in (one_dir, two_dir)}
    print(f"first PPO ratio by run: {ratios}")
    assert ratios == {"one": [1.0], "two": [1.0]}, ratios


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
    resume = run_process([DEXRL, "resume", str(run_dir), "runner.max_steps=2",
                          "--ray-address", two_nodes.address], run_dir, env=two_nodes.env)
    assert resume.returncode == 0, resume.stderr[-3000:]
    assert "starting at step 2 of 2" in resume.stdout
    assert latest_checkpoint(run_dir).name == "global_step_2"
    print(f"\nlost node: the run ended {ended - killed[0]:.0f} s after the raylet was killed")
