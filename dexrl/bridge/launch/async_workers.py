"""RLinf's async PPO classes, and the one thing they need on a node without an accelerator.

Design notes: docs/execution-modes.md.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

from dexrl.bridge.launch import cpu_platform

cpu_platform.install()

from rlinf.runners.async_ppo_embodied_runner import AsyncPPOEmbodiedRunner  # noqa: E402
from rlinf.workers.actor import async_ppo_fsdp_worker  # noqa: E402
from rlinf.workers.actor.async_ppo_fsdp_worker import AsyncPPOEmbodiedFSDPActor  # noqa: E402
from rlinf.workers.env.async_env_worker import AsyncEnvWorker  # noqa: E402
from rlinf.workers.rollout.hf.async_huggingface_worker import (  # noqa: E402
    AsyncMultiStepRolloutWorker,
)

__all__ = ["AsyncEnvWorker", "AsyncMultiStepRolloutWorker", "AsyncPPOEmbodiedFSDPActor",
           "AsyncPPOEmbodiedRunner", "on_cpu_devices"]


class _CpuTorch(types.ModuleType):
    """``torch`` as RLinf's async actor module sees it on a CPU node: ``torch.cuda`` is dexrl's
    CPU platform, everything else is torch itself."""

    def __init__(self, torch_module: Any) -> None:
        super().__init__("torch")
        self._torch = torch_module

    def __getattr__(self, name: str) -> Any:
        if name == "cuda":
            return cpu_platform.CPU_PLATFORM
        return getattr(self._torch, name)


def _tensor_stays(self: Any, *args: Any, **kwargs: Any) -> Any:
    """``Tensor.cuda()`` on a node whose one device is the CPU: the tensor, where it is."""
    del args, kwargs
    return self


def _to_cpu(data: Any, device: Any, *args: Any, **kwargs: Any) -> Any:
    """RLinf's ``put_tensor_device`` with any ``cuda:N`` the caller names read as the CPU."""
    del device
    return _RLINF_PUT_TENSOR_DEVICE(data, cpu_platform.DEVICE_TYPE, *args, **kwargs)


_RLINF_PUT_TENSOR_DEVICE = async_ppo_fsdp_worker.put_tensor_device


@contextlib.contextmanager
def on_cpu_devices() -> Iterator[None]:
    """On a node without an accelerator, the CUDA devices RLinf's async training round names
    (``torch.cuda`` in its module, the ``cuda:LOCAL_RANK`` it moves micro-batches to, and
    ``Tensor.cuda()`` in the advantage normalization it calls) are the CPU for the block;
    elsewhere nothing changes. RLinf's synchronous actor asks the platform for its device and
    normalizes nowhere else, so only the async one needs this."""
    if not cpu_platform.is_installed():
        yield
        return
    import torch

    module = async_ppo_fsdp_worker
    saved = module.torch, module.put_tensor_device, torch.Tensor.cuda
    module.torch, module.put_tensor_device = _CpuTorch(saved[0]), _to_cpu
    torch.Tensor.cuda = _tensor_stays  # type: ignore[method-assign]
    try:
        yield
    finally:
        module.torch, module.put_tensor_device, torch.Tensor.cuda = saved
