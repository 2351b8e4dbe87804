"""Check 3: GL settings, NVIDIA EGL files and offscreen renders (fakes, plus real renders here)."""

from __future__ import annotations

import ctypes.util
import json
from pathlib import Path

import pytest

from dexrl.doctor.render import (
    GlSetup,
    RenderAttempt,
    attempt_render,
    check_backend,
    check_egl_vendor,
    check_offscreen,
    egl_vendor_files,
    render_env,
)

NVIDIA = (("/usr/share/glvnd/egl_vendor.d/10_nvidia.json", "libEGL_nvidia.so.0"),)
MESA = (("/usr/share/glvnd/egl_vendor.d/50_mesa.json", "libEGL_mesa.so.0"),)


def setup(gl: str | None = None, platform: str | None = None, display: str | None = None,
          vendors: tuple = NVIDIA + MESA, lib: str | None = "libEGL_nvidia.so.0") -> GlSetup:
    return GlSetup(gl, platform, display, vendors, lib)


def gpu_attempt(device: str, renderer: str = "NVIDIA H100/PCIe/SSE2", fps: float = 900.0,
                error: str | None = None) -> RenderAttempt:
    return RenderAttempt(device, "egl", error is None, 1.0, None if error else fps,
                         None if error else renderer, None if error else "NVIDIA Corporation",
                         error)


@pytest.mark.parametrize(("gl", "platform", "display", "status", "text"), [
    (None, None, None, "ok", "renders with egl (robosuite's default)"),
    ("egl", "egl", None, "ok", "renders with egl"),
    ("osmesa", None, None, "ok", "renders with osmesa"),
    ("glfw", None, None, "ok", "renders with egl"),  # robosuite overrides glfw with EGL
    ("egl", "osmesa", None, "fail", "refuses this PYOPENGL_PLATFORM"),
    ("osmesa", "egl", None, "fail", "refuses this PYOPENGL_PLATFORM"),
    ("glx", None, None, "fail", "GLX needs an X display"),
    ("glx", None, ":0", "ok", "renders with glx"),
    ("off", None, None, "fail", "rendering is disabled"),
    ("vulkan", None, None, "fail", "not a MuJoCo GL backend"),
])
def test_backend(gl: str | None, platform: str | None, display: str | None, status: str,
                 text: str) -> None:
    result = check_backend(setup(gl, platform, display))
    assert result.status == status
    assert text in result.finding


def test_egl_vendor_paths() -> None:
    assert check_egl_vendor(setup(), 8).status == "ok"
    missing = check_egl_vendor(setup(vendors=MESA), 8)
    assert missing.status == "fail"
    assert "no NVIDIA EGL vendor file" in missing.finding
    assert "10_nvidia.json" in missing.fix
    no_lib = check_egl_vendor(setup(lib=None), 8)
    assert no_lib.status == "fail"
    assert "libEGL_nvidia is not installed" in no_lib.finding
    assert check_egl_vendor(setup(vendors=MESA, lib=None), 0).status == "skip"
    assert check_egl_vendor(setup("osmesa"), 8).status == "skip"


def test_vendor_files_are_read_from_the_glvnd_dirs(tmp_path: Path) -> None:
    (tmp_path / "10_nvidia.json").write_text(json.dumps(
        {"file_format_version": "1.0.0", "ICD": {"library_path": "libEGL_nvidia.so.0"}}))
    (tmp_path / "broken.json").write_text("{")
    found = egl_vendor_files({"__EGL_VENDOR_LIBRARY_DIRS": str(tmp_path)})
    assert found == [(str(tmp_path / "10_nvidia.json"), "libEGL_nvidia.so.0"),
                     (str(tmp_path / "broken.json"), "(unreadable)")]
    only = egl_vendor_files({"__EGL_VENDOR_LIBRARY_FILENAMES": str(tmp_path / "10_nvidia.json")})
    assert [lib for _, lib in only] == ["libEGL_nvidia.so.0"]


def test_offscreen_ok_on_every_gpu() -> None:
    result = check_offscreen([gpu_attempt("0"), gpu_attempt("1", fps=700.0)], 2, False)
    assert result.status == "ok"
    assert result.finding.startswith("2 GPU(s): NVIDIA H100/PCIe/SSE2")
    assert "700 frames/s" in result.finding


