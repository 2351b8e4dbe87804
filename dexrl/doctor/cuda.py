"""Check 2, CUDA: devices, driver, free memory, and enough GPUs for the config's placement.

torch's CUDA initialisation runs in a child interpreter (:mod:`dexrl.subproc`): a broken
driver can hang it, and the doctor must not hang with it.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from omegaconf import DictConfig

from dexrl.config.placement import parse_placement
from dexrl.config.settings import given, settings_of
from dexrl.doctor import GIB, CheckResult, fail, guarded, ok, skip, warn
from dexrl.doctor.context import NO_CONFIG_FIX, Context
from dexrl.errors import one_line
from dexrl.subproc import ProbeError, run_probe

SMOKE_HINT = "on this machine, `dexrl train --suite S --model M --smoke` runs the CPU smoke test"
BUSY_FRACTION = 0.8  # less free memory than this means another process holds the GPU


@dataclass(frozen=True)
class Gpu:
    """One CUDA device as torch sees it."""

    index: int
    name: str
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class CudaFacts:
    """What torch and the driver report.

    Attributes:
        torch: torch's version.
        torch_cuda: The CUDA version torch was built with (``None``: a CPU-only build).
        available: ``torch.cuda.is_available()``.
        gpus: The devices torch sees.
        visible: ``CUDA_VISIBLE_DEVICES`` (``None``: unset).
        driver: The NVIDIA driver version from ``nvidia-smi`` (``None``: not found).
        smi_gpus: GPUs ``nvidia-smi`` lists (``None``: ``nvidia-smi`` not found).
        warnings: CUDA warnings torch raised while initialising.
    """

    torch: str
    torch_cuda: str | None
    available: bool
    gpus: tuple[Gpu, ...] = ()
    visible: str | None = None
    driver: str | None = None
    smi_gpus: int | None = None
    warnings: tuple[str, ...] = ()

    def device_ids(self) -> list[str]:
        """Ids RLinf gives its workers (``CUDA_VISIBLE_DEVICES`` entries, else 0..n-1)."""
        listed = [v.strip() for v in (self.visible or "").split(",") if v.strip()]
        if listed and len(listed) == len(self.gpus):
            return listed
        return [str(g.index) for g in self.gpus]


def torch_cuda_facts() -> dict[str, Any]:
    """Child-side probe: torch's view of CUDA, as a dict."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch

        available = torch.cuda.is_available()
        gpus = []
        for i in range(torch.cuda.device_count() if available else 0):
            free, total = torch.cuda.mem_get_info(i)
            gpus.append({"index": i, "name": torch.cuda.get_device_name(i),
                         "free_bytes": int(free), "total_bytes": int(total)})
    return {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "available": available,
            "gpus": gpus, "warnings": [one_line(w.message, typed=False) for w in caught
                                       if "cuda" in str(w.message).lower()]}


def nvidia_smi(timeout: float) -> tuple[str | None, int | None]:
    """(driver version, GPU count) from ``nvidia-smi``; (None, None) when it is not installed."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None, 0
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    return (lines[0] if lines else None), len(lines)


def probe_cuda(timeout: float) -> CudaFacts:
    """Gather :class:`CudaFacts` (torch in a child interpreter, then ``nvidia-smi``)."""
    raw = run_probe(torch_cuda_facts, timeout=timeout)
    driver, smi = nvidia_smi(min(timeout, 15.0))
    return CudaFacts(raw["torch"], raw["torch_cuda"], raw["available"],
                     tuple(Gpu(**g) for g in raw["gpus"]), os.environ.get("CUDA_VISIBLE_DEVICES"),
                     driver, smi, tuple(raw["warnings"]))


def smallest_gpu_gb(timeout: float = 60.0) -> float | None:
    """Memory of the smallest GPU torch sees here, in GB, from the probe the doctor runs (a
    child interpreter: the caller holds no CUDA context); None on a machine without NVIDIA's
    driver (no ``nvidia-smi``), without a visible GPU, or when the probe fails."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        facts = probe_cuda(timeout)
    except ProbeError:
        return None
    sizes = [g.total_bytes for g in facts.gpus]
    return min(sizes) / 1e9 if sizes else None


