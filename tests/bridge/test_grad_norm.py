"""FSDP2 over two gloo ranks in two processes: the norm RLinf clips by is the whole gradient's."""

from __future__ import annotations

import os
import socket
from types import SimpleNamespace

import pytest
import torch
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, port: int, results: dict) -> None:
    import torch.distributed as dist
    from omegaconf import OmegaConf
    from rlinf.hybrid_engines.fsdp.utils import get_grad_norm
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from dexrl.bridge.launch.grad_norm import reduce_grad_norm_over_shards

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
        reference = torch.nn.Sequential(*[m for m in model])  # same modules, before sharding
        inputs = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(1))
        full = sum(p.numel() for p in model.parameters())
        # The unsharded gradient of the mean loss over both ranks' data (FSDP2 averages ranks).
        loss = sum(reference(x).pow(2).mean() for x in inputs) / 2
        grads = torch.autograd.grad(loss, list(reference.parameters()))
        expected = torch.sqrt(sum(g.pow(2).sum() for g in grads)).item()

        mesh = init_device_mesh("cpu", (2,), mesh_dim_names=["fsdp"])
        for layer in (model[0], model[2]):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        model(inputs[rank]).pow(2).mean().backward()
        manager = SimpleNamespace(_device_mesh=mesh, _strategy=SimpleNamespace(_dp_group=None),
                                  _cfg=OmegaConf.create({"fsdp_config": {"strategy": "fsdp2"}}))
        local = get_grad_norm(model.parameters(), dp_group=manager._strategy._dp_group)
        changed = reduce_grad_norm_over_shards(manager)
        reduced = get_grad_norm(model.parameters(), dp_group=manager._strategy._dp_group)
        again = reduce_grad_norm_over_shards(manager)
        results[rank] = (expected, local, reduced, changed, again, full)
    finally:
        dist.destroy_process_group()


@pytest.mark.spawns
def test_two_rank_fsdp2_grad_norm_is_the_whole_gradients() -> None:
    """Without the group each rank reports its own shard's norm (what RLinf 0.3.0 clipped by);
    with it, both ranks get the norm of the full, rank-averaged gradient."""
    port = _free_port()
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_rank, args=(port, results), nprocs=2, join=True)
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
