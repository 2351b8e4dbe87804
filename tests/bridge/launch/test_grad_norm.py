"""FSDP2 over two gloo ranks in two processes: the norm RLinf clips by is the whole gradient's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch.multiprocessing as mp
from helpers.fsdp_ranks import free_port, rank_grad_norms


@pytest.mark.spawns
def test_two_rank_fsdp2_grad_norm_is_the_whole_gradients() -> None:
    """Without the group each rank reports its own shard's norm (what RLinf 0.3.0 clipped by);
    with it, both ranks get the norm of the full, rank-averaged gradient."""
    port = free_port()
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(rank_grad_norms, args=(port, results), nprocs=2, join=True)
        results = dict(results)
    expected = results[0][0]
    locals_ = [results[r][1] for r in (0, 1)]
    for rank in (0, 1):
        _, local, reduced, changed, again, _ = results[rank]
        assert changed and not again  # set once; a group already set is left alone
        assert reduced == pytest.approx(expected, rel=1e-5)
        assert local < expected * 0.999  # one shard's norm falls short of the whole
    assert sum(n * n for n in locals_) == pytest.approx(expected ** 2, rel=1e-5)


def test_one_rank_or_fsdp1_is_left_alone() -> None:
    from omegaconf import OmegaConf

    from dexrl.bridge.launch.grad_norm import reduce_grad_norm_over_shards

    class Mesh:
        mesh_dim_names = ("fsdp",)

        def __getitem__(self, name: str) -> SimpleNamespace:
            return SimpleNamespace(size=lambda: 1)

    for strategy, mesh in (("fsdp2", Mesh()), ("fsdp", None)):
        manager = SimpleNamespace(_device_mesh=mesh, _strategy=SimpleNamespace(_dp_group=None),
                                  _cfg=OmegaConf.create({"fsdp_config": {"strategy": strategy}}))
        assert not reduce_grad_norm_over_shards(manager)
        assert manager._strategy._dp_group is None