def test_offscreen_egl_device_mismatch_fails_with_the_egl_fix() -> None:
    error = ("RuntimeError: The MUJOCO_EGL_DEVICE_ID environment variable must be an integer "
             "between 0 and 0 (inclusive), got 3.")
    result = check_offscreen([gpu_attempt("0"), gpu_attempt("3", error=error)], 4, False)
    assert result.status == "fail"
    assert result.finding.startswith("GPU 3: RuntimeError: The MUJOCO_EGL_DEVICE_ID")
    assert "(1 of 2 renders failed)" in result.finding
    assert "EGL sees fewer devices than CUDA" in result.fix


def test_offscreen_software_renderer_warns() -> None:
    soft = RenderAttempt(None, "osmesa", True, 2.0, 40.0, "llvmpipe (LLVM 15.0.6, 256 bits)",
                         "Mesa/X.org")
    result = check_offscreen([soft], 0, False)
    assert result.status == "warn"
    assert "software renderer" in result.finding
    on_gpu = check_offscreen([gpu_attempt("0", renderer="llvmpipe (LLVM 15)")], 1, False)
    assert on_gpu.status == "warn"
    assert "10_nvidia.json" in on_gpu.fix


def test_offscreen_osmesa_missing_fails() -> None:
    bad = RenderAttempt(None, "osmesa", False, 0.1,
                        error="RuntimeError: MUJOCO_GL=osmesa but libOSMesa is not installed")
    result = check_offscreen([bad], 0, False)
    assert result.status == "fail"
    assert "libosmesa6" in result.fix


def test_quick_renders_note_the_scope() -> None:
    assert "(--quick: first GPU only)" in check_offscreen([gpu_attempt("0")], 8, True).finding


def test_render_env_mirrors_rlinf_for_a_gpu_worker() -> None:
    assert render_env("egl", "3") == {"MUJOCO_GL": "egl", "CUDA_VISIBLE_DEVICES": "3",
                                      "MUJOCO_EGL_DEVICE_ID": "3"}
    assert render_env("osmesa", None) == {"MUJOCO_GL": "osmesa"}


@pytest.mark.spawns
def test_real_egl_render_here() -> None:
    """This machine renders with EGL (Mesa llvmpipe, no GPU): a real render, timed."""
    attempt = attempt_render("egl", None, timeout=120)
    if not attempt.ok:
        pytest.skip(f"EGL does not work on this machine: {attempt.error}")
    assert attempt.fps and attempt.fps > 0
    assert check_offscreen([attempt], 0, False).status in ("ok", "warn")


@pytest.mark.spawns
def test_real_osmesa_render_here() -> None:
    attempt = attempt_render("osmesa", None, timeout=120)
    result = check_offscreen([attempt], 0, False)
    if ctypes.util.find_library("OSMesa"):
        assert result.status in ("ok", "warn")
    else:
        assert result.status == "fail"
        assert "libOSMesa is not installed" in result.finding


@pytest.mark.spawns
def test_real_egl_device_out_of_range_fails() -> None:
    """RLinf's variables for GPU 63 on a machine whose EGL has fewer devices."""
    attempt = attempt_render("egl", "63", timeout=120)
    result = check_offscreen([attempt], 64, False)
    assert result.status == "fail"
    assert "GPU 63" in result.finding


def test_area_renders_per_gpu_and_only_the_first_with_quick(monkeypatch: pytest.MonkeyPatch,
                                                            ) -> None:
    from dexrl.doctor import render
    from dexrl.doctor.context import Budget, Context
    from dexrl.doctor.cuda import CudaFacts, Gpu

    calls: list[tuple[str, str | None]] = []

    def fake_attempt(backend: str, device: str | None, timeout: float) -> RenderAttempt:
        calls.append((backend, device))
        return gpu_attempt(device or "?")

    monkeypatch.setattr(render, "attempt_render", fake_attempt)
    monkeypatch.setattr(render, "probe_setup", lambda: setup())
    gpus = tuple(Gpu(i, "H100", 1, 1) for i in range(4))
    for quick, expected in ((False, ["2", "3", "5", "7"]), (True, ["2"])):
        calls.clear()
        ctx = Context(Budget(60), quick=quick)
        ctx.facts["cuda"] = CudaFacts("2.6", "12.4", True, gpus, visible="2,3,5,7")
        rows = list(render.run(ctx))
        assert [d for _, d in calls] == expected
        assert [r.status for r in rows] == ["ok", "ok", "ok"]
    calls.clear()
    list(render.run(Context(Budget(60))))  # no CUDA facts: one render, no device
    assert calls == [("egl", None)]
