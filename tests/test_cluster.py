"""The lost-node diagnosis, from Ray's facts alone (no Ray needed)."""

from __future__ import annotations

from dexrl.cluster import NodeRecord, groups_on, lost_node_error

HEAD = NodeRecord(0, "a" * 56, "10.0.0.1")
SECOND = NodeRecord(1, "b" * 56, "10.0.0.2")
ACTORS = [("ActorGroup:0", HEAD.node_id), ("EnvGroup:0", SECOND.node_id),
          ("RolloutGroup:1", SECOND.node_id), ("RolloutGroup:0", SECOND.node_id),
          ("_RemoteNodeProbe", SECOND.node_id), ("", SECOND.node_id)]


def test_groups_on_a_node_are_named_with_their_ranks() -> None:
    assert groups_on(SECOND.node_id, ACTORS) == ["EnvGroup (rank 0)", "RolloutGroup (ranks 0, 1)"]
    assert groups_on(HEAD.node_id, ACTORS) == ["ActorGroup (rank 0)"]
    assert groups_on("c" * 56, ACTORS) == []


def test_the_error_names_the_node_its_groups_and_the_way_back() -> None:
    err = lost_node_error([SECOND], ACTORS, 2, "runs/x")
    assert err.message == ("lost Ray node during step 2: node 1 (10.0.0.2, Ray id bbbbbbbb) with "
                           "EnvGroup (rank 0), RolloutGroup (ranks 0, 1)")
    assert err.code == "ray-node-lost"
    assert "RLINF_NODE_RANK=1 ray start" in err.hint and "dexrl resume runs/x" in err.hint
    bare = lost_node_error([NodeRecord(1, "c" * 56, "10.0.0.3")], ACTORS, 1, "runs/x")
    assert "no worker group found there" in bare.message
