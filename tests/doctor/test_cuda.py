"""Check 2: CUDA devices and placement, with fake facts; the real probe on this CPU machine."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from dexrl.doctor import GIB
from dexrl.doctor.cuda import (
    CudaFacts,
    Gpu,
    check_devices,
    check_placement,
    gpus_needed_per_node,
    probe_cuda,
)


def gpus(n: int, free: float = 79.0) -> tuple[Gpu, ...]:
    return tuple(Gpu(i, "NVIDIA H100 80GB HBM3", int(free * GIB), int(80 * GIB)) for i in range(n))


def facts(**kw: object) -> CudaFacts:
    base: dict[str, object] = {"torch": "2.6.0+cu124", "torch_cuda": "12.4", "available": True,
                               "gpus": gpus(8), "driver": "550.54.15", "smi_gpus": 8}
    base.update(kw)
    return CudaFacts(**base)  # type: ignore[arg-type]


def cfg(placement: object, nodes: int = 1) -> object:
    return OmegaConf.create({"cluster": {"num_nodes": nodes,
                                         "component_placement": placement}})


def test_devices_ok() -> None:
    result = check_devices(facts())
    assert result.status == "ok"
    assert "8 GPU(s) (NVIDIA H100 80GB HBM3), driver 550.54.15, CUDA 12.4" in result.finding


def test_busy_gpu_warns() -> None:
    result = check_devices(facts(gpus=(*gpus(1), Gpu(1, "H100", int(10 * GIB), int(80 * GIB)))))
    assert result.status == "warn"
    assert "GPU 1: 10.0 of 80.0 GiB free" in result.finding


@pytest.mark.parametrize(("kw", "expected", "fix"), [
    ({"torch": "2.13.0+cpu", "torch_cuda": None}, "CPU-only build", "--smoke"),
    ({"visible": ""}, "CUDA_VISIBLE_DEVICES='' hides every GPU", "unset CUDA_VISIBLE_DEVICES"),
    ({"warnings": ("CUDA initialization: The NVIDIA driver on your system is too old",)},
     "nvidia-smi lists 8 GPU(s) (driver 550.54.15) but torch (CUDA 12.4) cannot use them: "
     "CUDA initialization: The NVIDIA driver", "driver supports"),
    ({"smi_gpus": None, "driver": None}, "no NVIDIA GPU or driver found", "--smoke"),
])
def test_devices_fail_with_the_reason(kw: dict[str, object], expected: str, fix: str) -> None:
    result = check_devices(facts(available=False, gpus=(), **kw))
    assert result.status == "fail"
    assert expected in result.finding
    assert fix in result.fix


@pytest.mark.parametrize(("placement", "nodes", "need"), [
    ({"actor,env,rollout": "all"}, 1, 1),
    ({"actor,rollout": "0-3", "env": "4-5"}, 1, 6),
    ({"actor,env,rollout": "0-15"}, 2, 8),
    ({"actor": 3, "env,rollout": "all"}, 1, 4),
])
def test_gpus_needed_per_node(placement: dict, nodes: int, need: int) -> None:
    assert gpus_needed_per_node(cfg(placement, nodes)) == need


def test_placement_paths() -> None:
    assert check_placement(facts(), None).status == "skip"
    assert check_placement(facts(), cfg({"actor,env,rollout": "0-7"})).status == "ok"
    short = check_placement(facts(gpus=gpus(4)), cfg({"actor,env,rollout": "0-7"}))
    assert short.status == "fail"
    assert "needs 8 GPU(s) per node on 1 node(s); this node has 4" in short.finding
    none = check_placement(facts(available=False, gpus=()), cfg({"actor,env,rollout": "all"}))
    assert none.status == "fail"


def test_device_ids_follow_cuda_visible_devices() -> None:
    assert facts(gpus=gpus(2), visible="2,5").device_ids() == ["2", "5"]
    assert facts(gpus=gpus(2), visible=None).device_ids() == ["0", "1"]


@pytest.mark.spawns
def test_real_probe_on_this_machine_fails_clearly_without_a_gpu() -> None:
    real = probe_cuda(timeout=120)
    if real.available:
        pytest.skip("this machine has a usable GPU")
    result = check_devices(real)
    assert result.status == "fail"
    assert "training needs NVIDIA GPUs" in result.finding


def test_a_hung_cuda_probe_is_a_fail_row(monkeypatch: pytest.MonkeyPatch) -> None:
    from dexrl.doctor import cuda
    from dexrl.doctor.context import Budget, Context
    from dexrl.subproc import ProbeError

    def hang(_timeout: float) -> CudaFacts:
        raise ProbeError("no answer within 90 s (killed)")

    monkeypatch.setattr(cuda, "probe_cuda", hang)
    rows = list(cuda.run(Context(Budget(60))))
    assert [(r.id, r.status) for r in rows] == [("cuda.devices", "fail")]
    assert "no answer within 90 s" in rows[0].finding and "nvidia-smi" in rows[0].fix


def test_smallest_gpu_gb_reads_the_probe_and_none_without_a_driver(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dexrl.doctor import cuda

    mixed = (Gpu(0, "NVIDIA H100 80GB HBM3", 0, int(80 * GIB)),
             Gpu(1, "NVIDIA RTX 4090", 0, int(24 * GIB)))
    monkeypatch.setattr(cuda.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(cuda, "probe_cuda", lambda timeout: facts(gpus=mixed))
    assert cuda.smallest_gpu_gb() == pytest.approx(24 * GIB / 1e9)
    monkeypatch.setattr(cuda, "probe_cuda", lambda timeout: facts(gpus=()))
    assert cuda.smallest_gpu_gb() is None
    monkeypatch.setattr(cuda.shutil, "which", lambda name: None)  # no driver: no probe at all
    monkeypatch.setattr(cuda, "probe_cuda", lambda timeout: pytest.fail("probed"))
    assert cuda.smallest_gpu_gb() is None
