"""One rank of the two-process FSDP2 gradient-norm test (``tests/bridge/launch/test_grad_norm.py``).

It lives here, not in the test module, because ``torch.multiprocessing.spawn`` pickles it by
module name and the spawned interpreters import ``helpers`` (tests/ is on their ``sys.path``).
"""

from __future__ import annotations

import os
import socket
from types import SimpleNamespace

import torch


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_grad_norms(rank: int, port: int, results: dict) -> None:
    """Shard a small model over two gloo ranks with FSDP2 and store, in ``results[rank]``, the
    whole gradient's norm, RLinf's norm before and after :func:`reduce_grad_norm_over_shards`,
    what that call and a second one returned, and the parameter count."""
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