def check_devices(f: CudaFacts) -> CheckResult:
    """Are CUDA GPUs usable? Without one this is a clear ``fail`` for training, with the reason."""
    facts = {"torch": f.torch, "torch_cuda": f.torch_cuda, "driver": f.driver,
             "gpus": [asdict(g) for g in f.gpus]}
    if f.available and f.gpus:
        names = sorted({g.name for g in f.gpus})
        busy = [g for g in f.gpus if g.free_bytes < BUSY_FRACTION * g.total_bytes]
        head = (f"{len(f.gpus)} GPU(s) ({', '.join(names)}), driver {f.driver or 'unknown'}, "
                f"CUDA {f.torch_cuda} (torch {f.torch})")
        if busy:
            used = ", ".join(f"GPU {g.index}: {g.free_bytes / GIB:.1f} of "
                             f"{g.total_bytes / GIB:.1f} GiB free" for g in busy)
            return warn("cuda.devices", f"{head}; another process holds memory ({used})",
                        "stop that process (`nvidia-smi` lists it) or leave the GPU out of "
                        "CUDA_VISIBLE_DEVICES", **facts)
        free = ", ".join(f"{g.free_bytes / GIB:.0f}" for g in f.gpus)
        return ok("cuda.devices", f"{head}; free GiB per GPU: {free}", **facts)
    if f.visible is not None and f.visible.strip() in ("", "-1"):
        return fail("cuda.devices", f"CUDA_VISIBLE_DEVICES={f.visible!r} hides every GPU",
                    "unset CUDA_VISIBLE_DEVICES or list the GPU ids to use", **facts)
    if f.torch_cuda is None:
        return fail("cuda.devices",
                    f"no CUDA: torch {f.torch} is a CPU-only build, and training needs NVIDIA GPUs",
                    f"on GPU machines install a CUDA build of torch; {SMOKE_HINT}", **facts)
    if f.smi_gpus:
        why = f.warnings[0] if f.warnings else "torch.cuda.is_available() is False"
        return fail("cuda.devices",
                    f"nvidia-smi lists {f.smi_gpus} GPU(s) (driver {f.driver}) but torch "
                    f"(CUDA {f.torch_cuda}) cannot use them: {why}",
                    "install a torch build whose CUDA version this driver supports, or update "
                    "the driver", **facts)
    return fail("cuda.devices",
                f"no NVIDIA GPU or driver found (torch {f.torch}, CUDA {f.torch_cuda}); "
                "training needs NVIDIA GPUs",
                f"run on a machine with NVIDIA GPUs and their driver; {SMOKE_HINT}", **facts)


def gpus_needed_per_node(cfg: DictConfig) -> int:
    """GPUs each node needs for ``cluster.component_placement`` (ids are global over nodes)."""
    cluster = settings_of(cfg).cluster
    nodes = int(cluster.num_nodes or 1)
    need = 1  # "all" needs at least one GPU per node
    for spec in (cluster.component_placement or {}).values():
        if isinstance(spec, str) and spec.strip() == "all":
            continue
        try:
            ids = parse_placement(spec, 0)
        except ValueError:
            continue  # the config check reports bad grammar
        if ids:
            need = max(need, math.ceil((max(ids) + 1) / nodes))
    return need


def check_placement(f: CudaFacts, cfg: DictConfig | None) -> CheckResult:
    """Does this node have the GPUs the config's placement uses?"""
    if cfg is None:
        return skip("cuda.placement", "no config to place", NO_CONFIG_FIX)
    need = gpus_needed_per_node(cfg)
    have = len(f.gpus) if f.available else 0
    nodes = given(settings_of(cfg).cluster.num_nodes, 1)
    if have < need:
        return fail("cuda.placement",
                    f"cluster.component_placement needs {need} GPU(s) per node on {nodes} "
                    f"node(s); this node has {have}",
                    f"run where each node has {need} GPU(s), or change "
                    f"cluster.component_placement; {SMOKE_HINT}", need_per_node=need, have=have)
    return ok("cuda.placement", f"placement needs {need} GPU(s) per node; this node has {have}",
              need_per_node=need, have=have)


def run(ctx: Context) -> Iterator[CheckResult]:
    """Probe CUDA and check devices and placement."""
    start = time.monotonic()
    try:
        facts = probe_cuda(ctx.budget.timeout(90.0))
    except ProbeError as exc:  # torch's CUDA init crashed or hung
        yield fail("cuda.devices", f"torch's CUDA initialisation failed: {exc}",
                   "check the driver with `nvidia-smi`; training would fail or hang the same way")
        return
    ctx.facts["cuda"] = facts
    yield guarded("cuda.devices", check_devices, facts).timed(time.monotonic() - start)
    yield guarded("cuda.placement", check_placement, facts, ctx.cfg)
