"""The CPU stand-in for RLinf's torch platform, and when it is (not) installed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from rlinf.scheduler.hardware import AcceleratorType, AcceleratorUtil

from dexrl.bridge.launch import cpu_platform
from dexrl.bridge.launch.cpu_platform import CPU_PLATFORM, CpuPlatform

GPU_PLATFORM = object()  # what a fake accelerator manager hands out


@pytest.fixture
def rlinf_as_shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """RLinf's lookups as 0.3.0 ships them for NO_ACCEL (None), a GPU type answered by a fake.

    monkeypatch restores the real functions and Worker attributes afterwards.
    """
    from rlinf.scheduler import Worker

    def platform(accel: AcceleratorType) -> object:
        return None if accel == AcceleratorType.NO_ACCEL else GPU_PLATFORM

    def device_type(accel: AcceleratorType) -> str | None:
        return None if accel == AcceleratorType.NO_ACCEL else "cuda"

    monkeypatch.setattr(AcceleratorUtil, "get_torch_platform", staticmethod(platform))
    monkeypatch.setattr(AcceleratorUtil, "get_device_type", staticmethod(device_type))
    monkeypatch.setattr(Worker, "torch_platform", None)
    monkeypatch.setattr(Worker, "torch_device_type", None)


def test_platform_answers_what_rlinf_workers_call() -> None:
    p = CpuPlatform()
    assert p.is_available() and p.is_initialized()
    assert torch.zeros(2, device=p.current_device()).device.type == "cpu"
    p.set_device(0)
    p.synchronize()
    p.empty_cache()
    p.ipc_collect()
    with p.stream(p.Stream()):
        p.current_stream().synchronize()
    event = p.Event()
    event.record()
    event.wait()
    assert event.query() and p.current_stream().record_event().query()
    assert (p.memory_allocated(), p.memory_reserved(), p.max_memory_allocated()) == (0, 0, 0)
    assert p.mem_get_info() == (0, 0)


def test_rng_state_and_seeding_go_through_torch() -> None:
    p = CpuPlatform()
    p.manual_seed(123)
    first = torch.rand(3)
    state = p.get_rng_state()
    second = torch.rand(3)
    p.set_rng_state(state)
    assert torch.equal(torch.rand(3), second)
    p.manual_seed_all(123)
    assert torch.equal(torch.rand(3), first)


def test_missing_attribute_names_the_gap() -> None:
    with pytest.raises(AttributeError, match="CPU platform has no 'get_device_properties'"):
        CPU_PLATFORM.get_device_properties(0)


def test_install_hands_out_cpu_platform_for_no_accel_only(
    rlinf_as_shipped: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlinf.scheduler import Worker

    monkeypatch.setattr(cpu_platform, "node_has_accelerator", lambda: False)
    worker = SimpleNamespace(torch_platform=None, torch_device_type=None)
    assert cpu_platform.install(worker)
    assert AcceleratorUtil.get_torch_platform(AcceleratorType.NO_ACCEL) is CPU_PLATFORM
    assert AcceleratorUtil.get_device_type(AcceleratorType.NO_ACCEL) == "cpu"
    assert AcceleratorUtil.get_torch_platform(AcceleratorType.NV_GPU) is GPU_PLATFORM
    assert AcceleratorUtil.get_device_type(AcceleratorType.NV_GPU) == "cuda"
    assert Worker.torch_platform is CPU_PLATFORM and Worker.torch_device_type == "cpu"
    assert worker.torch_platform is CPU_PLATFORM and worker.torch_device_type == "cpu"
    wrapped = AcceleratorUtil.get_torch_platform
    assert cpu_platform.install() and AcceleratorUtil.get_torch_platform is wrapped  # idempotent


def test_install_does_nothing_on_a_node_with_an_accelerator(
    rlinf_as_shipped: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlinf.scheduler import Worker

    monkeypatch.setattr(cpu_platform, "node_has_accelerator", lambda: True)
    shipped = AcceleratorUtil.get_torch_platform
    assert not cpu_platform.install(SimpleNamespace(torch_platform=None))
    assert AcceleratorUtil.get_torch_platform is shipped
    assert AcceleratorUtil.get_torch_platform(AcceleratorType.NO_ACCEL) is None
    assert Worker.torch_platform is None


def test_rlinf_helpers_run_on_the_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """RLinf's own memory and RNG helpers, which workers call every step, accept the stand-in."""
    from rlinf.scheduler import Worker
    from rlinf.utils import utils as rlinf_utils

    monkeypatch.setattr(Worker, "torch_platform", CPU_PLATFORM)
    monkeypatch.setattr(Worker, "torch_device_type", "cpu")
    rlinf_utils.clear_memory()
    state = rlinf_utils.get_rng_state()
    expected = torch.rand(4)
    rlinf_utils.set_rng_state(state)
    assert torch.equal(torch.rand(4), expected)
