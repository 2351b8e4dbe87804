"""A CPU stand-in for RLinf's torch platform, active only on nodes without an accelerator.

Design notes: docs/design/launch-and-supervision.md.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch

DEVICE_TYPE = "cpu"


class NullSync:
    """A stream or event on a device that runs everything in order: every wait is already over."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs

    def synchronize(self) -> None:
        """Nothing is pending on the CPU."""

    def wait_stream(self, stream: Any) -> None:
        """Streams never overlap on the CPU."""

    def wait_event(self, event: Any) -> None:
        """Events are always complete on the CPU."""

    def wait(self, stream: Any = None) -> None:
        """Events are always complete on the CPU."""

    def record(self, stream: Any = None) -> None:
        """Nothing to timestamp: the work is already done."""

    def record_event(self, event: Any = None) -> NullSync:
        """Return a completed event."""
        return event if event is not None else NullSync()

    def query(self) -> bool:
        """Always complete."""
        return True

    def elapsed_time(self, end_event: Any) -> float:
        """No device timing on the CPU."""
        return 0.0


class CpuPlatform:
    """The subset of ``torch.cuda``'s interface that RLinf's workers call, answered for the CPU.

    Memory statistics are zeros (there is no device memory to report) and seeding goes through
    torch's CPU generator.
    """

    Stream = NullSync
    Event = NullSync

    def __init__(self) -> None:
        self._stream = NullSync()

    def is_available(self) -> bool:
        """The CPU is always there."""
        return True

    def is_initialized(self) -> bool:
        """The CPU needs no initialisation."""
        return True

    def device_count(self) -> int:
        """One logical device, the one :meth:`current_device` names."""
        return 1

    def current_device(self) -> torch.device:
        """The device tensors are placed on."""
        return torch.device(DEVICE_TYPE)

    def set_device(self, device: Any) -> None:
        """Nothing to select: there is one CPU device."""

    def synchronize(self, device: Any = None) -> None:
        """CPU work is synchronous."""

    def current_stream(self, device: Any = None) -> NullSync:
        """The one (in-order) stream."""
        return self._stream

    def default_stream(self, device: Any = None) -> NullSync:
        """The one (in-order) stream."""
        return self._stream

    @contextlib.contextmanager
    def stream(self, stream: Any = None) -> Iterator[None]:
        """Running "on a stream" changes nothing on the CPU."""
        yield

    def empty_cache(self) -> None:
        """No caching allocator to trim."""

    def ipc_collect(self) -> None:
        """No inter-process device memory to release."""

    def memory_allocated(self, device: Any = None) -> int:
        """No device memory: 0 bytes."""
        return 0

    def memory_reserved(self, device: Any = None) -> int:
        """No device memory: 0 bytes."""
        return 0

    def max_memory_allocated(self, device: Any = None) -> int:
        """No device memory: 0 bytes."""
        return 0

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        """No device memory statistics to reset."""

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        """(free, total) device memory: none."""
        return 0, 0

    def manual_seed(self, seed: int) -> None:
        """Seed torch's CPU generator."""
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        """Seed torch's CPU generator."""
        torch.manual_seed(seed)

    def get_rng_state(self, device: Any = None) -> torch.Tensor:
        """State of torch's CPU generator."""
        return torch.get_rng_state()

    def set_rng_state(self, state: torch.Tensor, device: Any = None) -> None:
        """Restore torch's CPU generator."""
        torch.set_rng_state(state)

    def __getattr__(self, name: str) -> Any:
        # Name the gap instead of RLinf's later "'NoneType' object has no attribute ...".
        raise AttributeError(
            f"dexrl's CPU platform has no '{name}': an RLinf code path that needs an accelerator "
            "ran on a node without one"
        )


CPU_PLATFORM = CpuPlatform()

_INSTALLED_FLAG = "_dexrl_cpu_platform"


@functools.cache
def node_has_accelerator() -> bool:
    """Whether RLinf detects an accelerator on this node (cached: it probes the hardware)."""
    from rlinf.scheduler.hardware import AcceleratorType, AcceleratorUtil

    return AcceleratorUtil.get_accelerator_type() != AcceleratorType.NO_ACCEL


def is_installed() -> bool:
    """Whether this process hands out the CPU platform."""
    from rlinf.scheduler.hardware import AcceleratorUtil

    return getattr(AcceleratorUtil.get_torch_platform, _INSTALLED_FLAG, False)


def install(worker: Any = None) -> bool:
    """Hand out :data:`CPU_PLATFORM` for ``NO_ACCEL``, only on a node without an accelerator.

    Idempotent. Also replaces a ``None`` platform already copied onto RLinf's ``Worker`` class and,
    when given, onto a worker instance (RLinf copies both before it loads extension modules).

    Args:
        worker: An RLinf ``Worker`` instance whose copied attributes should be fixed too.

    Returns:
        True when the CPU platform is active in this process.
    """
    if node_has_accelerator():
        return False
    from rlinf.scheduler import Worker
    from rlinf.scheduler.hardware import AcceleratorType, AcceleratorUtil

    if not is_installed():
        original_platform = AcceleratorUtil.get_torch_platform
        original_device_type = AcceleratorUtil.get_device_type

        def get_torch_platform(accelerator_type: AcceleratorType) -> Any:
            if accelerator_type == AcceleratorType.NO_ACCEL:
                return CPU_PLATFORM
            return original_platform(accelerator_type)

        def get_device_type(accelerator_type: AcceleratorType) -> str | None:
            if accelerator_type == AcceleratorType.NO_ACCEL:
                return DEVICE_TYPE
            return original_device_type(accelerator_type)

        setattr(get_torch_platform, _INSTALLED_FLAG, True)
        AcceleratorUtil.get_torch_platform = staticmethod(get_torch_platform)
        AcceleratorUtil.get_device_type = staticmethod(get_device_type)

    for holder in (Worker, worker):
        if holder is None:
            continue
        if getattr(holder, "torch_platform", None) is None:
            holder.torch_platform = CPU_PLATFORM
        if getattr(holder, "torch_device_type", None) is None:
            holder.torch_device_type = DEVICE_TYPE
    return True
