"""The training session's one rule for GPUs per node (dexrl/training/session.py)."""

from __future__ import annotations

from dexrl.training.session import gpus_per_node


def test_the_flag_wins_then_smoke_then_this_node_then_eight() -> None:
    assert gpus_per_node(smoke=False, visible=8, asked=4) == 4
    assert gpus_per_node(smoke=True, visible=0) == 1
    assert gpus_per_node(smoke=False, visible=2) == 2
    assert gpus_per_node(smoke=False, visible=0) == 8
