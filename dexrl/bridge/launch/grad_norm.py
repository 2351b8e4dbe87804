"""The gradient norm RLinf's FSDP2 actor clips by: the whole gradient's, not one shard's."""

from __future__ import annotations

from typing import Any


def reduce_grad_norm_over_shards(manager: Any) -> bool:
    """Make RLinf's FSDP2 grad norm sum over every rank's shard; True when it was changed.

    RLinf 0.3.0 passes its norm helper a data-parallel group only when the device mesh has a
    ``ddp`` dimension, and the mesh it builds has one dimension, ``fsdp``. With FSDP2 and more than
    one actor rank, each rank therefore clipped its own gradient shard by that shard's norm and
    logged it (the mean over ranks is roughly ``1/sqrt(ranks)`` of the real norm). The group set
    here, the sharding dimension, is the one proposed upstream in RLinf/RLinf#1558.
    """
    mesh = getattr(manager, "_device_mesh", None)
    strategy = getattr(manager, "_strategy", None)
    if (mesh is None or strategy is None or getattr(strategy, "_dp_group", None) is not None
            or manager._cfg.fsdp_config.get("strategy") != "fsdp2"
            or "fsdp" not in (mesh.mesh_dim_names or ()) or mesh["fsdp"].size() < 2):
        return False
    strategy._dp_group = mesh["fsdp"].get_group()
    return True
